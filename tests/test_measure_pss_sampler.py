"""PSS scans of real trees (zombies, unreadable processes) and the sampler (flags, faults)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from measure_helpers import kill_tree
from metewand.measure import procfs
from metewand.measure.forms import QualityFlag, Reason, Status, complete, partial
from metewand.measure.pss import PssScanner, scan_pss
from metewand.measure.subject import run_measured

TREE = (
    "import subprocess, sys, time\n"
    "kids = [subprocess.Popen([sys.executable, '-c', 'import time; b = bytes(8 << 20); "
    'b = b"x" * (8 << 20); time.sleep(30)\']) for _ in range(3)]\n'
    "time.sleep(30)\n"
)


def _wait_for_tree(root: int, size: int) -> list[int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = procfs.descendants(root)
        if len(pids) >= size and all(_pss_ready(p) for p in pids):
            return pids
        time.sleep(0.05)
    raise AssertionError("tree did not come up")


def _pss_ready(pid: int) -> bool:
    try:
        return procfs.read_status(pid).vm_rss_bytes is not None
    except procfs.ProcessGone:
        return False


@pytest.fixture
def tree() -> object:
    proc = subprocess.Popen([sys.executable, "-c", TREE])
    try:
        yield proc
    finally:
        kill_tree(proc)


def test_pss_of_a_real_tree_is_the_sum_of_its_members(tree: subprocess.Popen[bytes]) -> None:
    pids = _wait_for_tree(tree.pid, 4)
    time.sleep(0.3)  # let the children touch their 8 MiB
    scan = scan_pss(pids, workers=2)
    assert scan.process_count == 4 and scan.zombie_count == 0
    assert scan.measurement().status is Status.COMPLETE
    assert scan.total_bytes == sum(scan.per_pid_bytes.values())
    assert scan.total_bytes >= 3 * 8 << 20
    assert scan.reader_cpu_ns > 0
    # Parallel and sequential scans agree (within what the processes change between the reads).
    sequential = scan_pss(pids, workers=1)
    assert abs(sequential.total_bytes - scan.total_bytes) < 4 << 20


def test_zombie_counts_as_a_process_with_zero_pss() -> None:
    zombie = subprocess.Popen(["true"])
    deadline = time.monotonic() + 5
    while procfs.read_stat(zombie.pid).state != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        scan = scan_pss([os.getpid(), zombie.pid])
        assert scan.zombie_count == 1 and scan.process_count == 2
        assert scan.per_pid_bytes[zombie.pid] == 0
        assert scan.measurement().status is Status.COMPLETE
        assert QualityFlag.PSS_ZERO_ADDRESS_SPACE_PROCESS in scan.quality_flags
    finally:
        zombie.wait()


def test_vanished_member_is_retried_against_a_fresh_listing() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid is listed but no longer exists
    listings = [[os.getpid(), gone.pid], [os.getpid()]]
    scan = PssScanner().scan(lambda: listings.pop(0) if len(listings) > 1 else listings[0])
    assert scan.retried and scan.process_count == 1
    assert QualityFlag.PSS_SCAN_RETRIED in scan.quality_flags
    assert scan.measurement().status is Status.COMPLETE


def test_unreadable_member_makes_the_total_unavailable_never_zero() -> None:
    try:
        os.close(os.open("/proc/1/smaps_rollup", os.O_RDONLY))
        fd = os.open("/proc/1/smaps_rollup", os.O_RDONLY)
        os.read(fd, 64)
        os.close(fd)
    except PermissionError:
        pass
    else:
        pytest.skip("pid 1 is readable here; no real unreadable process to scan")
    scan = scan_pss([os.getpid(), 1])
    assert scan.total_bytes is None
    m = scan.measurement()
    assert m.status is Status.UNAVAILABLE and m.reason is Reason.PERMISSION_DENIED
    assert m.value is None and QualityFlag.PSS_UNAVAILABLE in scan.quality_flags


def test_empty_listing_is_unavailable_not_zero() -> None:
    m = scan_pss([]).measurement()
    assert m.status is Status.UNAVAILABLE and m.value is None


def test_out_of_range_values_become_unavailable() -> None:
    huge = 2**53
    assert complete(huge).status is Status.UNAVAILABLE
    assert complete(huge).reason is Reason.OUT_OF_RANGE
    assert partial(huge, Reason.PROCESS_ONLY).reason is Reason.OUT_OF_RANGE


def test_sampler_takes_many_pss_points_and_counts_its_cpu() -> None:
    script = "import time; b = b'x' * (32 << 20); time.sleep(0.8)"
    report = run_measured([sys.executable, "-c", script], interval_ms=20, pss_every=2)
    summary = report.sampler
    assert summary.pss_sample_count >= 5 and summary.tick_count >= 10
    assert QualityFlag.BASELINE_END_ONLY not in report.quality_flags
    assert report.measurements["pss_peak_bytes"].value >= 32 << 20
    assert report.measurements["pss_baseline_bytes"].value < 32 << 20
    assert summary.sampler_cpu_ns > 0
    kinds = {s["kind"] for s in summary.samples}
    assert kinds == {"baseline", "tick"}


def test_short_command_has_only_baseline_and_says_so() -> None:
    report = run_measured(["sleep", "0.05"], interval_ms=1000)
    assert QualityFlag.BASELINE_END_ONLY in report.quality_flags


def test_sampler_fault_is_contained_and_flagged() -> None:
    def explode(tick: int) -> None:
        if tick == 3:
            raise RuntimeError("injected sampler fault")

    report = run_measured(
        [sys.executable, "-c", "import time; time.sleep(0.5); raise SystemExit(7)"],
        interval_ms=20,
        pss_every=1,
        fault_hook=explode,
    )
    assert report.exit_status == 7  # the subject ran to its own end
    assert QualityFlag.SAMPLER_FAULT in report.quality_flags
    assert "injected" in (report.sampler.fault or "")
    assert report.measurements["pss_end_bytes"].reason is Reason.SAMPLER_FAULT
    assert report.measurements["pss_peak_bytes"].status is Status.PARTIAL
    assert report.measurements["cpu_time_ns"].status is not Status.UNAVAILABLE
    assert report.sampler.tick_count == 3
