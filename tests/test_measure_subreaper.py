"""measure.subreaper on real processes: an orphan's CPU stays the benchmark's when this process
adopts it, and reaping adopted zombies never takes a child this process started itself."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import time

import pytest

from foreign_helpers import orphan_burner
from metewand.measure import procfs, subreaper
from metewand.measure.foreign import ForeignCpuTracker

# A session leader that forks a burner and exits at once, so the burner is orphaned at birth;
# the burner spends ~0.4 s of CPU and exits. Both start and end between two looks.
ORPHAN_BURN = orphan_burner(0.4)


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _session_gone(session: int, timeout: float = 10) -> None:
    """Until no live process is left in ``session`` (a zombie may stay, for its reaper)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = [
            st
            for st in procfs.read_all_stats().values()
            if st.session == session and st.state != "Z"
        ]
        if not live:
            return
        time.sleep(0.02)
    raise AssertionError(f"session {session} still has live processes")


@pytest.mark.parametrize("adopt", [True, False])
def test_an_orphans_cpu_is_the_benchmarks_when_this_process_adopts_it(adopt: bool) -> None:
    tracker = ForeignCpuTracker(os.getpid())
    assert tracker.observe() is None
    before = _children_cpu_s()
    with subreaper.adopting() if adopt else contextlib.nullcontext() as why:
        assert why is None
        leader = subprocess.Popen([sys.executable, "-c", ORPHAN_BURN], start_new_session=True)
        leader.wait(timeout=10)
        _session_gone(leader.pid)
        reaped = subreaper.reap_adopted()
    figures = tracker.observe()
    assert figures is not None
    counted = figures["bench_cpu_cores"] * figures["interval_s"]
    if adopt:
        # adopted, then reaped here: the burner's CPU reached this process's cutime
        assert len(reaped) == 1 and _children_cpu_s() - before >= 0.38
        assert counted >= 0.35, figures
    else:
        # init took it: no look saw it, and its CPU is no part of the benchmark's
        assert reaped == [] and counted < 0.3, figures


def test_reaping_adopted_zombies_never_takes_a_child_this_process_started() -> None:
    with subreaper.adopting():
        same_session = subprocess.Popen(["sh", "-c", "exit 3"])
        own_session = subprocess.Popen(["sh", "-c", "exit 4"], start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # both exited and wait for their parent: us
            states = [procfs.read_stat(p.pid).state for p in (same_session, own_session)]
            if states == ["Z", "Z"]:
                break
            time.sleep(0.01)
        assert subreaper.adopted_zombies() == []
        assert subreaper.reap_adopted() == []
    assert same_session.wait(timeout=5) == 3 and own_session.wait(timeout=5) == 4


def test_the_subreaper_mark_is_set_inside_and_cleared_after() -> None:
    assert not subreaper.is_subreaper()
    with subreaper.adopting() as why:
        assert why is None and subreaper.is_subreaper()
    assert not subreaper.is_subreaper()
