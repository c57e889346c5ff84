"""The fixture server under a real Debian Chromium: the corpus's dynamic pages work end to end."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from browser_fixture_helpers import corpus_or_skip
from metewand.suites.browser.cdp import CdpClient
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.engines import Missing, resolve
from metewand.suites.browser.fixtures import FixtureServer, grade_inventory

pytestmark = pytest.mark.engines


class Page:
    def __init__(self, client: CdpClient, session_id: str) -> None:
        self.client, self.sid = client, session_id

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.client.send(method, params, session_id=self.sid)

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", {"url": url})
        for _ in range(80):
            if await self.eval("document.readyState") == "complete":
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{url} never loaded")

    async def eval(self, expression: str) -> Any:
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        reply = await self.send("Runtime.evaluate", params)
        assert "exceptionDetails" not in reply, reply
        return reply["result"].get("value")


async def open_page(client: CdpClient) -> Page:
    target = await client.send("Target.createTarget", {"url": "about:blank"})
    attached = await client.send(
        "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
    )
    page = Page(client, attached["sessionId"])
    await page.send("Page.enable")
    await page.send("Runtime.enable")
    return page


async def scenario(root: Path, log_dir: Path) -> dict[str, Any]:
    found = resolve("chrome")
    if isinstance(found, Missing):
        pytest.skip(f"chrome not installed: {found.reason}")
    engine = EngineProcess(found, log_dir)
    out: dict[str, Any] = {}
    async with FixtureServer(root) as server:
        await engine.start()
        try:
            assert engine.ws_url is not None
            async with await CdpClient.connect(engine.ws_url) as client:
                page = await open_page(client)
                await inventory(server, page, out)
                await websocket_and_sse(server, page, out)
                await served_from_cache(server, page, out)
        finally:
            report = await engine.stop()
            assert report.clean, report
    return out


async def inventory(server: FixtureServer, page: Page, out: dict[str, Any]) -> None:
    seed, session = "seed-chromium", "sess-chromium-1"
    server.traffic.begin_attempt("idb", markers=(session,))
    await page.goto(server.url(f"/storage/indexeddb_inventory?seed={seed}&session={session}"))
    result = await page.eval("window.__ABB_RUN_IDB_TASK__()")
    events = server.context.inventory_events_of(session)
    out["idb_grade"] = grade_inventory(seed, result["answer"], events)
    out["idb_traffic"] = await server.traffic.end_attempt_settled("idb", 1.0)


async def websocket_and_sse(server: FixtureServer, page: Page, out: dict[str, Any]) -> None:
    await page.goto(server.url("/l1/core"))
    await asyncio.sleep(0.3)  # let late subresources (favicon) finish before counting
    server.traffic.begin_attempt("ws")
    out["ws_reply"] = await page.eval(
        "new Promise(function (ok) { var w = new WebSocket(location.origin.replace('http','ws')"
        " + '/__ws__/echo'); w.onopen = function () { w.send('hello-wsd'); };"
        " w.onmessage = function (e) { w.close(); ok(e.data); }; })"
    )
    out["sse_first"] = await page.eval(
        "new Promise(function (ok) { var s = new EventSource('/__sse__/messages');"
        " s.onmessage = function (e) { s.close(); ok(e.data); }; })"
    )
    out["ws_traffic"] = await server.traffic.end_attempt_settled("ws", 2.0)


async def served_from_cache(server: FixtureServer, page: Page, out: dict[str, Any]) -> None:
    await page.send("Network.enable")
    await page.goto(server.url("/__cache__/host"))
    await page.send("Page.reload", {})
    event = await page.client.wait_for_event(
        "Network.requestServedFromCache", session_id=page.sid, timeout=6
    )
    out["cache_event"] = event


def test_corpus_dynamic_pages_in_chromium(tmp_path: Path) -> None:
    out = asyncio.run(scenario(corpus_or_skip(), tmp_path))
    assert out["idb_grade"].ok, out["idb_grade"].to_json()
    idb = out["idb_traffic"]
    assert idb.available and idb.harness.requests == 2 and idb.app.requests >= 1
    assert out["ws_reply"] == "echo:hello-wsd"
    assert out["sse_first"] == "wsd-sse-0"
    ws = out["ws_traffic"]
    assert ws.available, ws
    assert ws.app.rx_body_bytes == len("hello-wsd")  # the only body the browser sent
    sse_bytes = len("retry: 600000\ndata: wsd-sse-0\n\n")
    assert ws.app.tx_body_bytes >= len("echo:hello-wsd") + sse_bytes
    assert out["cache_event"]["method"] == "Network.requestServedFromCache"
