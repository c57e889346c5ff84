"""Change points judged by their error rates on seeded synthetic series (never one example):
false change points on unchanged series, power on a planted step, the newest run's step, a lone
outlier set aside; and check's exit codes on a real store file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from metewand.history import synthetic
from metewand.history.changepoints import analyse, historical_noise, run_factors

TRIALS = 400


def _series(rng: np.random.Generator, n: int, sigma: float, step: float = 0.0,
            at: int = 0) -> np.ndarray:  # fmt: skip
    values = 100 * np.exp(rng.normal(0, sigma, n))
    values[at:] *= 1 + step
    return values


def test_false_change_points_on_unchanged_series_are_rare() -> None:
    rng = np.random.default_rng(20231)
    alarms = sum(bool(analyse(_series(rng, 16, 0.03)).change_points) for _ in range(TRIALS))
    assert alarms / TRIALS <= 0.03, alarms  # measured ~1.2% per 16-run series at alpha 0.01


def test_a_planted_step_is_found_at_its_run() -> None:
    rng = np.random.default_rng(20232)
    exact = 0
    for _ in range(TRIALS):
        found = analyse(_series(rng, 16, 0.02, 0.15, 8)).change_points
        exact += len(found) == 1 and found[0].index == 8
    assert exact / TRIALS >= 0.93, exact  # measured ~98% for a 7.5-sigma step at run 9 of 16


def test_the_step_ci_covers_the_true_step() -> None:
    rng = np.random.default_rng(20233)
    covered = found = 0
    for _ in range(TRIALS):
        points = analyse(_series(rng, 24, 0.03, 0.15, 12)).change_points
        for point in points:
            if point.index == 12:
                found += 1
                covered += point.step_ci[0] <= 0.15 <= point.step_ci[1]
    assert found > 0.9 * TRIALS and covered / found >= 0.9, (found, covered)


def test_the_newest_run_can_start_a_step_and_a_lone_outlier_is_set_aside() -> None:
    rng = np.random.default_rng(20234)
    newest = sum(
        any(p.index == 20 for p in analyse(_series(rng, 21, 0.02, 0.25, 20)).change_points)
        for _ in range(100)
    )
    assert newest >= 90, newest
    values = _series(rng, 20, 0.02)
    values[9] *= 1.6
    analysis = analyse(values)
    assert analysis.change_points == [] and analysis.outliers == [9]


def test_historical_noise_and_run_factors() -> None:
    rng = np.random.default_rng(20235)
    noisy = np.log(_series(rng, 400, 0.05, 0.3, 200))
    assert 0.04 < historical_noise(noisy) < 0.06  # the 30% step (6 sigma) does not inflate it
    host = {f"r{i}": 1.0 + 0.2 * (i >= 5) for i in range(10)}  # the host got 20% slower
    groups = [[(run, 100.0 * g * f) for run, f in host.items()] for g in range(1, 6)]
    factors = run_factors(groups)
    assert all(abs(factors[run] / host[run] - factors["r0"]) < 1e-9 for run in host)


def test_check_exit_codes_on_a_store(tmp_path: Path) -> None:
    metewand = [sys.executable, "-m", "metewand", "history", "check", "--fail-on-change"]
    env = {**os.environ}
    short, quiet, stepped = (
        tmp_path / "short.duckdb",
        tmp_path / "quiet.duckdb",
        tmp_path / "s.duckdb",
    )
    synthetic.build(short, 4, 6)
    synthetic.build(quiet, 30, 6, sigma=0.02)
    synthetic.build(stepped, 30, 6, sigma=0.02, step=0.3, step_at=29, step_groups=1)
    done = [subprocess.run([*metewand, "--history", str(p)], capture_output=True, text=True,
                           env=env) for p in (short, quiet, stepped)]  # fmt: skip
    assert done[0].returncode == 2 and "needs 6 (run 2 more)" in done[0].stderr, done[0].stderr
    assert done[1].returncode == 0, done[1].stdout
    assert done[2].returncode == 1, done[2].stdout
    assert "NEW change: case 000 x impl 0" in done[2].stdout and "syn00029" in done[2].stdout
