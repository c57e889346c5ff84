"""Exact null distributions of the two rank statistics ``compare`` uses, mid-ranks, and the
Benjamini–Hochberg adjustment: numpy and the standard library only.

Why not ``scipy.stats``: importing it takes ~2 s on these 2-core machines (scipy 1.17; its
distribution classes build their docstrings at import), and every ``metewand compare`` paid that
for a handful of p-values over at most a few dozen units, ~90% of the command's time. The
distributions are the textbook ones, counted exactly with integers:

- rank sum (Mann–Whitney U of sizes m, n, no ties): the number of the C(m+n, m) splits with
  U = u is the coefficient of q^u in the Gaussian binomial [m+n choose m]_q, built factor by
  factor (each step is again a Gaussian binomial, so every coefficient stays an integer);
- signed rank (n pairs, no ties or zeros): the number of the 2^n sign patterns with W+ = w is the
  coefficient of q^w in the product of (1 + q^i), i = 1..n.

Two-sided p-values follow scipy's ``method="exact"`` conventions (twice the upper tail at the
larger of the two statistics, at most 1); ``tests/test_compare_rank_null.py`` holds every function
here to scipy's answer on random data.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np


@cache
def _rank_sum_counts(m: int, n: int) -> tuple[int, ...]:
    """Splits of m + n units with each value of U (index u), for m <= n."""
    counts = [1]
    for i in range(1, m + 1):
        grow = n + i  # times (1 - q^(n+i))
        counts += [0] * grow
        for k in range(len(counts) - 1, grow - 1, -1):
            counts[k] -= counts[k - grow]
        for k in range(i, len(counts)):  # divided by (1 - q^i)
            counts[k] += counts[k - i]
        del counts[i * n + 1 :]  # [n+i choose i]_q has degree i*n
    return tuple(counts)


@cache
def signed_rank_counts(n: int) -> tuple[int, ...]:
    """Sign patterns of n ranked pairs with each value of W+ (index w)."""
    counts = [1]
    for i in range(1, n + 1):  # times (1 + q^i)
        counts = counts + [0] * i
        for k in range(len(counts) - 1, i - 1, -1):
            counts[k] += counts[k - i]
    return tuple(counts)


def _upper_tail(counts: Sequence[int], at: int) -> float:
    """P(statistic >= at) under ``counts``."""
    return sum(counts[max(at, 0) :]) / sum(counts)


def rank_sum_p(new: np.ndarray, base: np.ndarray) -> float:
    """Two-sided exact p of the rank-sum test of two samples without ties."""
    m, n = new.size, base.size
    ranks = average_ranks(np.concatenate([new, base]))
    u_new = float(ranks[:m].sum()) - m * (m + 1) / 2
    larger = round(max(u_new, m * n - u_new))
    return min(1.0, 2 * _upper_tail(_rank_sum_counts(min(m, n), max(m, n)), larger))


def signed_rank_p(d: np.ndarray) -> float:
    """Two-sided exact p of the signed-rank test of differences without ties or zeros."""
    ranks = average_ranks(np.abs(d))
    w_plus = round(float(ranks[d > 0].sum()))
    total = d.size * (d.size + 1) // 2
    larger = max(w_plus, total - w_plus)
    return min(1.0, 2 * _upper_tail(signed_rank_counts(d.size), larger))


def average_ranks(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties sharing the mean of the ranks they span (mid-ranks)."""
    a = np.asarray(values, float)
    order = np.argsort(a, kind="mergesort")
    ordered = a[order]
    starts = np.r_[True, ordered[1:] != ordered[:-1]]
    group = np.cumsum(starts) - 1  # tie group of each sorted position
    bounds = np.r_[np.flatnonzero(starts), a.size]  # first position of each group, then n
    mid = (bounds[:-1] + bounds[1:] + 1) / 2  # the mean of ranks start+1 .. end
    ranks = np.empty(a.size)
    ranks[order] = mid[group]
    return ranks


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (q), in the order given."""
    p = np.asarray(pvalues, float)
    if not p.size:
        return []
    order = np.argsort(p)
    scaled = p[order] * p.size / np.arange(1, p.size + 1)
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(p.size)
    out[order] = np.minimum(adjusted, 1.0)
    return [float(q) for q in out]
