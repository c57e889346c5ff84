"""Statistics on synthetic data with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from metewand.compare import stats


def test_median_and_p95_known_values() -> None:
    values = list(range(1, 101))
    assert stats.median(values) == 50.5
    assert stats.p95(values) == pytest.approx(95.05)  # type-7: 1 + 0.95 * 99
    assert stats.median([]) is None and stats.p95([]) is None
    assert stats.p95([7.0]) == 7.0


def test_constant_tasks_give_a_degenerate_interval() -> None:
    values = [4.0] * 15
    clusters = [f"t{i // 5}" for i in range(15)]
    assert stats.cluster_bootstrap_median_ci(values, clusters, 200, 1) == (4.0, 4.0)
    assert stats.cluster_bootstrap_median_ci([9.0], ["t"], 200, 1) == (9.0, 9.0)


def test_cluster_bootstrap_is_wider_than_iid_for_correlated_attempts() -> None:
    # 12 tasks of very different size, 5 near-identical attempts each: attempts are not
    # independent, so resampling attempts would pretend to know the median far too well
    rng = np.random.default_rng(3)
    values, clusters = [], []
    for task in range(12):
        level = 10.0 * (task + 1)
        for _ in range(5):
            values.append(level + rng.normal(0, 0.1))
            clusters.append(f"task{task}")
    by_task = stats.cluster_bootstrap_median_ci(values, clusters, 1000, 7)
    by_attempt = stats.cluster_bootstrap_median_ci(values, list(range(len(values))), 1000, 7)
    assert by_task is not None and by_attempt is not None
    assert by_task[0] <= stats.median(values) <= by_task[1]  # type: ignore[operator]
    assert (by_task[1] - by_task[0]) > 1.3 * (by_attempt[1] - by_attempt[0])


def test_bootstrap_is_deterministic_per_seed_and_order_independent() -> None:
    values = [1.0, 5.0, 2.0, 8.0, 3.0, 9.0, 4.0, 7.0]
    clusters = ["a", "a", "b", "b", "c", "c", "d", "d"]
    first = stats.cluster_bootstrap_median_ci(values, clusters, 500, 11)
    assert first == stats.cluster_bootstrap_median_ci(values, clusters, 500, 11)
    shuffled = list(zip(values, clusters, strict=True))[::-1]
    again = stats.cluster_bootstrap_median_ci([v for v, _ in shuffled], [c for _, c in shuffled])
    same_seed = stats.cluster_bootstrap_median_ci(values, clusters)
    assert again == same_seed


def test_unequal_cluster_sizes_match_a_direct_computation() -> None:
    groups = [np.array([1.0, 2.0]), np.array([10.0]), np.array([3.0, 4.0, 5.0])]
    chosen = np.array([[0, 0, 1], [2, 1, 1], [1, 2, 0]])
    got = stats._resampled_medians(groups, chosen)
    expected = [np.median(np.concatenate([groups[c] for c in row])) for row in chosen]
    assert list(got) == expected
    equal = [np.array([1.0, 9.0]), np.array([2.0, 3.0]), np.array([7.0, 8.0])]
    got_equal = stats._resampled_medians(equal, chosen)
    assert list(got_equal) == [np.median(np.concatenate([equal[c] for c in r])) for r in chosen]


def test_describe_records_counts() -> None:
    out = stats.describe([1.0, 2.0, 3.0, 4.0], ["a", "a", "b", "b"], resamples=100, seed=5)
    assert out["n"] == 4 and out["clusters"] == 2 and out["median"] == 2.5
    assert out["median_ci95"][0] <= 2.5 <= out["median_ci95"][1]
    assert stats.bootstrap_record(100, 5)["seed"] == 5


def test_paired_ratio_exact_multiple() -> None:
    reference = {(f"t{t}", a): float(10 * (t + 1) + a) for t in range(6) for a in range(3)}
    engine = {key: 2.0 * value for key, value in reference.items()}
    out = stats.paired_ratio(engine, reference, resamples=300, seed=2)
    assert out["median_ratio"] == 2.0
    assert out["median_ratio_ci95"] == [2.0, 2.0]
    assert out["tasks"] == 6 and out["pairs"] == 18 and out["undefined_tasks"] == 0


def test_paired_ratio_uses_pairs_only_and_skips_zero_reference() -> None:
    reference = {("a", 0): 10.0, ("a", 1): 10.0, ("b", 0): 0.0, ("c", 0): 4.0}
    engine = {("a", 0): 5.0, ("a", 1): 5.0, ("b", 0): 3.0, ("c", 1): 99.0}  # c has no pair
    ratios, undefined = stats.per_task_ratios(engine, reference)
    assert ratios == {"a": 0.5} and undefined == ["b"]
    out = stats.paired_ratio(engine, reference, resamples=50)
    assert out["median_ratio"] == 0.5 and out["undefined_tasks"] == 1 and out["pairs"] == 3


def test_paired_ratio_weighs_tasks_equally() -> None:
    # one huge task where the engine is 10x slower, three small tasks where it is 2x faster:
    # the median per-task ratio says "usually 2x faster", a pooled-sum ratio would say slower
    reference = {("big", 0): 10_000.0, ("s1", 0): 10.0, ("s2", 0): 12.0, ("s3", 0): 14.0}
    engine = {("big", 0): 100_000.0, ("s1", 0): 5.0, ("s2", 0): 6.0, ("s3", 0): 7.0}
    assert stats.paired_ratio(engine, reference, resamples=50)["median_ratio"] == 0.5


def test_leak_slope_exact_line_and_degenerate() -> None:
    xs = list(range(10))
    out = stats.leak_slope(xs, [3.0 * x + 5.0 for x in xs])
    assert out["slope_per_attempt"] == pytest.approx(3.0)
    assert out["intercept"] == pytest.approx(5.0)
    assert out["stderr"] == pytest.approx(0.0, abs=1e-9)
    flat = stats.leak_slope([1, 2], [5.0, 5.0])
    assert flat["slope_per_attempt"] is None and flat["reason"]
    with pytest.raises(ValueError):
        stats.leak_slope([1, 2, 3], [1.0])


def test_leak_slope_noisy_line_matches_the_closed_form() -> None:
    """x = 1..4, y = 1,3,2,5: slope 1.1, intercept 0, SSR 2.7, stderr sqrt(2.7 / 2 / 5)."""
    out = stats.leak_slope([1, 2, 3, 4], [1.0, 3.0, 2.0, 5.0])
    assert out["slope_per_attempt"] == pytest.approx(1.1)
    assert out["intercept"] == pytest.approx(0.0, abs=1e-12)
    assert out["stderr"] == pytest.approx((2.7 / 2 / 5) ** 0.5)


def test_weighted_median_bootstrap_matches_the_plain_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Equal and unequal cluster sizes, many chunks and grid cells: exactly the gathered medians."""
    from metewand.compare import stats as module
    from metewand.compare.stats import _looped_resampled_medians, _resampled_medians

    monkeypatch.setattr(module, "BOOTSTRAP_CHUNK_VALUES", 500)  # many chunks, ragged last one
    monkeypatch.setattr(module, "BOOTSTRAP_GRID_CELLS", 5)
    rng = np.random.default_rng(5)
    for trial in range(25):
        n_groups = int(rng.integers(1, 30))
        size = int(rng.integers(1, 8))
        ragged = trial % 2 == 0
        groups = [
            rng.normal(size=int(rng.integers(1, 8)) if ragged else size) for _ in range(n_groups)
        ]
        if trial % 3 == 0:  # ties
            groups = [np.round(g, 1) + 0.0 for g in groups]
        chosen = rng.integers(0, n_groups, size=(int(rng.integers(1, 200)), n_groups))
        fast = _resampled_medians(groups, chosen)
        assert fast.tobytes() == _looped_resampled_medians(groups, chosen).tobytes()


def test_published_interval_is_unchanged_by_the_weighted_median() -> None:
    """Same seed, same draws: the interval equals the percentile of explicitly gathered medians."""
    rng = np.random.default_rng(9)
    values = list(np.exp(rng.normal(size=300) * 2))
    clusters = [f"t{i // 5}" for i in range(300)]
    groups = stats._group(values, clusters)
    chosen = stats._draw(len(groups), 400, 13)
    gathered = np.median(np.stack(groups)[chosen].reshape(400, -1), axis=1)
    low, high = np.percentile(gathered, [2.5, 97.5])
    assert stats.cluster_bootstrap_median_ci(values, clusters, 400, 13) == (low, high)
