"""The served chrome-devtools-mcp adapter on Lightpanda (issue 24, item 4): one MCP server answers
attempt after attempt although the engine holds a single browser context per connection. The
first attempt's context is still there when the second asks for its own, so the adapter starts
its server once more behind its CDP relay; from then on each attempt's end disposes of its context
on the server's connection and the same server process serves the next. Real Lightpanda, the real
MCP server, the corpus's own tasks: a login followed by a task that must find the app locked
shows that no session crosses from one attempt to the next."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from driver_helpers import Bench, engine_bench, found_or_skip, run_served_task
from metewand.measure import procfs
from metewand.suites.browser.adapter_server import LongLivedAdapter, open_adapter

pytestmark = [pytest.mark.engines, pytest.mark.slow]

KEY = "chrome_devtools_mcp"
SUBSET = "L1/chrome_devtools_mcp"
# a login (its session cookie in the attempt's context), then a task that needs no session
TASKS = [
    "sc_app_add_single_item__mcp",
    "sc_app_locked_without_login__mcp",
    "sc_app_add_single_item__mcp",
    "sc_app_locked_without_login__mcp",
]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield from engine_bench("lightpanda", tmp_path_factory.mktemp("engine-logs"))


def _mcp_servers(adapter_pid: int) -> list[int]:
    """The adapter's children that run the MCP server."""
    return [pid for pid in procfs.children(adapter_pid) if b"chrome-devtools-mcp" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_one_mcp_server_serves_every_attempt_after_the_first_each_in_a_fresh_context(
    bench: Bench, tmp_path: Path
) -> None:
    found = found_or_skip(KEY)

    async def attempts() -> list[tuple[str, bool, list[int]]]:
        runner = open_adapter(found.command, "long_lived", log_path=tmp_path / "served.log")
        assert isinstance(runner, LongLivedAdapter)
        out = []
        try:
            for n, task_id in enumerate(TASKS):
                run, status = await run_served_task(
                    runner, bench, KEY, SUBSET, task_id, tmp_path, n + 1, 60.0
                )
                reused = bool(((run.result or {}).get("metrics") or {}).get("mcp_server_reused"))
                assert runner.process is not None
                out.append((status, reused, _mcp_servers(runner.process.pid)))
            assert runner.starts == 1  # one adapter process throughout
        finally:
            await runner.close()
        return out

    results = asyncio.run(attempts())
    assert [status for status, _, _ in results] == ["pass"] * len(TASKS), results
    # the first server, then the one behind the relay, kept for every later attempt
    assert [reused for _, reused, _ in results] == [False, False, True, True], results
    servers = [tuple(pids) for _, _, pids in results]
    assert all(len(pids) == 1 for pids in servers), servers
    assert servers[1] == servers[2] == servers[3] != servers[0], servers
    assert bench.engine.is_alive()
