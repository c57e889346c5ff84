"""A headful-sized headless Chromium with one CDP client, for tests that look at a generated
page the way a reader's browser shows it (the report's HTML, its charts)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from metewand.suites.browser import engines
from metewand.suites.browser.cdp import CdpClient

START_TIMEOUT_S = 30


@contextlib.asynccontextmanager
async def chromium_client(
    chrome: engines.ResolvedEngine, user_data: Path, tmp_prefix: str = "mw-page-"
) -> AsyncIterator[CdpClient]:
    """A browser-level CDP client of a Chromium started for the block, killed after it."""
    # Chromium's singleton dir lands here, not in /tmp. A short path: its socket's path must fit
    # in sun_path (108 bytes), which pytest's tmp_path can exceed.
    tmp = Path(tempfile.mkdtemp(prefix=tmp_prefix))
    proc = subprocess.Popen(
        # port 0: Chrome picks a free port and names it in DevToolsActivePort
        [*chrome.argv(0, user_data), "--window-size=1200,900"],
        env=chrome.environment(tmp_dir=tmp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = user_data / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
            assert time.monotonic() < deadline, "chromium did not start"
            await asyncio.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        client = await CdpClient.connect(f"ws://127.0.0.1:{port}{path}")
        try:
            yield client
        finally:
            await client.close()
    finally:
        proc.kill()
        proc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


async def open_page(client: CdpClient, url: str, domains: tuple[str, ...]) -> str:
    """A new page attached (flat session) with ``domains`` enabled, loaded with ``url``; its
    session id."""
    target = await client.send("Target.createTarget", {"url": "about:blank"})
    attached = await client.send(
        "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
    )
    sid = str(attached["sessionId"])
    for domain in domains:
        await client.send(f"{domain}.enable", session_id=sid)
    await client.send("Page.navigate", {"url": url}, session_id=sid)
    await client.wait_for_event("Page.loadEventFired", session_id=sid, timeout=30)
    return sid


async def evaluate(client: CdpClient, sid: str, expression: str) -> Any:
    """The expression's value in the page (by value)."""
    reply = await client.send(
        "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session_id=sid
    )
    return reply["result"].get("value")
