"""cdp-use path: the browser-use ecosystem's typed CDP client, over the browser websocket, with
flat sessions on a fresh browser context per attempt (``send_raw`` for every call, the client's
event registry for events)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

import raw_cdp_more
import raw_cdp_ops
from adapter_common import LOCAL_OPS, Budget, Driver, State, close_targets, main
from cdp_use.client import CDPClient

PAGE_EVENTS = ("Page.loadEventFired", "Page.navigatedWithinDocument", "Page.frameNavigated")
Handler = Callable[[dict[str, Any]], None]


class Session:
    def __init__(self, client: CDPClient) -> None:
        self.client = client
        self.session_id: str | None = None
        self.context_id: str | None = None
        self.isolation = "context"  # or "shared": set from the payload after connect
        self.pages: list[tuple[str, str]] = []  # (targetId, sessionId), newest last
        self.events = raw_cdp_ops.PageEvents()
        self.recorders = raw_cdp_more.Recorders()
        self.handlers: dict[str, list[tuple[bool, Handler]]] = {}
        self.metrics = {"cdp_call_count": 0, "cdp_error_count": 0}
        self.click = raw_cdp_ops.click

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self.send_to(self.session_id, method, params)

    async def browser_send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self.send_to(None, method, params)

    async def send_to(
        self, session_id: str | None, method: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        self.metrics["cdp_call_count"] += 1
        try:
            return await self.client.send_raw(method, params, session_id)
        except Exception:
            self.metrics["cdp_error_count"] += 1
            raise

    async def on(self, method: str, handler: Handler) -> None:
        self._add(method, handler, page=True)

    async def on_browser(self, method: str, handler: Handler) -> None:
        self._add(method, handler, page=False)

    def _add(self, method: str, handler: Handler, page: bool) -> None:
        """One dispatcher per event in the client's registry; a page handler hears only the
        current page's session."""
        if method not in self.handlers:
            self.handlers[method] = []
            domain, name = method.split(".")
            register = getattr(getattr(self.client.register, domain), name)
            register(
                lambda params, session_id, method=method: self._dispatch(method, params, session_id)
            )
        self.handlers[method].append((page, handler))

    def _dispatch(self, method: str, params: Any, session_id: str | None) -> None:
        if method in PAGE_EVENTS and session_id == self.session_id:
            self.events.saw(method)
        for page, handler in self.handlers.get(method, []):
            if not page or session_id == self.session_id:
                handler(dict(params or {}))


async def connect(payload: dict[str, Any], budget: Budget) -> Session:
    client = CDPClient(payload["browser_ws"])
    await client.start()
    session = Session(client)
    for name in PAGE_EVENTS:
        await session.on(name, lambda params: None)  # counted by the dispatcher
    return session


async def live_product(session: Session) -> str:
    return str((await session.client.send_raw("Browser.getVersion"))["product"])


async def close(session: Session) -> None:
    if session.context_id:
        await session.client.send_raw(
            "Target.disposeBrowserContext", {"browserContextId": session.context_id}
        )
    else:  # the shared default context: only this attempt's pages are closed
        await close_targets(session.browser_send, [target for target, _ in session.pages])
    await session.client.stop()


async def new_page(s: Session, step: dict[str, Any], state: State) -> str:
    # One context per attempt (unless shared): a second page shares the first one's storage,
    # like a second tab.
    if s.context_id is None and s.isolation != "shared":
        s.context_id = (await s.browser_send("Target.createBrowserContext", {}))["browserContextId"]
    create = {"url": "about:blank"}
    if s.context_id is not None:
        create["browserContextId"] = s.context_id
    target = (await s.browser_send("Target.createTarget", create))["targetId"]
    s.session_id = (
        await s.browser_send("Target.attachToTarget", {"targetId": target, "flatten": True})
    )["sessionId"]
    s.pages.append((target, s.session_id))
    await s.send("Page.enable", {})
    await s.send("Runtime.enable", {})
    if len(s.pages) == 1:
        await raw_cdp_more.watch_page(s)
    elif s.recorders.fetching:
        await s.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]})
    return str(target)


async def close_page(s: Session, step: dict[str, Any], state: State) -> str:
    if not s.pages:
        raise RuntimeError("no page to close")
    target, _ = s.pages.pop()
    await s.browser_send("Target.closeTarget", {"targetId": target})
    s.session_id = s.pages[-1][1] if s.pages else None
    return "closed"


main(
    Driver(
        f"cdp-use {importlib.metadata.version('cdp-use')}",
        "cdp_use",
        connect,
        live_product,
        close,
        {
            **raw_cdp_ops.OPS,
            **raw_cdp_more.OPS,
            **LOCAL_OPS,
            "new_page": new_page,
            "close_page": close_page,
        },
    )
)
