"""pydoll path: ``Chrome().connect(browser_ws)`` to the runner's engine, a fresh browser context
per attempt, and pydoll's own high-level surface where it has one (``go_to``, ``refresh``,
``query``, ``WebElement.click``, ``clear`` + ``insert_text``); the remaining reads and waits go
through the tab's own CDP command channel, as pydoll exposes it."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import raw_cdp_ops
from adapter_common import Budget, Driver, State, main
from pydoll.browser.chromium import Chrome

PAGE_EVENTS = ("Page.loadEventFired", "Page.navigatedWithinDocument", "Page.frameNavigated")


class Session:
    def __init__(self, browser: Chrome) -> None:
        self.browser = browser
        self.tab: Any = None
        self.session_id: str | None = None  # set once a page exists (raw ops read it)
        self.context_id: str | None = None
        self.events: list[str] = []
        self.metrics = {"cdp_call_count": 0, "cdp_error_count": 0}

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.metrics["cdp_call_count"] += 1
        owner = self.tab if self.tab is not None else self.browser
        reply = await owner._execute_command({"method": method, "params": params})
        if "error" in reply:
            self.metrics["cdp_error_count"] += 1
            raise RuntimeError(reply["error"].get("message", str(reply["error"])))
        return dict(reply.get("result", {}))


async def connect(payload: dict[str, Any], budget: Budget) -> Session:
    browser = Chrome()
    await browser.connect(payload["browser_ws"])
    return Session(browser)


async def live_product(session: Session) -> str:
    return str((await session.browser.get_version())["product"])


async def close(session: Session) -> None:
    if session.context_id:
        await session.browser.delete_browser_context(session.context_id)
    # The engine belongs to the runner: only pydoll's connections are closed.
    for handler in [
        session.tab and session.tab._connection_handler,
        session.browser._connection_handler,
    ]:
        if handler is not None:
            await handler.close()


async def new_page(s: Session, step: dict[str, Any], state: State) -> str:
    # One context per attempt: a second page shares the first one's storage, like a second tab.
    if s.context_id is None:
        s.context_id = await s.browser.create_browser_context()
    s.tab = await s.browser.new_tab(browser_context_id=s.context_id)
    s.session_id = "tab"
    await s.tab.enable_page_events()
    for name in PAGE_EVENTS:
        await s.tab.on(name, lambda event, name=name: s.events.append(name))
    return "tab"


async def goto(s: Session, step: dict[str, Any], state: State) -> Any:
    await s.tab.go_to(step["url"], timeout=max(1, int(state.budget.wait(step.get("timeout_ms")))))
    return await s.tab.current_url


async def reload(s: Session, step: dict[str, Any], state: State) -> Any:
    await s.tab.refresh()
    return await s.tab.current_url


async def element(s: Session, step: dict[str, Any], state: State) -> Any:
    timeout = max(1, int(state.budget.wait(step.get("timeout_ms"))))
    return await s.tab.query(step["selector"], timeout=timeout)


async def click(s: Session, step: dict[str, Any], state: State) -> str:
    target = await element(s, step, state)
    for _ in range(step.get("times") or 1):
        await target.click(hold_time=0.0)
    return str(step["selector"])


async def fill(s: Session, step: dict[str, Any], state: State) -> str:
    target = await element(s, step, state)
    await target.clear()
    if step["value"]:
        await target.insert_text(step["value"])
    return str(step["value"])


async def focus(s: Session, step: dict[str, Any], state: State) -> str:
    await (await element(s, step, state)).focus()
    return str(step["selector"])


OPS = {
    **raw_cdp_ops.OPS,
    "new_page": new_page,
    "goto": goto,
    "reload": reload,
    "click": click,
    "fill": fill,
    "focus": focus,
}

main(
    Driver(
        f"pydoll-python {importlib.metadata.version('pydoll-python')}",
        "pydoll",
        connect,
        live_product,
        close,
        OPS,
    )
)
