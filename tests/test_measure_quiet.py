"""wait_quiet on real process trees: it waits out a busy child and its exit, gives up at the limit
on a tree that keeps running, and returns at once for a tree that is already quiet or gone."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import subprocess
import sys
import time

from metewand.measure import procfs
from metewand.measure.quiet import look, wait_quiet

# A parent that forks a child which spins for SPIN seconds and exits; the parent blocks until it
# reaps the child, then sleeps for good (no polling wake-ups of its own that a look could catch
# running after the tree went quiet).
PARENT = """
import os, sys, time
spin = float(sys.argv[1])
if os.fork() == 0:
    end = time.monotonic() + spin
    while time.monotonic() < end:
        pass
    os._exit(0)
print("forked", flush=True)
try:
    os.wait()
except ChildProcessError:
    pass
while True:
    time.sleep(3600)
"""


def _tree(spin_s: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(spin_s)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "forked"
    return proc


def test_waits_for_a_busy_child_to_finish_and_be_reaped() -> None:
    proc = _tree(0.4)
    try:
        assert look(proc.pid).busy, "the spinning child should look busy"
        started = time.monotonic()
        outcome = asyncio.run(wait_quiet(proc.pid, limit_s=5.0))
        waited = time.monotonic() - started
        assert outcome.quiet
        assert 0.25 <= waited < 3.0, waited
        final = look(proc.pid)
        assert final.members == frozenset({proc.pid}) and not final.busy
    finally:
        proc.kill()
        proc.wait()


def test_gives_up_at_the_limit_and_names_the_busy_member() -> None:
    proc = _tree(30.0)
    try:
        outcome = asyncio.run(wait_quiet(proc.pid, limit_s=0.3))
        assert not outcome.quiet
        assert 250 <= outcome.waited_ms < 2000
        assert outcome.busy_at_limit and proc.pid not in outcome.busy_at_limit
    finally:
        for pid in look(proc.pid).members - {proc.pid}:  # the spinning child, before it is orphaned
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()


def test_quiet_tree_returns_after_two_looks_and_gone_tree_at_once() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)  # past interpreter start-up
        outcome = asyncio.run(wait_quiet(proc.pid, limit_s=5.0, poll_s=0.02))
        assert outcome.quiet and outcome.looks == 2
    finally:
        proc.kill()
        proc.wait()
    gone = asyncio.run(wait_quiet(proc.pid, limit_s=5.0))
    assert gone.quiet and gone.looks == 1


# One process whose main thread sleeps while a second thread spins: /proc shows state S.
HIDDEN_SPIN = """
import sys, threading, time
spin = float(sys.argv[1])
def work():
    end = time.monotonic() + spin
    while time.monotonic() < end:
        pass
threading.Thread(target=work, daemon=True).start()
print("spinning", flush=True)
time.sleep(60)
"""


def _process_cpu_ns(pid: int) -> int | None:
    try:
        stat = procfs.read_stat(pid)
    except procfs.ProcessGone:
        return None
    return procfs.ticks_to_ns(stat.utime_ticks + stat.stime_ticks)


def test_cpu_reader_sees_work_that_states_hide() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HIDDEN_SPIN, "3.0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "spinning"
        blind = asyncio.run(wait_quiet(proc.pid, limit_s=0.3))
        assert blind.quiet and not blind.cpu_checked  # states alone: the spin is invisible
        cpu = functools.partial(_process_cpu_ns, proc.pid)
        # looks 0.1 s apart: the CPU is read in clock ticks, and a spin that a loaded host (CI at
        # load ~6) gave a third of a core could gain no tick in 30 ms and look flat
        busy = asyncio.run(wait_quiet(proc.pid, limit_s=0.5, poll_s=0.1, cpu_ns=cpu))
        assert not busy.quiet and busy.cpu_checked
        after = asyncio.run(wait_quiet(proc.pid, limit_s=8.0, poll_s=0.1, cpu_ns=cpu))
        assert after.quiet and after.waited_ms > 300  # it waited the rest of the spin out
    finally:
        proc.kill()
        proc.wait()


# A parent that leaves its exited child unreaped for good (Chromium's zygote reaps ~1.1 s late).
NO_REAP = """
import os, time
if os.fork() == 0:
    os._exit(0)
print("forked", flush=True)
time.sleep(60)
"""


def _zombie_tree() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", NO_REAP], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "forked"
    deadline = time.monotonic() + 5
    while not look(proc.pid).zombies and time.monotonic() < deadline:
        time.sleep(0.01)
    [child] = look(proc.pid).zombies
    return proc, child


def test_a_zombie_is_busy_unless_the_cpu_shows_nothing_runs() -> None:
    proc, child = _zombie_tree()
    try:
        time.sleep(0.2)  # past the parent's own start-up work
        blind = asyncio.run(wait_quiet(proc.pid, limit_s=0.4))
        assert not blind.quiet and blind.busy_at_limit == (child,)
        cpu = functools.partial(_process_cpu_ns, proc.pid)
        seen = asyncio.run(wait_quiet(proc.pid, limit_s=2.0, cpu_ns=cpu))
        assert seen.quiet and seen.unreaped == (child,) and seen.cpu_checked
        assert seen.looks >= 5 and seen.waited_ms < 1000, seen
        assert seen.to_json()["unreaped"] == [child]
    finally:
        proc.kill()
        proc.wait()


def test_a_zombie_beside_work_keeps_the_tree_busy() -> None:
    # the parent spins in a second thread while its child lies unreaped: the CPU is not flat
    spin = NO_REAP.replace(
        'print("forked"',
        "import threading\n"
        "threading.Thread(target=lambda: [0 for _ in iter(int, 1)], daemon=True).start()\n"
        'print("forked"',
    )
    proc = subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "forked"
        cpu = functools.partial(_process_cpu_ns, proc.pid)
        outcome = asyncio.run(wait_quiet(proc.pid, limit_s=0.6, poll_s=0.1, cpu_ns=cpu))
        assert not outcome.quiet and outcome.unreaped == ()
    finally:
        proc.kill()
        proc.wait()
