"""pydoll path: ``Chrome().connect(browser_ws)`` to the runner's engine, a fresh browser context
per attempt, and pydoll's own high-level surface where it has one (``go_to``, ``refresh``,
``query``, ``WebElement.click``, ``clear`` + ``insert_text``); the remaining reads and waits go
through the tab's own CDP command channel, as pydoll exposes it."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import raw_cdp_more
import raw_cdp_ops
from adapter_common import LOCAL_OPS, Budget, Driver, State, close_targets, main
from pydoll.browser.chromium import Chrome

PAGE_EVENTS = ("Page.loadEventFired", "Page.navigatedWithinDocument", "Page.frameNavigated")


class Session:
    def __init__(self, browser: Chrome) -> None:
        self.browser = browser
        self.tab: Any = None
        self.session_id: str | None = None  # set once a page exists (raw ops read it)
        self.context_id: str | None = None
        self.isolation = "context"  # or "shared": set from the payload after connect
        self.events = raw_cdp_ops.PageEvents()
        self.tabs: list[Any] = []  # opened by this attempt, newest last
        self.recorders = raw_cdp_more.Recorders()
        self.metrics = {"cdp_call_count": 0, "cdp_error_count": 0}
        self.click = click

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self._command(
            self.tab if self.tab is not None else self.browser, method, params
        )

    async def browser_send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self._command(self.browser, method, params)

    async def send_to(self, session_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A command to a target attached (flat) on the browser connection."""
        return await self._command(self.browser, method, params, session_id)

    async def _command(
        self, owner: Any, method: str, params: dict[str, Any], session_id: str | None = None
    ) -> dict[str, Any]:
        self.metrics["cdp_call_count"] += 1
        command: dict[str, Any] = {"method": method, "params": params}
        if session_id:
            command["sessionId"] = session_id
        reply = await owner._execute_command(command)
        if "error" in reply:
            self.metrics["cdp_error_count"] += 1
            raise RuntimeError(reply["error"].get("message", str(reply["error"])))
        return dict(reply.get("result", {}))

    async def on(self, method: str, handler: Callable[[dict[str, Any]], None]) -> None:
        """The current tab's event (each tab is its own connection in pydoll)."""
        await self.tab.on(method, lambda event: handler(dict(event.get("params") or {})))

    async def on_browser(self, method: str, handler: Callable[[dict[str, Any]], None]) -> None:
        await self.browser.on(method, lambda event: handler(dict(event.get("params") or {})))


async def connect(payload: dict[str, Any], budget: Budget) -> Session:
    browser = Chrome()
    await browser.connect(payload["browser_ws"])
    return Session(browser)


async def live_product(session: Session) -> str:
    return str((await session.browser.get_version())["product"])


async def close(session: Session) -> None:
    if session.context_id:
        await session.browser.delete_browser_context(session.context_id)
    else:  # the shared default context: only this attempt's tabs are closed
        await close_targets(session.browser_send, [tab._target_id for tab in session.tabs])
    # The engine belongs to the runner: only pydoll's connections are closed.
    for handler in [
        session.tab and session.tab._connection_handler,
        session.browser._connection_handler,
    ]:
        if handler is not None:
            await handler.close()


async def new_page(s: Session, step: dict[str, Any], state: State) -> str:
    # One context per attempt (unless shared): a second page shares the first one's storage,
    # like a second tab.
    if s.context_id is None and s.isolation != "shared":
        s.context_id = await s.browser.create_browser_context()
    s.tab = await s.browser.new_tab(browser_context_id=s.context_id)
    s.tabs.append(s.tab)
    s.session_id = "tab"
    await s.tab.enable_page_events()
    await s.tab.enable_runtime_events()
    for name in PAGE_EVENTS:
        await s.tab.on(name, lambda event, name=name: s.events.saw(name))
    await raw_cdp_more.watch_page(s)
    return "tab"


async def close_page(s: Session, step: dict[str, Any], state: State) -> str:
    if not s.tabs:
        raise RuntimeError("no page to close")
    await s.tabs.pop().close()
    s.tab = s.tabs[-1] if s.tabs else None
    return "closed"


async def contexts_count(s: Session, step: dict[str, Any], state: State) -> int:
    return len(await s.browser.get_browser_contexts()) + 1


async def version(s: Session, step: dict[str, Any], state: State) -> str:
    return str((await s.browser.get_version())["product"])


async def set_cookie(s: Session, step: dict[str, Any], state: State) -> str:
    cookie = {"name": step["name"], "value": str(step.get("value") or ""), "url": step["url"]}
    await s.browser.set_cookies([cookie], browser_context_id=s.context_id)  # type: ignore[list-item]
    return str(step["name"])


async def get_cookies(s: Session, step: dict[str, Any], state: State) -> Any:
    cookies = await s.browser.get_cookies(browser_context_id=s.context_id)
    host = urlsplit(step["url"]).hostname if step.get("url") else None
    return [c for c in cookies if host is None or str(c.get("domain", "")).lstrip(".") == host]


async def type_text(s: Session, step: dict[str, Any], state: State) -> str:
    text = str(step.get("value", step.get("text", "")))
    await (await element(s, step, state)).type_text(text)
    return text


async def page_source(s: Session, step: dict[str, Any], state: State) -> str:
    return str(await s.tab.page_source)


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
    **raw_cdp_more.OPS,
    **LOCAL_OPS,
    "close_page": close_page,
    "contexts_count": contexts_count,
    "version": version,
    "set_cookie": set_cookie,
    "get_cookies": get_cookies,
    "type": type_text,
    "content": page_source,
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
