"""An engine that dies is noticed at once (its pidfd wakes the waits), not at the next look of a
polling loop: real Chromium and real Lightpanda, killed with a real SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from browser_engine_fixtures import REAL_ENGINES, resolved_or_skip
from metewand.measure import proc_events
from metewand.suites.browser import proc_session
from metewand.suites.browser.engine_process import HEALTH_POLL_S, EngineProcess

pytestmark = pytest.mark.engines
PARK_S = 0.3


def _wakeups() -> dict[str, int]:
    """Voluntary context switches of every thread of this process (a thread that sleeps and
    looks counts one per look; a thread parked on a pidfd counts none until it wakes)."""
    counts = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:  # the thread ended between the listing and the read
            continue
        counts[task.name] = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
    return counts


def _most_wakeups(before: dict[str, int], after: dict[str, int]) -> int:
    return max((after[tid] - before.get(tid, 0) for tid in after), default=0)


def _death_ns(events: proc_events.ProcEvents, pid: int) -> int | None:
    """When the kernel finished the process: its last thread's exit event (a browser has many
    threads; the process is gone, and its pidfd readable, when the last one exits)."""
    stamps = []
    while True:
        try:
            data = events.sock.recv(65536)
        except BlockingIOError:
            break
        stamps += [
            stamp
            for what, stamp, _, tgid in proc_events._events(data)
            if what == proc_events.EVENT_EXIT and tgid == pid
        ]
    return max(stamps) if stamps else None


@pytest.mark.parametrize("name", REAL_ENGINES)
def test_an_engine_that_dies_is_noticed_without_polling(name: str, tmp_path: Path) -> None:
    process = EngineProcess(resolved_or_skip(name), tmp_path)
    events = proc_events.open_events()
    if events is None:
        pytest.skip("the proc connector (root only) gives the kernel's exit time; unavailable")

    async def scenario() -> tuple[tuple[float, float, float], str, float]:
        await process.start()
        pid = process.pid
        assert pid is not None and process.exit_seen_ns is None
        waiter = asyncio.create_task(process.wait_exited(10.0))
        await asyncio.sleep(0.05)  # the wait is parked on the engine's pidfd
        parked = _wakeups()
        await asyncio.sleep(PARK_S)
        park_wakeups = _most_wakeups(parked, _wakeups())
        killed_ns = time.monotonic_ns()
        os.kill(pid, signal.SIGKILL)
        assert await waiter
        woke_ns = time.monotonic_ns()
        # The watcher thread stamped the exit as it happened.
        seen = process.exit_seen_ns
        deadline = time.monotonic() + 5
        while seen is None and time.monotonic() < deadline:  # the thread may run just after
            await asyncio.sleep(0.001)
            seen = process.exit_seen_ns
        assert seen is not None
        death = _death_ns(events, pid)
        assert death is not None and death <= seen
        health_began = time.monotonic()
        health = await process.health()
        health_s = time.monotonic() - health_began
        report = await process.stop()
        assert report.clean and report.exit is not None
        assert report.exit.signal_name == "SIGKILL" and not report.sigkill_needed
        assert [m for m in proc_session.session_members(pid) if m.state != "Z"] == []
        waits = ((seen - death) / 1e9, (woke_ns - death) / 1e9, (seen - killed_ns) / 1e9)
        return waits, health, health_s, park_wakeups

    try:
        waits, health, health_s, park_wakeups = asyncio.run(scenario())
    finally:
        events.close()
    # Nothing in this process looks for the exit while the engine lives: over a 300 ms park no
    # thread woke more than a few times (a 20 ms look would wake one thread ~15 times). The
    # exit-notice latency itself is a figure, not a bound: a single sample on a loaded 2-core
    # host varies with the scheduler (benchmarks/process_lifecycle.py measures it as a ratio
    # against polling in one run).
    watcher_s, loop_s, after_kill_s = waits
    print(
        f"exit seen after the kernel's exit: watcher {watcher_s * 1e3:.2f} ms, "
        f"loop {loop_s * 1e3:.2f} ms; after the kill {after_kill_s * 1e3:.1f} ms; "
        f"most wake-ups of one thread while parked: {park_wakeups}"
    )
    assert park_wakeups <= 4, park_wakeups
    assert watcher_s < HEALTH_POLL_S and loop_s < HEALTH_POLL_S, waits
    assert health == "exited" and health_s < HEALTH_POLL_S
