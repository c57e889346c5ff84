"""The one process lifecycle (``measure.process``, ``measure.process_sweep``) on real processes:
its own group, the exit seen through a pidfd (or the recorded fallback), the TERM → grace → KILL
escalation of the whole group, reaping, and the sweep by recorded identity."""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compute_helpers import alive
from metewand.measure import process as process_module
from metewand.measure.process import (
    WAITER_PIDFD,
    WAITER_THREAD,
    Process,
    exit_wait_method,
    run_captured,
)
from metewand.measure.process_sweep import (
    Identity,
    identity_of,
    kill_until_gone,
    left_alive,
    wait_gone,
)

# Ignores TERM, says so on stdout, then sleeps.
STUBBORN = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(300)\n"
)
# Starts a grandchild in its own process group (the default for a child), prints its pid, and
# either waits (``wait``) or exits at once, leaving it behind.
GRANDPARENT = "sleep 300 & echo $!; {end}"


@pytest.fixture
def started() -> Iterator[list[Process]]:
    """Every process a test starts is killed and reaped at the end, whatever the test did."""
    processes: list[Process] = []
    yield processes
    for proc in processes:
        proc.kill()
        proc.close()


def _start(started: list[Process], argv: list[str], **kwargs: object) -> Process:
    proc = Process.start(argv, **kwargs)  # type: ignore[arg-type]
    started.append(proc)
    return proc


def _first_line(proc: Process) -> str:
    assert proc.popen.stdout is not None
    return proc.popen.stdout.readline().decode().strip()


def test_the_process_leads_its_own_session_and_group(started: list[Process]) -> None:
    proc = _start(started, ["sleep", "300"])
    identity = identity_of(proc.pid)
    assert identity is not None and identity.session == proc.pid
    assert os.getpgid(proc.pid) == proc.pid == proc.pgid
    assert proc.waiter == WAITER_PIDFD and proc.waiter_reason is None


