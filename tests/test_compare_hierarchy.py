"""compare.hierarchy and compare.significance by their error rates on synthetic data whose
variances are known: CI coverage over 1,000 seeded trials, the variance components recovered, the
rank tests' exact p-values, and Benjamini-Hochberg."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metewand.compare import hierarchy, hierarchy_figures, significance

TRIALS = 1000
RESAMPLES = 500  # per CI; the coverage does not depend on it beyond noise (2000 in compare)
SIGMA = {"run": 0.05, "launch": 0.04, "repetition": 0.03}  # log scale: ~5%, 4%, 3%
TRUE_LOG_RATIO = 0.1


def _side(
    rng: np.random.Generator, runs: int, launches: int, reps: int, shift: float, sigma: dict
) -> hierarchy.Nested:
    """A side of three levels, log value = shift + run + launch + repetition effects (built as
    the rectangle ``hierarchy.nested`` makes, without a Python loop per value)."""
    run = rng.normal(0, sigma["run"], (runs, 1, 1))
    launch = rng.normal(0, sigma["launch"], (runs, launches, 1))
    rep = rng.normal(0, sigma["repetition"], (runs, launches, reps))
    return hierarchy.Nested(
        shift + run + launch + rep,
        np.full(runs, launches, dtype=np.intp),
        np.full((runs, launches), reps, dtype=np.intp),
    )


def test_the_rectangle_is_what_nested_builds() -> None:
    rng = np.random.default_rng(1)
    side = _side(rng, 2, 3, 2, 0.0, SIGMA)
    items = [
        (r, i, math.exp(side.values[r, i, k])) for r in range(2) for i in range(3) for k in range(2)
    ]
    built = hierarchy.nested(items)
    assert np.allclose(built.values, side.values)
    assert (built.launches == side.launches).all() and (built.reps == side.reps).all()


def _coverage(estimates: list[hierarchy.Estimate], true_log_ratio: float) -> float:
    truth = math.exp(true_log_ratio)
    return sum(e.ci is not None and e.ci[0] <= truth <= e.ci[1] for e in estimates) / len(estimates)


def test_three_level_hierarchy_ci_covers_95_percent_over_1000_trials() -> None:
    """Five runs a side, four launches a run, three repetitions a launch: runs are the units,
    and the CI of NEW/BASE covers the true ratio within 2 points of 95%."""
    rng = np.random.default_rng(20240607)
    estimates = []
    for trial in range(TRIALS):
        base = _side(rng, 5, 4, 3, 0.0, SIGMA)
        new = _side(rng, 5, 4, 3, TRUE_LOG_RATIO, SIGMA)
        estimates.append(hierarchy.two_sample(base, new, resamples=RESAMPLES, seed=trial))
    assert {e.level for e in estimates} == {"run"}
    assert {e.between_run for e in estimates} == {"estimated"}
    coverage = _coverage(estimates, TRUE_LOG_RATIO)
    assert abs(coverage - 0.95) <= 0.02, coverage


def test_one_run_per_side_misses_between_run_noise_and_history_restores_coverage() -> None:
    """With one run per side the run level is invisible: the CI covers far less than 95% (what
    an A/A of two separate runs suffers); given the between-run variance (the run history's), it
    covers 95% again."""
    rng = np.random.default_rng(7)
    known = hierarchy.BetweenRun(SIGMA["run"] ** 2, math.inf, "synthetic history")
    blind, informed = [], []
    for trial in range(TRIALS):
        base = _side(rng, 1, 6, 1, 0.0, SIGMA)
        new = _side(rng, 1, 6, 1, TRUE_LOG_RATIO, SIGMA)
        blind.append(hierarchy.two_sample(base, new, resamples=RESAMPLES, seed=trial))
        informed.append(hierarchy.two_sample(base, new, known, resamples=RESAMPLES, seed=trial))
    assert blind[0].between_run == "not estimable" and "could not be estimated" in blind[0].notes[0]
    assert informed[0].between_run == "external"
    assert _coverage(blind, TRUE_LOG_RATIO) < 0.85
    assert abs(_coverage(informed, TRUE_LOG_RATIO) - 0.95) <= 0.02


def test_paired_ci_covers_95_percent_over_1000_trials() -> None:
    """An interleaved A/B: eight pairs whose halves share the launch-to-launch drift."""
    rng = np.random.default_rng(11)
    estimates = []
    for trial in range(TRIALS):
        drift = rng.normal(0, 0.08, 8)  # the host between pairs: cancels inside each pair
        base = np.exp(drift + rng.normal(0, 0.03, 8))
        new = np.exp(drift + TRUE_LOG_RATIO + rng.normal(0, 0.03, 8))
        sample = hierarchy.paired((0, i, float(base[i]), float(new[i])) for i in range(8))
        estimates.append(hierarchy.one_sample(sample, resamples=RESAMPLES, seed=trial))
    assert {e.level for e in estimates} == {"launch"}
    assert abs(_coverage(estimates, TRUE_LOG_RATIO) - 0.95) <= 0.02


def test_variance_components_recover_the_known_variances() -> None:
    rng = np.random.default_rng(3)
    found = {level: [] for level in hierarchy.LEVELS}
    for _ in range(300):
        components = hierarchy_figures.variance_components(_side(rng, 10, 6, 4, 0.0, SIGMA))
        for level, value in components.items():
            found[level].append(value)
    for level, sigma in SIGMA.items():
        assert np.mean(found[level]) == pytest.approx(sigma**2, rel=0.15), level


def test_a_level_that_is_not_repeated_has_no_variance_and_sets_the_units() -> None:
    rng = np.random.default_rng(5)
    one_process = _side(rng, 1, 1, 6, 0.0, SIGMA)  # a reused worker: repetitions only
    components = hierarchy_figures.variance_components(one_process)
    assert components["run"] is None and components["launch"] is None
    assert components["repetition"] is not None
    estimate = hierarchy.two_sample(one_process, _side(rng, 1, 1, 6, 0.0, SIGMA))
    assert estimate.level == "repetition" and estimate.units == (6, 6)
    assert any("launch noise could not be seen" in note for note in estimate.notes)
    launches = hierarchy.two_sample(_side(rng, 1, 5, 2, 0, SIGMA), _side(rng, 1, 5, 2, 0, SIGMA))
    assert launches.level == "launch" and launches.units == (5, 5)


def test_values_of_zero_have_no_ratio() -> None:
    with pytest.raises(hierarchy.NotPositive):
        hierarchy.nested([(0, 0, 1.0), (0, 1, 0.0)])


def test_rank_tests_give_the_exact_smallest_p() -> None:
    assert significance.rank_sum_test([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    assert significance.smallest_p((5, 5), paired=False) == pytest.approx(2 / 252)
    assert significance.signed_rank_test([0.1] * 8) == pytest.approx(2 / 256)
    assert significance.signed_rank_test([0.1, -0.1] * 4) == pytest.approx(1.0)
    # tied units take the permutation path: the same extremes, exactly
    assert significance.rank_sum_test([1, 1, 2, 3, 4], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    # one unit a side (a run compared with itself, one attempt a group): no test, no crash
    assert significance.rank_sum_test([5.0], [5.0]) is None
    assert significance.rank_sum_test([5.0], [5.0, 5.0]) == pytest.approx(1.0)
    assert significance.signed_rank_test([0.0]) is None


def test_rank_tests_hold_their_level_under_the_null() -> None:
    """Over 400 seeded null samples, p <= 0.05 about 5% of the time (never much more)."""
    rng = np.random.default_rng(13)
    two = [
        significance.rank_sum_test(rng.normal(size=8), rng.normal(size=8), s) for s in range(400)
    ]
    one = [significance.signed_rank_test(rng.normal(size=10), s) for s in range(400)]
    for pvalues in (two, one):
        rate = np.mean([p <= 0.05 for p in pvalues])
        assert 0.02 <= rate <= 0.08, rate


def test_benjamini_hochberg_adjusts_and_skips_missing() -> None:
    assert significance.adjusted([0.01, None, 0.04, 0.5]) == pytest.approx([0.03, None, 0.06, 0.5])
    assert significance.adjusted([None, None]) == [None, None]
