"""The CPU-steadiness probe (measure.cpu_steadiness): real slices of fixed work on each CPU, and
its sample-size figure held to its stated power and false-alarm rate by simulation."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from scipy import stats

from metewand.measure import cpu_steadiness


def test_the_probe_times_slices_on_every_usable_cpu_and_puts_the_affinity_back() -> None:
    before = os.sched_getaffinity(0)
    figures = cpu_steadiness.probe(slice_ms=5.0, slices=5)
    assert os.sched_getaffinity(0) == before
    assert set(figures["cpus"]) == {str(cpu) for cpu in before}
    for cpu in figures["cpus"].values():
        # calibrated to ~5 ms of this thread's CPU: a 5x slower or faster host is not this loop
        assert 1.0 <= cpu["median_ms"] <= 25.0
        assert cpu["min_ms"] <= cpu["median_ms"] <= cpu["max_ms"]
    low, high = figures["range_of_median"]
    assert low <= 1.0 <= high
    assert figures["log_sd"] > 0  # real slices never all take the same nanoseconds
    needed = figures["pairs_needed"]
    assert needed["5%"] >= needed["10%"] >= needed["20%"] >= 2


def test_too_few_slices_are_refused() -> None:
    with pytest.raises(ValueError, match="slices"):
        cpu_steadiness.probe(slices=2)


def _detection_rate(n: int, log_sd: float, change: float, trials: int, seed: int) -> float:
    """Paired t-tests (two-sided, 5%) on ``trials`` simulated runs of ``n`` pairs, each side's
    log time N(., log_sd^2) on its own: the model ``pairs_needed`` states."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0.0, log_sd, (trials, n))
    new = rng.normal(math.log1p(change), log_sd, (trials, n))
    diff = new - base
    t = diff.mean(axis=1) / (diff.std(axis=1, ddof=1) / math.sqrt(n))
    p = 2 * stats.t.sf(np.abs(t), n - 1)
    return float(np.mean(p < 0.05))


@pytest.mark.parametrize(
    ("log_sd", "change"), [(0.18, 0.20), (0.10, 0.10), (0.05, 0.05), (0.02, 0.20)]
)
def test_pairs_needed_gives_80_percent_power_and_one_pair_fewer_does_not(
    log_sd: float, change: float
) -> None:
    n = cpu_steadiness.pairs_needed(log_sd, change)
    trials = 4000  # the rate's standard error ~0.0063 at 80%
    at_n = _detection_rate(n, log_sd, change, trials, seed=1)
    assert at_n >= 0.775, (n, at_n)
    if n > 2:
        fewer = _detection_rate(n - 1, log_sd, change, trials, seed=2)
        assert fewer < 0.825 and fewer <= at_n + 0.02, (n, fewer, at_n)


def test_with_no_change_the_test_behind_the_figure_alarms_at_its_5_percent() -> None:
    n = cpu_steadiness.pairs_needed(0.18, 0.10)
    rate = _detection_rate(n, 0.18, 0.0, trials=4000, seed=3)
    assert 0.035 <= rate <= 0.065, rate
