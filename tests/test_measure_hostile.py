"""Hostile input to ``metewand measure`` (issue 27): parameter values that are no numbers or
no end, plans too large to run, and a program that floods its mark FIFO. Real processes; each
case failed on the code before it was fixed (traceback, 10^9 planned runs, every mark kept)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from metewand import canonical

METEWAND = str(Path(sys.executable).with_name("metewand"))


def measure(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [METEWAND, "measure", *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--parameter-scan", "n", "1", "2", "--parameter-step-size", "nan"], "not a finite"),
        (["--parameter-scan", "n", "1", "2", "--parameter-step-size", "inf"], "not a finite"),
        (["--parameter-scan", "n", "0", "inf"], "not a finite"),
        (["--parameter-scan", "n", "nan", "3"], "not a finite"),
        (["--parameter-scan", "n", "1", "2", "--parameter-step-size", "0"], "a step > 0"),
        (["--parameter-scan", "n", "1", "1000000000"], "1,000,000,000 values, more than"),
        (["--parameter-scan", "n", "0", "1e300", "--parameter-step-size", "1e-300"], "too many"),
        (["--parameter-list", "n", ",".join(map(str, range(20_001))), "--runs", "5"], "more than"),
        (["--runs", "100000", "--warmup", "1"], "more than the 100,000"),
    ],
)
def test_bad_or_huge_parameters_are_refused_before_anything_runs(
    args: list[str], said: str, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    done = measure(*args, "--", f"touch {marker}", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists()


def test_a_flood_of_marks_is_capped_per_run_and_counted(tmp_path: Path) -> None:
    """30,000 marks in one run: 10,000 kept by default, the rest counted; metewand's memory
    stays bounded (every mark kept cost ~3 KiB: 200,000 marks took 650 MB)."""
    fifo = tmp_path / "marks.fifo"
    script = f"seq 1 30000 > {fifo}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = measure("--json", "--mark-fifo", str(fifo), "--", "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    phases = canonical.loads(done.stdout)["phases"]
    assert phases["mark_limit"] == 10_000 and phases["mark_count"] == 10_000
    assert phases["dropped_marks"] == 20_000
    assert len(phases["phases"]) == 10_000 and phases["phases"][-1]["name"] == "10000"
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kib < 250_000 or peak_kib == before, peak_kib  # the cap: ~35 MB of marks
    capped = measure(
        "--mark-fifo", str(fifo), "--mark-limit", "3", "--", "sh", "-c", f"seq 1 10 > {fifo}"
    )
    assert "7 mark(s) after the first 3 were counted, not kept" in capped.stderr


def test_a_line_without_an_end_does_not_grow_the_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "marks.fifo"
    script = f"head -c 20000000 /dev/zero | tr '\\0' x > {fifo}; echo > {fifo}; echo done > {fifo}"
    done = measure("--json", "--mark-fifo", str(fifo), "--", "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    names = [p["name"] for p in canonical.loads(done.stdout)["phases"]["phases"]]
    assert len(names) == 2 and len(names[0]) == 200 and names[1] == "done"
