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

import math
from collections.abc import Sequence
from itertools import combinations
from math import comb
from statistics import NormalDist

import numpy as np

from metewand.compare import rank_null

ALPHA = 0.05
EXACT_LIMIT = 2_000  # tied data: splits or sign patterns enumerated exactly up to this many
MONTE_CARLO = 9_999
# the exact null tables (rank_null) grow with m*n (rank sum) or n^2/2 (signed rank) entries, each
# built in as many passes as the smaller sample has units; beyond this many entries (~0.1 s) the
# seeded permutation test of the ranks stands in
EXACT_TABLE_LIMIT = 20_000


def rank_sum_test(
    base: Sequence[float] | np.ndarray, new: Sequence[float] | np.ndarray, seed: int = 0
) -> float | None:
    """Two-sided p of the rank-sum test (None with one unit a side, or none). Without ties,
    the exact Mann-Whitney distribution (``rank_null``); with ties, a permutation test of the
    mid-ranks."""
    x, y = np.asarray(new, float), np.asarray(base, float)
    if not x.size or not y.size or (x.size < 2 and y.size < 2):
        return None
    pooled = np.concatenate([x, y])
    if np.unique(pooled).size == pooled.size and x.size * y.size <= EXACT_TABLE_LIMIT:
        return rank_null.rank_sum_p(x, y)
    ranks = rank_null.average_ranks(pooled)
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
    the exact Wilcoxon distribution (``rank_null``) without ties or zeros, else a sign-flip
    permutation test of the signed mid-ranks."""
    d = np.asarray(log_ratios, float)
    if d.size < 2:  # one pair: its sign alone says nothing
        return None
    no_ties = np.all(d != 0) and np.unique(np.abs(d)).size == d.size
    if no_ties and d.size * (d.size + 1) // 2 <= EXACT_TABLE_LIMIT:
        return rank_null.signed_rank_p(d)
    # a tie of the sides (a zero) carries no sign
    magnitude = np.where(d == 0, 0.0, rank_null.average_ranks(np.abs(d)))
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
    q = rank_null.benjamini_hochberg([p for _, p in present])
    for (i, _), value in zip(present, q, strict=True):
        out[i] = float(value)
    return out


WALSH_MIN_PAIRS = 6  # with 5 pairs even [min, max] of the Walsh averages covers only 93.75%


def walsh_interval(
    log_ratios: Sequence[float] | np.ndarray, level: float = 0.95
) -> tuple[float, float, float] | None:
    """The Hodges–Lehmann estimate of paired log ratios (the median of their Walsh averages,
    (d_i + d_j) / 2 for i <= j) and the distribution-free CI that inverts the signed-rank test:
    the Walsh averages left after cutting C from each end, C the largest signed-rank statistic
    with P(W+ <= C) <= (1 - level) / 2 (exact up to the tables' size, then normal). Exact under a
    symmetric spread of the pairs, which exchangeable sides give; a wild pair moves it by one
    Walsh rank, not by its size. None below ``WALSH_MIN_PAIRS`` pairs."""
    d = np.asarray(log_ratios, float)
    n = d.size
    if n < WALSH_MIN_PAIRS:
        return None
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2)
    cut = _walsh_cut(n, (1 - level) / 2)
    return float(np.median(walsh)), float(walsh[cut]), float(walsh[walsh.size - 1 - cut])


def _walsh_cut(n: int, tail: float) -> int:
    """C: the largest w with P(W+ <= w) <= tail (W+ the signed-rank statistic of n pairs)."""
    if n * (n + 1) // 2 <= EXACT_TABLE_LIMIT:
        counts = np.asarray(rank_null.signed_rank_counts(n), float)
        cdf = np.cumsum(counts) / counts.sum()
        return max(int(np.count_nonzero(cdf <= tail)) - 1, 0)
    mean, sd = n * (n + 1) / 4, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return max(int(math.floor(mean + NormalDist().inv_cdf(tail) * sd)), 0)