def test_a_child_that_ignores_term_is_killed_after_the_grace(started: list[Process]) -> None:
    proc = _start(started, [sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE)
    assert _first_line(proc) == "ready"
    began = time.monotonic()
    ending = proc.terminate(grace_s=0.5, kill_wait_s=5.0)
    took = time.monotonic() - began
    assert ending.kill_needed and not ending.already_exited
    assert ending.returncode == -signal.SIGKILL
    assert took >= 0.5  # the grace was given in full
    assert not alive(proc.pid)


def test_a_child_that_honours_term_is_not_killed(started: list[Process]) -> None:
    proc = _start(started, ["sleep", "300"])
    began = time.monotonic()
    ending = proc.terminate(grace_s=5.0)
    assert time.monotonic() - began < 2.0  # the exit ended the grace, not its length
    assert ending.returncode == -signal.SIGTERM and not ending.kill_needed


def test_a_grandchild_in_the_group_dies_with_the_stop(started: list[Process]) -> None:
    proc = _start(started, ["sh", "-c", GRANDPARENT.format(end="wait")], stdout=subprocess.PIPE)
    grandchild = int(_first_line(proc))
    assert alive(grandchild) and os.getpgid(grandchild) == proc.pgid
    asyncio.run(proc.terminate_async(grace_s=2.0))
    assert wait_gone([grandchild], 5.0) == []  # it goes without any further kill


def test_reaping_a_leader_that_left_a_grandchild_kills_the_grandchild(
    started: list[Process],
) -> None:
    proc = _start(started, ["sh", "-c", GRANDPARENT.format(end="exit 3")], stdout=subprocess.PIPE)
    grandchild = int(_first_line(proc))
    assert proc.wait_exited(10.0)
    assert alive(grandchild)  # the leader is gone, unreaped; its group lives on
    assert proc.reap() == 3
    assert wait_gone([grandchild], 5.0) == []


def test_a_deadline_without_exit_returns_none_and_leaves_it_running(
    started: list[Process],
) -> None:
    proc = _start(started, ["sleep", "300"])
    began = time.monotonic()
    assert proc.wait(0.2) is None
    assert 0.2 <= time.monotonic() - began < 2.0
    assert alive(proc.pid) and proc.returncode is None


def _polled_exit(proc: Process, limit_s: float) -> bool:
    """The old way, for comparison: look every 20 ms."""
    deadline = time.monotonic() + limit_s
    while not proc.has_exited():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _exit_latency(started: list[Process], how: str) -> float:
    """Seconds between a SIGKILL and the wait seeing the exit of one sleeping child. The kill
    comes from another thread 30 ms into the wait: killed before the wait began, a loaded host
    could finish the exit before the first look, and then the 20 ms look costs nothing."""
    proc = _start(started, ["sleep", "300"])
    time.sleep(0.02)  # let it settle into its sleep
    killed: list[float] = []

    def kill_soon() -> None:
        time.sleep(0.03)
        killed.append(time.monotonic())
        os.kill(proc.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_soon)
    killer.start()
    if how == "asyncio":
        assert asyncio.run(proc.wait_exited_async(5.0))
    elif how == "poll-20ms":
        assert _polled_exit(proc, 5.0)
    else:
        assert proc.wait_exited(5.0)
    seen = time.monotonic() - killed[0]
    killer.join()
    assert proc.reap() == -signal.SIGKILL
    return seen


@pytest.mark.parametrize("how", ["blocking", "asyncio"])
def test_an_exit_is_seen_without_the_delay_of_a_look_every_20_ms(
    started: list[Process], how: str
) -> None:
    # Interleaved with the old 20 ms look, so both meet the same load: the look adds ~10 ms at
    # the median (uniform 0-20 ms); a pidfd wakes at the exit, with the scheduler's delay only.
    ours, polled = [], []
    for _ in range(9):
        ours.append(_exit_latency(started, how))
        polled.append(_exit_latency(started, "poll-20ms"))
    assert statistics.median(ours) + 0.004 < statistics.median(polled), (ours, polled)


def test_a_wait_sleeps_in_the_kernel_instead_of_waking_to_look(started: list[Process]) -> None:
    # The waiting thread's voluntary context switches over a 400 ms wait: a look every 20 ms
    # would add ~20; a wait on the pidfd adds one (or two).
    proc = _start(started, ["sleep", "300"])

    def switches() -> int:
        status = Path(f"/proc/self/task/{threading.get_native_id()}/status").read_text()
        return int(status.split("voluntary_ctxt_switches:")[1].split()[0])

    before = switches()
    assert proc.wait_exited(0.4) is False
    assert switches() - before <= 3


def test_the_watcher_stamps_the_exit_and_tells_the_callbacks(started: list[Process]) -> None:
    told: list[int | None] = []
    proc = _start(started, ["sh", "-c", "read line; exit 7"], stdin=subprocess.PIPE, watch=True)
    proc.on_exit(lambda p: told.append(p.exit_status_unreaped()))
    assert proc.exit_seen_ns is None
    assert proc.popen.stdin is not None
    before = time.monotonic_ns()
    proc.popen.stdin.write(b"go\n")
    proc.popen.stdin.close()
    seen = proc.exit_seen(5.0)
    assert seen is not None and seen >= before
    assert told == [7]  # the status, read without reaping
    assert proc.reap() == 7


def test_without_pidfd_the_waiter_thread_is_used_and_recorded(
    started: list[Process], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pidfd(pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(process_module.os, "pidfd_open", no_pidfd)
    ours, polled = [], []
    for _ in range(7):
        ours.append(_exit_latency(started, "blocking"))
        polled.append(_exit_latency(started, "poll-20ms"))
    assert all(p.waiter == WAITER_THREAD for p in started)
    assert started[-1].waiter_reason == "pidfd_open: Function not implemented"
    assert statistics.median(ours) + 0.004 < statistics.median(polled), (ours, polled)


def test_exec_stamp_falls_between_the_call_and_its_return(started: list[Process]) -> None:
    before = time.monotonic_ns()
    proc = _start(started, ["true"], stamp_exec=True)
    after = time.monotonic_ns()
    assert proc.exec_ns is not None and before < proc.exec_ns < after
    assert proc.wait(5.0) == 0


def test_a_missing_program_raises_oserror_and_leaves_no_thread() -> None:
    before = set(threading.enumerate())
    with pytest.raises(FileNotFoundError):
        Process.start(["/nonexistent/metewand-test-program"], watch=True)
    started_here = [t for t in threading.enumerate() if t not in before]
    for thread in started_here:  # the pre-started watcher is told there is nothing to watch
        thread.join(5.0)
    assert not [t.name for t in started_here if t.is_alive()]


def test_the_sweep_finds_the_recorded_process_and_its_session(started: list[Process]) -> None:
    proc = _start(started, ["sh", "-c", GRANDPARENT.format(end="exit 0")], stdout=subprocess.PIPE)
    grandchild = int(_first_line(proc))
    recorded = identity_of(proc.pid)
    assert recorded is not None
    proc.wait_exited(5.0)
    # The leader exited (a zombie until reaped): its session lives on in the grandchild.
    assert left_alive([recorded]) == [grandchild]
    killed, still = kill_until_gone(lambda: left_alive([recorded]), 5.0)
    assert killed == [grandchild] and still == []


def test_the_sweep_never_kills_a_recycled_pid(started: list[Process]) -> None:
    # A pid is recycled on its own schedule, not on demand; what the sweep sees of one is a live
    # process under a recorded pid with another start time. The records below are exactly that.
    proc = _start(started, ["sleep", "300"])
    now = identity_of(proc.pid)
    assert now is not None
    reused_pid = Identity(proc.pid, now.starttime - 1, session=1)  # an older owner of the pid
    reused_session = Identity(proc.pid, now.starttime - 1, session=proc.pid)  # led a session
    for records in ([reused_pid], [reused_session], [reused_pid, reused_session]):
        assert left_alive(records) == []
        assert kill_until_gone(lambda: left_alive(records), 1.0) == ([], [])  # noqa: B023
    assert alive(proc.pid)
    assert left_alive([now]) == [proc.pid]  # the true identity is found


def test_identity_records_must_name_integers() -> None:
    assert Identity.from_record({"pid": 5, "starttime": 7, "session": 5}) == Identity(5, 7, 5)
    for bad in (
        {"pid": 5},
        {"pid": "5", "starttime": 7, "session": 5},
        [5, 7, 5],
        {"pid": True, "starttime": 7, "session": 5},
    ):
        assert Identity.from_record(bad) is None


def test_run_captured_returns_the_output_and_the_status() -> None:
    done = run_captured(["sh", "-c", "echo out; echo err >&2; exit 4"], 10.0)
    assert (done.returncode, done.stdout, done.stderr) == (4, b"out\n", b"err\n")
    assert not done.timed_out


def test_run_captured_ends_at_its_deadline_with_what_it_left() -> None:
    began = time.monotonic()
    done = run_captured(["sh", "-c", "sleep 300 & echo $!; sleep 300"], 0.3)
    assert done.timed_out and done.returncode is None
    assert 0.3 <= time.monotonic() - began < 5.0
    assert wait_gone([int(done.stdout.split()[0])], 5.0) == []  # it went with the group


def test_the_exit_wait_method_is_named_with_the_reason_for_a_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert exit_wait_method() == (WAITER_PIDFD, None)

    def no_pidfd(pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(process_module.os, "pidfd_open", no_pidfd)
    assert exit_wait_method() == (WAITER_THREAD, "pidfd_open: Function not implemented")
