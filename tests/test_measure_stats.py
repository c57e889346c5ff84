"""``cli.measure_stats`` by its error rates on synthetic data with known medians (seeded): the
order-statistic interval covers the median as often as its stated level says, the paired
ratio's interval covers the true ratio under round-level drift, the unpaired one at least 95%,
and the sign test raises at most its level of false alarms."""

from __future__ import annotations

import math
import random

import pytest

from metewand.cli import measure_stats as ms
from metewand.measure import order_stats

TRIALS = 2000
SE = math.sqrt(0.95 * 0.05 / TRIALS)  # ~0.005: three of them is the tolerance below


def _lognormal(rng: random.Random, n: int, sigma: float = 0.5) -> list[float]:
    return [math.exp(rng.gauss(0, sigma)) for _ in range(n)]  # median exactly 1


def test_known_ranks_and_levels() -> None:
    assert order_stats.order_statistic_rank(5) is None  # 93.75% at best: no 95% interval
    assert order_stats.order_statistic_rank(6) == (1, 0.96875)
    k, level = order_stats.order_statistic_rank(10)  # type: ignore[misc]
    assert k == 2 and level == pytest.approx(1 - 2 * 11 / 1024)
    k, level = order_stats.order_statistic_rank(100)  # type: ignore[misc]
    assert k == 40 and level == pytest.approx(0.9648, abs=1e-4)
    assert order_stats.binomial_half_cdf(10, 1) == pytest.approx(11 / 1024)
    assert ms.describe([1.0, 2.0, 3.0])["median_ci95"] is None


@pytest.mark.parametrize("n", [6, 10, 25, 60])
def test_the_median_interval_covers_as_often_as_its_level_says(n: int) -> None:
    rng = random.Random(1000 + n)
    level = order_stats.order_statistic_rank(n)[1]  # type: ignore[index]
    covered = 0
    for _ in range(TRIALS):
        ci = order_stats.median_ci(_lognormal(rng, n))
        assert ci is not None
        covered += ci[0][0] <= 1.0 <= ci[0][1]
    assert abs(covered / TRIALS - level) < 3 * SE, (covered / TRIALS, level)
    assert level >= 0.95


def test_the_paired_ratio_covers_the_true_ratio_under_drift_between_rounds() -> None:
    """Each round's host drift (x0.5 .. x2) multiplies both commands; NEW is 1.10x BASE."""
    rng = random.Random(7)
    covered = 0
    for _ in range(TRIALS):
        pairs = []
        for _ in range(12):
            drift = math.exp(rng.uniform(-0.7, 0.7))
            pairs.append(
                (1.10 * drift * _lognormal(rng, 1, 0.05)[0], drift * _lognormal(rng, 1, 0.05)[0])
            )
        found = ms.paired_ratio(pairs)
        covered += found["ratio_ci95"][0] <= 1.10 <= found["ratio_ci95"][1]
        assert found["units"] == 12 and found["method"] == "paired"
    level = order_stats.order_statistic_rank(12)[1]  # type: ignore[index]
    assert abs(covered / TRIALS - level) < 3 * SE, (covered / TRIALS, level)


def test_the_unpaired_ratio_covers_at_least_its_level() -> None:
    rng = random.Random(11)
    covered = 0
    for _ in range(TRIALS):
        base, new = _lognormal(rng, 15), [1.2 * v for v in _lognormal(rng, 15)]
        found = ms.unpaired_ratio(new, base)
        assert found["level"] >= 0.95
        covered += found["ratio_ci95"][0] <= 1.2 <= found["ratio_ci95"][1]
    assert covered / TRIALS >= 0.95 - 3 * SE, covered / TRIALS


def test_the_sign_test_raises_at_most_its_level_of_false_alarms() -> None:
    rng = random.Random(3)
    alarms = 0
    for _ in range(TRIALS):
        pairs = list(zip(_lognormal(rng, 20), _lognormal(rng, 20), strict=True))
        p = ms.paired_ratio(pairs)["p_value"]
        alarms += p is not None and p < 0.05
    assert alarms / TRIALS <= 0.05 + 3 * SE, alarms / TRIALS


def test_a_planted_change_is_seen_by_the_paired_interval() -> None:
    """Power: NEW 5% slower with 2% noise per run and heavy drift between rounds, 15 rounds."""
    rng = random.Random(5)
    seen = 0
    for _ in range(200):
        pairs = []
        for _ in range(15):
            drift = math.exp(rng.uniform(-0.7, 0.7))
            pairs.append(
                (1.05 * drift * _lognormal(rng, 1, 0.02)[0], drift * _lognormal(rng, 1, 0.02)[0])
            )
        seen += ms.verdict(ms.paired_ratio(pairs)) == "slower"
    assert seen / 200 >= 0.9, seen / 200


def test_summary_statistics_and_warnings() -> None:
    block = ms.describe([3.0, 1.0, 2.0, 4.0])
    assert (block["mean"], block["median"], block["min"], block["max"]) == (2.5, 2.5, 1.0, 4.0)
    assert block["stddev"] == pytest.approx(math.sqrt(5 / 3))
    assert ms.describe([])["n"] == 0
    assert ms.outliers([10.0] * 9 + [100.0]) == 0  # MAD 0: no z-score
    assert ms.outliers([10.0, 10.5, 11.0, 9.5, 10.2, 9.9, 100.0]) == 1
