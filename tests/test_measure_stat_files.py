"""``procfs.StatFiles``: host telemetry's scan of every process, with each ``/proc/PID/stat``
kept open from one scan to the next. It must read what a fresh open reads, never a process that
is gone (its pid may belong to another by the next scan), and close what it no longer needs.
Real processes throughout; the one injected fault is a kept descriptor whose process is gone
while its pid is listed again, which pid reuse produces but no test can order.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from metewand.measure import procfs
from metewand.measure.foreign import ForeignCpuTracker


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _sleeper() -> subprocess.Popen[bytes]:
    """A process that is asleep by the time this returns: its interpreter's start-up, which burns
    CPU for tens of ms (more on a loaded host), is over once it has said so (a CI run once read
    an "idle" sleeper gain a tick between two scans)."""
    code = "import sys, time; print(flush=True); time.sleep(60)"
    sleeper = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert sleeper.stdout is not None
    sleeper.stdout.readline()
    sleeper.stdout.close()  # the tests count this process's descriptors
    _wait_until_still(sleeper.pid)
    return sleeper


def _wait_until_still(pid: int) -> None:
    """Until the process's exact CPU time (``schedstat``) stops moving: it still runs a little
    after its line (into ``time.sleep``), and the kernel splits the exact time into the ticks
    ``stat`` shows, so that little once carried it over a tick between two scans (ci180)."""
    deadline = time.monotonic() + 10
    before = Path(f"/proc/{pid}/schedstat").read_text().split()[0]
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = Path(f"/proc/{pid}/schedstat").read_text().split()[0]
        if now == before:
            return
        before = now
    raise AssertionError(f"process {pid} did not go idle within 10 s")


def _stable(stat: procfs.CpuStat) -> tuple[int, int, bytes]:
    """The fields a scan moments later must read the same. A kernel worker renames itself for
    each workqueue it serves (``kworker/0:0-cgroup_release`` became ``-cgroup_bpf_destroy``
    between two reads in one CI run), so a kernel thread's name is not among them; nor is the
    parent, which changes when the parent exits (ci174: a python3 of another test went from
    parent 12752 to 1 between the two scans)."""
    comm = b"" if stat.kernel_thread else stat.raw_comm
    return stat.session, stat.starttime_ticks, comm


def test_a_kept_scan_reads_what_fresh_opens_read() -> None:
    files = procfs.StatFiles()
    try:
        first = files.read_all_cpu()
        again = files.read_all_cpu()  # from the kept descriptors
        fresh = procfs.read_all_cpu()
    finally:
        files.close()
    me = os.getpid()
    assert me in first and me in again and me in fresh
    for pid in set(again) & set(fresh):
        assert _stable(again[pid]) == _stable(fresh[pid]), pid
    assert set(first) & set(again) & set(fresh)


def test_a_gone_process_is_dropped_and_its_descriptor_closed() -> None:
    before = _open_fds()
    files = procfs.StatFiles()
    child = _sleeper()
    try:
        assert child.pid in files.read_all_cpu()
        kept = files.kept
        assert _open_fds() == before + kept
    finally:
        child.kill()
        child.wait()
    try:
        assert child.pid not in files.read_all_cpu()
        assert files.kept <= kept  # the child's is closed, whatever else came meanwhile
    finally:
        files.close()
    assert _open_fds() == before


def test_a_kept_descriptor_of_a_gone_process_never_answers_for_a_new_one() -> None:
    """A pid that was reused: the descriptor kept for it reads a process that is gone, and the
    scan must open the pid's file afresh and read the living process."""
    files = procfs.StatFiles()
    gone, living = _sleeper(), _sleeper()
    try:
        stale = os.open(f"/proc/{gone.pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        gone.kill()
        gone.wait()  # reaped: its descriptor reads nothing any more
        try:
            os.pread(stale, 4096, 0)
        except ProcessLookupError:
            pass
        else:
            raise AssertionError("a reaped process's stat still reads")
        assert living.pid in files.read_all_cpu()
        os.close(files._fds.pop(str(living.pid)))
        files._fds[str(living.pid)] = stale  # the pid, listed again, held by another process
        scanned = files.read_all_cpu()
        assert _stable(scanned[living.pid]) == _stable(procfs.read_all_cpu()[living.pid])
        kept = files._fds[str(living.pid)]
        assert os.pread(kept, 4096, 0).startswith(f"{living.pid} (".encode())
    finally:
        living.kill()
        living.wait()
        files.close()


def test_no_more_descriptors_are_kept_than_the_limit_and_every_process_is_still_read() -> None:
    before = _open_fds()
    files = procfs.StatFiles(limit=3)
    try:
        scanned = files.read_all_cpu()
        assert files.kept == 3 and _open_fds() == before + 3
        assert len(scanned) >= len(procfs.read_all_cpu()) - 5  # processes come and go meanwhile
        assert os.getpid() in files.read_all_cpu()
    finally:
        files.close()
    assert _open_fds() == before


def test_a_foreign_cpu_tracker_closes_what_it_kept() -> None:
    before = _open_fds()
    tracker = ForeignCpuTracker(os.getpid())
    tracker.observe()
    assert tracker.observe() is not None
    assert _open_fds() > before
    tracker.close()
    assert _open_fds() == before


def test_a_busy_process_is_read_afresh_and_an_idle_one_keeps_its_figures() -> None:
    """Figures are reused only for a line that reads exactly as at the last scan."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = _sleeper()
    files = procfs.StatFiles()
    try:
        first = files.read_all_cpu()
        time.sleep(0.3)  # the burner runs ~30 clock ticks meanwhile
        second = files.read_all_cpu()
        assert second[burner.pid].own_ticks > first[burner.pid].own_ticks
        assert second[burner.pid] == procfs.read_all_cpu()[burner.pid]._replace(
            own_ticks=second[burner.pid].own_ticks, total_ticks=second[burner.pid].total_ticks
        )
        assert second[idle.pid] == first[idle.pid] == procfs.read_all_cpu()[idle.pid]
    finally:
        for child in (burner, idle):
            child.kill()
            child.wait()
        files.close()


def test_host_telemetry_closes_what_its_scans_kept_when_it_stops() -> None:
    from metewand.measure.host import HostTelemetry

    before = _open_fds()
    telemetry = HostTelemetry(0.1, os.getpid()).start()
    time.sleep(0.35)
    assert _open_fds() > before  # the scans keep their descriptors between samples
    summary = telemetry.stop()
    assert summary["sample_count"] >= 3
    assert _open_fds() == before
