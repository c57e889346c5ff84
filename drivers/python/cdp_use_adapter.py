"""cdp-use path: the browser-use ecosystem's typed CDP client, over the browser websocket, with
flat sessions on a fresh browser context per attempt (``send_raw`` for every call)."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import raw_cdp_ops
from adapter_common import Budget, Driver, State, main
from cdp_use.client import CDPClient

PAGE_EVENTS = ("loadEventFired", "navigatedWithinDocument", "frameNavigated")


class Session:
    def __init__(self, client: CDPClient) -> None:
        self.client = client
        self.session_id: str | None = None
        self.context_id: str | None = None
        self.events: list[str] = []
        self.metrics = {"cdp_call_count": 0, "cdp_error_count": 0}

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.metrics["cdp_call_count"] += 1
        try:
            return await self.client.send_raw(method, params, self.session_id)
        except Exception:
            self.metrics["cdp_error_count"] += 1
            raise

    def watch(self) -> None:
        for name in PAGE_EVENTS:
            register = getattr(self.client.register.Page, name)
            register(lambda params, session_id, name=name: self._seen(f"Page.{name}", session_id))

    def _seen(self, method: str, session_id: str | None) -> None:
        if session_id == self.session_id:
            self.events.append(method)


async def connect(payload: dict[str, Any], budget: Budget) -> Session:
    client = CDPClient(payload["browser_ws"])
    await client.start()
    session = Session(client)
    session.watch()
    return session


async def live_product(session: Session) -> str:
    return str((await session.client.send_raw("Browser.getVersion"))["product"])


async def close(session: Session) -> None:
    if session.context_id:
        await session.client.send_raw(
            "Target.disposeBrowserContext", {"browserContextId": session.context_id}
        )
    await session.client.stop()


async def new_page(s: Session, step: dict[str, Any], state: State) -> str:
    # One context per attempt: a second page shares the first one's storage, like a second tab.
    if s.context_id is None:
        s.context_id = (await s.client.send_raw("Target.createBrowserContext", {}))[
            "browserContextId"
        ]
    target = (
        await s.client.send_raw(
            "Target.createTarget", {"url": "about:blank", "browserContextId": s.context_id}
        )
    )["targetId"]
    s.session_id = (
        await s.client.send_raw("Target.attachToTarget", {"targetId": target, "flatten": True})
    )["sessionId"]
    await s.send("Page.enable", {})
    await s.send("Runtime.enable", {})
    return str(target)


main(
    Driver(
        f"cdp-use {importlib.metadata.version('cdp-use')}",
        "cdp_use",
        connect,
        live_product,
        close,
        {**raw_cdp_ops.OPS, "new_page": new_page},
    )
)
