"""Refusals before running: each exits 2 or 3 with a message naming the cause, writes no run
(or leaves the existing one untouched) and shows no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from browser_run_helpers import ABOUT_BLANK_TASK, tiny_corpus
from compute_helpers import problem, python_impl, write_manifest

EXPERIMENT = """
[[experiments]]
name = "e"
problem = "answer"
implementations = ["{impl}"]
repetitions = 1
"""


def metewand(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metewand", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
        check=False,
    )


def refused(done: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    for needle in needles:
        assert needle in done.stderr, (needle, done.stderr)


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))}


# -- compute ---------------------------------------------------------------------------------


def test_run_refuses_an_existing_run_id_and_leaves_it_untouched(tmp_path: Path) -> None:
    write_manifest(tmp_path, problem() + python_impl("a", "ok") + EXPERIMENT.format(impl="a"))
    assert metewand("run", "--run-id", "r", "--quiet", cwd=tmp_path).returncode == 0
    before = _tree(tmp_path / "runs")
    done = metewand("run", "--run-id", "r", "--quiet", cwd=tmp_path)
    refused(done, 2, "run 'r' exists", "--resume r")
    assert _tree(tmp_path / "runs") == before


def test_run_refuses_a_worker_program_that_does_not_exist(tmp_path: Path) -> None:
    impl = """
[implementations.ghost]
runner = "command"
program = "no-such-program-mw"
problems = ["answer"]
"""
    write_manifest(tmp_path, problem() + impl + EXPERIMENT.format(impl="ghost"))
    done = metewand("run", "--quiet", cwd=tmp_path)
    refused(
        done,
        3,
        "metewand.toml: implementations.ghost.program",
        "'no-such-program-mw' not found on PATH",
    )
    assert not (tmp_path / "runs").exists()


def test_run_refuses_a_build_command_that_does_not_exist(tmp_path: Path) -> None:
    impl = """
[implementations.built]
runner = "command"
program = "{build}/prog"
build = ["no-such-compiler-mw", "-o", "{build}/prog", "prog.c"]
problems = ["answer"]
"""
    write_manifest(tmp_path, problem() + impl + EXPERIMENT.format(impl="built"))
    done = metewand("run", "--quiet", cwd=tmp_path)
    refused(done, 3, "implementations.built.build", "'no-such-compiler-mw'")
    assert not (tmp_path / "runs").exists()


def test_run_refuses_a_relative_program_path_missing_beside_the_manifest(tmp_path: Path) -> None:
    impl = """
[implementations.local]
runner = "command"
program = "bin/worker"
problems = ["answer"]
"""
    write_manifest(tmp_path, problem() + impl + EXPERIMENT.format(impl="local"))
    done = metewand("run", "--quiet", cwd=tmp_path)
    refused(done, 3, "implementations.local.program", str(tmp_path / "bin/worker"))


# -- browser ---------------------------------------------------------------------------------

COMMON = ("browser", "run", "--tasks", "corpus", "--no-progress")


def _corpus(tmp_path: Path) -> None:
    tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})


def test_browser_run_refuses_a_missing_engine(tmp_path: Path) -> None:
    _corpus(tmp_path)
    done = metewand(*COMMON, "--engines", "moli", "--run-id", "m", cwd=tmp_path)
    refused(done, 3, "engine moli: engine_binary_missing", "--allow-missing-engines")
    assert not (tmp_path / "runs").exists()


def test_browser_run_refuses_an_existing_run_id(tmp_path: Path) -> None:
    _corpus(tmp_path)
    args = (*COMMON, "--engines", "moli", "--allow-missing-engines", "--run-id", "r")
    assert metewand(*args, cwd=tmp_path).returncode == 0
    before = _tree(tmp_path / "runs")
    refused(metewand(*args, cwd=tmp_path), 2, "run 'r' exists", "--resume r")
    assert _tree(tmp_path / "runs") == before


def _baseline(tmp_path: Path, *extra: str) -> None:
    done = metewand(
        *COMMON,
        "--engines",
        "moli,obscura",
        "--allow-missing-engines",
        "--resource-profile",
        "baseline",
        "--run-id",
        "base",
        *extra,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr


PROFILED = (
    *COMMON,
    "--engines",
    "moli,obscura",
    "--allow-missing-engines",
    "--resource-profile",
    "engine",
    "--run-id",
    "prof",
)


def test_browser_run_refuses_a_missing_calibration_baseline(tmp_path: Path) -> None:
    _corpus(tmp_path)
    done = metewand(*PROFILED, "--resource-calibration-baseline", "gone", cwd=tmp_path)
    refused(done, 2, "--resource-calibration-baseline 'gone': no run directory")
    assert not (tmp_path / "runs" / "prof").exists()


def test_browser_run_refuses_an_incompatible_calibration_baseline(tmp_path: Path) -> None:
    _corpus(tmp_path)
    _baseline(tmp_path, "--k", "2")
    done = metewand(*PROFILED, "--k", "3", "--resource-calibration-baseline", "base", cwd=tmp_path)
    refused(done, 2, "cannot calibrate this run", "k differs: baseline 2, this run 3")
    assert not (tmp_path / "runs" / "prof").exists()
    other = metewand(
        *PROFILED,
        "--k",
        "2",
        "--seed",
        "9",
        "--resource-calibration-baseline",
        "runs/base",
        cwd=tmp_path,
    )
    refused(other, 2, "seed differs")


def test_browser_run_refuses_a_profiled_run_as_baseline(tmp_path: Path) -> None:
    _corpus(tmp_path)
    _baseline(tmp_path)
    assert (
        metewand(*PROFILED, "--resource-calibration-baseline", "base", cwd=tmp_path).returncode == 0
    )
    done = metewand(
        *PROFILED[:-1], "prof2", "--resource-calibration-baseline", "prof", cwd=tmp_path
    )
    refused(done, 2, "ran with --resource-profile engine, not baseline")
    assert not (tmp_path / "runs" / "prof2").exists()


def test_a_never_eligible_profiled_run_is_warned_up_front_or_refused(tmp_path: Path) -> None:
    _corpus(tmp_path)
    _baseline(tmp_path)
    args = (*PROFILED, "--resource-calibration-baseline", "base")  # k=1: never eligible
    strict = metewand(*args, "--require-eligible", cwd=tmp_path)
    refused(strict, 2, "could never be eligible", "--k 1; eligibility needs k >= 5")
    assert not (tmp_path / "runs" / "prof").exists()
    warned = metewand(*args, cwd=tmp_path)
    assert warned.returncode == 0, warned.stderr
    first = warned.stderr.splitlines()[0]
    assert first.startswith("warning: the resource comparison of this run cannot be eligible")
    assert "observer calibrated against a separate profiler-off run" in warned.stderr
    one_engine = metewand(
        *COMMON,
        "--engines",
        "moli",
        "--allow-missing-engines",
        "--k",
        "5",
        "--resource-profile",
        "engine",
        "--require-eligible",
        cwd=tmp_path,
    )
    refused(one_engine, 2, "1 engine selected")
    assert "calibration" not in one_engine.stderr  # interleaved, the default, calibrates itself
    no_baseline = metewand(
        *COMMON,
        "--engines",
        "moli,obscura",
        "--allow-missing-engines",
        "--k",
        "5",
        "--resource-profile",
        "engine",
        "--resource-calibration",
        "peer-ab",
        "--require-eligible",
        cwd=tmp_path,
    )
    refused(
        no_baseline, 2, "--resource-calibration peer-ab without --resource-calibration-baseline"
    )
