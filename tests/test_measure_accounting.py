"""Acceptance 1 and 2 of issue 2 on real processes and real cgroups, plus group cleanup."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from metewand.measure.accounting import AccountingUnavailable, open_accounting
from metewand.measure.forms import QualityFlag, Reason, Status
from metewand.measure.subject import SubjectReport, run_measured

BURN = textwrap.dedent(
    """
    import os, sys, time
    def burn(seconds):
        start = time.process_time()
        while time.process_time() - start < seconds:
            pass
    def report(path):
        t = os.times()
        with open(path + ".tmp", "w") as f:
            f.write(str(t.user + t.system))
        os.rename(path + ".tmp", path)
    """
)

# Each process reports its own CPU and leaves at once: os._exit skips the interpreter's
# shutdown, CPU the cgroup would count after the report (tens of ms on a loaded host).
CHILD = BURN + "burn(0.5)\nreport(sys.argv[1])\nos._exit(0)\n"

# The parent never reaps the child: after the parent exits, the child's CPU is invisible to /proc.
PARENT = BURN + textwrap.dedent(
    """
    out = sys.argv[1]
    # posix_spawn, not subprocess: a collected Popen reaps its zombie child behind our back.
    os.posix_spawn(sys.executable, [sys.executable, "-c", sys.argv[2], out + ".child"], os.environ)
    burn(0.5)
    while not os.path.exists(out + ".child"):
        time.sleep(0.01)
    time.sleep(0.05)  # the child has reported and exits first
    report(out + ".parent")
    os._exit(0)
    """
)


def tree_cpu_slack_ns(expected_ns: float) -> float:
    """How far the group's exact CPU may lie from the two processes' own reports: 5%, plus what
    the reports cannot see. ``os.times`` truncates to clock ticks (up to 10 ms per process), and
    each process still exits after its report (the kernel tears down its address space on its
    CPU): CI at load ~6 saw 55 ms above a 1.03 s sum. A lost child is 0.5 s, far outside."""
    return 0.05 * expected_ns + 40e6


def require(backend: str) -> None:
    try:
        open_accounting(backend, label="probe").close()
    except AccountingUnavailable as exc:
        pytest.skip(f"backend {backend} unavailable here: {exc.reason}")


def run_tree(backend: str, tmp_path: Path) -> tuple[SubjectReport, float]:
    out = str(tmp_path / "cpu")
    report = run_measured([sys.executable, "-c", PARENT, out, CHILD], backend=backend)
    own = sum(float(Path(out + suffix).read_text()) for suffix in (".parent", ".child"))
    return report, own * 1e9


@pytest.mark.parametrize("backend", ["cgroup2", "cgroup1"])
def test_cgroup_tree_cpu_is_complete_and_matches_the_sum(backend: str, tmp_path: Path) -> None:
    require(backend)
    report, expected_ns = run_tree(backend, tmp_path)
    cpu = report.measurements["cpu_time_ns"]
    assert report.backend == backend
    assert cpu.status is Status.COMPLETE
    assert cpu.source.startswith("cgroup")
    assert abs(cpu.value - expected_ns) <= tree_cpu_slack_ns(expected_ns), (cpu.value, expected_ns)


def test_proc_tree_cpu_is_partial_and_misses_the_unreaped_child(tmp_path: Path) -> None:
    report, expected_ns = run_tree("proc", tmp_path)
    cpu = report.measurements["cpu_time_ns"]
    assert cpu.status is Status.PARTIAL and cpu.reason is Reason.PROCESS_ONLY
    assert QualityFlag.PROC_TREE_CHILD_EXIT_LOSS_RISK in report.quality_flags
    # The child's ~0.5 s is lost: the difference is visible, not hidden.
    assert cpu.value < 0.8 * expected_ns, (cpu.value, expected_ns)


ALLOCATE = textwrap.dedent(
    """
    import subprocess, sys, time
    time.sleep(0.3)
    subprocess.run([sys.executable, "-c",
                    "import time; b = b'x' * (256 << 20); time.sleep(0.1)"], check=True)
    time.sleep(0.3)
    """
)

MIB = 1 << 20


@pytest.mark.parametrize("backend", ["cgroup2", "cgroup1"])
def test_cgroup_memory_high_water_covers_the_exited_child(backend: str) -> None:
    require(backend)
    report = run_measured([sys.executable, "-c", ALLOCATE], backend=backend)
    peak = report.measurements["peak_memory_bytes"]
    if peak.status is Status.UNAVAILABLE:
        pytest.skip(f"no memory controller for {backend}: {peak.reason}")
    assert peak.status is Status.COMPLETE
    assert peak.value >= 256 * MIB


def test_proc_memory_is_the_root_only_and_partial() -> None:
    report = run_measured([sys.executable, "-c", ALLOCATE], backend="proc")
    peak = report.measurements["peak_memory_bytes"]
    assert peak.status is Status.PARTIAL and peak.reason is Reason.PROCESS_ONLY
    assert peak.source == "proc:status:VmHWM"
    assert peak.value < 64 * MIB


@pytest.mark.parametrize("backend", ["cgroup2", "cgroup1"])
def test_close_kills_members_and_removes_every_group(backend: str) -> None:
    require(backend)
    accounting = open_accounting(backend, label="cleanup")
    paths = [group.path for group in accounting.groups]
    script = "import subprocess,time; subprocess.Popen(['sleep','60']); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", script], preexec_fn=accounting.preexec_join())
    deadline = time.monotonic() + 5
    while len(accounting.pids()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    members = accounting.pids()
    assert proc.pid in members and len(members) == 2
    accounting.close()
    proc.wait(timeout=5)
    assert all(not os.path.exists(path) for path in paths)
    for pid in members:
        assert not os.path.exists(f"/proc/{pid}") or _state(pid) == "Z"


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2]


def test_auto_records_why_it_fell_back() -> None:
    accounting = open_accounting("auto", label="auto")
    try:
        assert accounting.backend in ("cgroup2", "cgroup1", "proc")
        if accounting.backend != "cgroup2":
            assert accounting.fallback_reasons and accounting.fallback_reasons[0].startswith(
                "cgroup2"
            )
    finally:
        accounting.close()


def test_unknown_backend_is_rejected() -> None:
    with pytest.raises(ValueError):
        open_accounting("zfs")
