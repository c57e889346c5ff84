"""Issue 27 item 6: an adapter that prints 300 MB without a newline, or a 100 MB JSON result, is
classified as soon as its output passes the cap (``STDOUT_LIMIT``), not at its deadline: it is
stopped, its row is ``adapter_garbage``, and what was read stays bounded. Real adapter processes,
one-shot and served."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from metewand.suites.browser.adapter_server import open_adapter
from metewand.suites.browser.adapters import STDOUT_LIMIT, AdapterCommand, AdapterRun

DEADLINE_S = 30.0
# without a newline / one JSON string of 100 MB, then it waits for its stdin to end
FLOOD = """
import sys
chunk = b"x" * (1 << 20)
out = sys.stdout.buffer
if sys.argv[1] == "json":
    out.write(b'{"ok": true, "answer": "')
for _ in range(300 if sys.argv[1] == "raw" else 100):
    out.write(chunk)
if sys.argv[1] == "json":
    out.write(b'"}\\n')
out.flush()
sys.stdin.read()
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["per_attempt", "long_lived"])
@pytest.mark.parametrize("flood", ["raw", "json"])
def test_a_flood_on_stdout_is_garbage_at_once(tmp_path: Path, mode: str, flood: str) -> None:
    script = tmp_path / "flood.py"
    script.write_text(FLOOD)
    argv = (sys.executable, str(script), flood)
    command = AdapterCommand(argv, serve_argv=argv)
    adapter = open_adapter(command, mode, log_path=tmp_path / "served.log")
    payload = {"protocol": "abb_scenario_adapter/1", "task_id": "t", "attempt_id": "a1"}

    async def go() -> AdapterRun:
        try:
            return await adapter.run(payload, DEADLINE_S, tmp_path / "stderr.log")
        finally:
            await adapter.close()

    started = time.monotonic()
    run = asyncio.run(go())
    took = time.monotonic() - started
    assert run.outcome == "adapter_garbage", (run.outcome, run.detail)
    assert str(STDOUT_LIMIT) in run.detail
    assert took < DEADLINE_S / 2, f"{took:.1f} s: classified at the deadline, not at the cap"
