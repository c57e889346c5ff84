"""Rank tests over independent units, and the false-discovery control over a comparison's groups.

- Two samples (separate runs): the Wilcoxon–Mann–Whitney rank-sum test, exact (tied data: a
  permutation test of the mid-ranks). Ranks, because one unit hit by a load spike must not
  decide a verdict.
- Paired samples (interleaved A/B; engines of one round): the Wilcoxon signed-rank test of the
  pairs' log ratios, exact (ties or zeros: a sign-flip permutation test).
- Over the groups of one comparison: Benjamini–Hochberg. Under unchanged code every null
  hypothesis is true, and then the false-discovery rate *is* the chance of any false alarm, so an
  A/A comparison fails the gate at most ``ALPHA`` of the time, as with Holm; when something did
  change, it usually moves several groups (one implementation over all its cases), and BH keeps
  the power Holm gives away: Holm's first step needs p <= 0.05/15 over 15 groups, which no rank
  test over 6 pairs can reach (its smallest p is 1/32). docs/DESIGN.md says more.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np

ALPHA = 0.05
EXACT_LIMIT = 2_000  # tied data: splits or sign patterns enumerated exactly up to this many
MONTE_CARLO = 9_999


def _scipy_stats():  # imported when a test runs: scipy.stats takes ~0.3 s to import
    from scipy import stats

    return stats


def rank_sum_test(
    base: Sequence[float] | np.ndarray, new: Sequence[float] | np.ndarray, seed: int = 0
) -> float | None:
    """Two-sided p of the rank-sum test (None when a side has no unit). Without ties, scipy's
    exact Mann-Whitney distribution; with ties, a permutation test of the mid-ranks (every split
    when there are few, else seeded random ones)."""
    x, y = np.asarray(new, float), np.asarray(base, float)
    if not x.size or not y.size:
        return None
    stats = _scipy_stats()
    pooled = np.concatenate([x, y])
    if np.unique(pooled).size == pooled.size:
        return float(stats.mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue)
    ranks = stats.rankdata(pooled)

    def statistic(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
        return np.mean(a, axis=axis) - np.mean(b, axis=axis)

    result = stats.permutation_test(
        (ranks[: x.size], ranks[x.size :]), statistic, permutation_type="independent",
        vectorized=True, n_resamples=_resamples(comb(pooled.size, x.size)),
        alternative="two-sided", random_state=np.random.default_rng(seed),
    )  # fmt: skip
    return float(result.pvalue)


def signed_rank_test(log_ratios: Sequence[float] | np.ndarray, seed: int = 0) -> float | None:
    """Two-sided p of the signed-rank test of paired log ratios against 0: scipy's exact
    Wilcoxon distribution without ties or zeros, else a sign-flip permutation test."""
    d = np.asarray(log_ratios, float)
    if not d.size:
        return None
    stats = _scipy_stats()
    if np.all(d != 0) and np.unique(np.abs(d)).size == d.size:
        return float(stats.wilcoxon(d, alternative="two-sided", method="exact").pvalue)
    signed = np.sign(d) * stats.rankdata(np.abs(d))
    signed[d == 0] = 0.0  # a tie between the two sides carries no sign

    def statistic(a: np.ndarray, axis: int) -> np.ndarray:
        return np.sum(a, axis=axis)

    result = stats.permutation_test(
        (signed,), statistic, permutation_type="samples", vectorized=True,
        n_resamples=_resamples(2**d.size), alternative="two-sided",
        random_state=np.random.default_rng(seed),
    )  # fmt: skip
    return float(result.pvalue)


def _resamples(arrangements: int) -> int:
    """Every arrangement when there are few (exact), else a seeded Monte Carlo sample."""
    return arrangements if arrangements <= EXACT_LIMIT else MONTE_CARLO


def smallest_p(units: Sequence[int], paired: bool) -> float:
    """The smallest two-sided p the test can give with these unit counts (exact enumeration)."""
    if paired:
        return 2.0 / 2 ** units[0]
    return 2.0 / comb(units[0] + units[1], units[0])


def adjusted(pvalues: Sequence[float | None]) -> list[float | None]:
    """Benjamini–Hochberg adjusted p-values (q) over the groups that have a p; None stays None."""
    present = [(i, p) for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    if not present:
        return out
    q = _scipy_stats().false_discovery_control([p for _, p in present], method="bh")
    for (i, _), value in zip(present, q, strict=True):
        out[i] = float(value)
    return out
