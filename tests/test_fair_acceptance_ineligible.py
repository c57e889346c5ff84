"""Acceptance 1 (the negative half), on real chrome + lightpanda: each broken condition makes the
comparison ineligible, and the summary names that condition with the right reason.

Every run is one cheap task so the conditions not under test hold (two engines, k=5, jobs=1,
profile engine, a non-empty intersection); the profiled runs that need a calibration get one.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fair_acceptance_helpers import conditions_of, run, summary_of

pytestmark = pytest.mark.slow

CPU_HOG = "while True:\n    pass\n"
# Writes every page of 1 GiB and holds it: real memory pressure without endangering the host.
MEMORY_HOG = (
    "import time\nb = bytearray(1 << 30)\nb[::4096] = b'\\x01' * len(b[::4096])\ntime.sleep(600)\n"
)


def _failed(run_dir: Path) -> dict[str, str]:
    summary = summary_of(run_dir)
    assert summary["resource_comparison_eligible"] is False
    return {c["id"]: c["reason"] for c in summary["eligibility_conditions"] if not c["passed"]}


def test_k3_is_ineligible_for_k(tmp_path: Path) -> None:
    failed = _failed(run(tmp_path, "k3", k=3))
    assert "k=3, needs k>=5" in failed["profile_jobs_k"]


def test_jobs2_is_ineligible_for_jobs(tmp_path: Path) -> None:
    failed = _failed(run(tmp_path, "jobs2", jobs=2))
    assert "jobs=2, needs jobs=1" in failed["profile_jobs_k"]
    assert "k=" not in failed["profile_jobs_k"]


def test_one_engine_is_ineligible_for_engines(tmp_path: Path) -> None:
    failed = _failed(run(tmp_path, "solo", engines=("chrome",)))
    assert "1 engine(s) selected" in failed["engines"]


def test_baseline_with_another_seed_fails_calibration(tmp_path: Path) -> None:
    run(tmp_path, "base_other_seed", profile="baseline", seed="another-seed")
    profiled = run(tmp_path, "prof", seed="acc", baseline=str(tmp_path / "base_other_seed"))
    failed = _failed(profiled)
    assert "differ: seed" in failed["calibration"]
    assert "provenance_identical" in summary_of(profiled)["observer_effect"]["failed_checks"]


@pytest.fixture
def hogs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """A CPU hog per core plus two, and a 1 GiB memory hog; stopped by pid afterwards."""
    import os

    n_cpu = len(os.sched_getaffinity(0)) + 2
    procs = [subprocess.Popen([sys.executable, "-c", CPU_HOG]) for _ in range(n_cpu)]
    procs.append(subprocess.Popen([sys.executable, "-c", MEMORY_HOG]))
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _cpu_some_avg10() -> float:
    line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    return float(dict(f.split("=") for f in line.split()[1:])["avg10"])


def test_polluted_host_fails_the_host_gate(
    tmp_path: Path, hogs: list[subprocess.Popen[bytes]]
) -> None:
    deadline = time.monotonic() + 30
    while _cpu_some_avg10() < 70 and time.monotonic() < deadline:  # let the 10 s average rise
        time.sleep(0.5)
    failed = _failed(run(tmp_path, "polluted"))
    assert failed["host_gate"].startswith("host polluted: ")
    assert "sustained_cpu_pressure" in failed["host_gate"]
    assert conditions_of(tmp_path / "polluted")["host_gate"]["figures"]["triggered"]
