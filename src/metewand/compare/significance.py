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
from itertools import combinations
from math import comb

import numpy as np

ALPHA = 0.05
EXACT_LIMIT = 2_000  # tied data: splits or sign patterns enumerated exactly up to this many
MONTE_CARLO = 9_999


def _scipy_stats():  # type: ignore[no-untyped-def]  # scipy.stats takes ~0.3 s to import
    from scipy import stats

    return stats


def rank_sum_test(
    base: Sequence[float] | np.ndarray, new: Sequence[float] | np.ndarray, seed: int = 0
) -> float | None:
    """Two-sided p of the rank-sum test (None with one unit a side, or none). Without ties,
    scipy's exact Mann-Whitney distribution; with ties, a permutation test of the mid-ranks."""
    x, y = np.asarray(new, float), np.asarray(base, float)
    if not x.size or not y.size or (x.size < 2 and y.size < 2):
        return None
    stats = _scipy_stats()
    pooled = np.concatenate([x, y])
    if np.unique(pooled).size == pooled.size:
        return float(stats.mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue)
    ranks = stats.rankdata(pooled)
    sampled = comb(pooled.size, x.size) > EXACT_LIMIT
    if not sampled:  # every split of the units, once
        chosen = np.array(list(combinations(range(pooled.size), x.size)))
    else:  # seeded random splits
        rng = np.random.default_rng(seed)
        chosen = np.argsort(rng.random((MONTE_CARLO, pooled.size)), axis=1)[:, : x.size]
    sums = ranks[chosen].sum(axis=1)
    centre = x.size * (pooled.size + 1) / 2
    return _p_value(np.abs(sums - centre), abs(ranks[: x.size].sum() - centre), sampled)


def signed_rank_test(log_ratios: Sequence[float] | np.ndarray, seed: int = 0) -> float | None:
    """Two-sided p of the signed-rank test of paired log ratios against 0 (None with one pair):
    scipy's exact Wilcoxon distribution without ties or zeros, else a sign-flip permutation
    test of the signed mid-ranks."""
    d = np.asarray(log_ratios, float)
    if d.size < 2:  # one pair: its sign alone says nothing
        return None
    stats = _scipy_stats()
    if np.all(d != 0) and np.unique(np.abs(d)).size == d.size:
        return float(stats.wilcoxon(d, alternative="two-sided", method="exact").pvalue)
    magnitude = np.where(d == 0, 0.0, stats.rankdata(np.abs(d)))  # a tie of the sides: no sign
    sampled = 2**d.size > EXACT_LIMIT
    if not sampled:  # every sign pattern, once
        signs = 1 - 2 * ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1)
    else:
        signs = np.random.default_rng(seed).choice([-1, 1], size=(MONTE_CARLO, d.size))
    sums = np.abs(signs @ magnitude)
    return _p_value(sums, abs(float(np.sign(d) @ magnitude)), sampled)


def _p_value(null: np.ndarray, observed: float, sampled: bool) -> float:
    """The share of arrangements at least as extreme as the data's; a Monte Carlo sample
    counts the data's own arrangement once more, so its p is never 0."""
    at_least = int(np.count_nonzero(null >= observed - 1e-9))
    return (at_least + 1) / (null.size + 1) if sampled else at_least / null.size


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
