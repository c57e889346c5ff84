"""Order statistics in plain Python: the median and its distribution-free confidence interval.

``[x(k), x(n-k+1)]`` (1-based ranks of the sorted values) covers the true median with probability
``1 - 2·P(B <= k-1)``, ``B ~ Binomial(n, 1/2)``, for any continuous distribution of i.i.d. values
(the interval behind the sign test; conservative for tied values). ``k`` is the largest rank whose
coverage is at least the level asked (95%); that exact coverage is returned with the interval.
Fewer than 6 values reach no 95% interval (5 give at most 93.75%): None, never made up.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

LEVEL = 0.95


def median(values: Sequence[float]) -> float | None:
    """The median (the mean of the middle two for an even count); None for no values."""
    return middle(values) if len(values) else None


def middle(values: Sequence[float]) -> float:
    """The median of values that are there (ValueError for none), as ``statistics.median``."""
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        raise ValueError("no median of no values")
    half = n // 2
    return float(ordered[half]) if n % 2 else (ordered[half - 1] + ordered[half]) / 2


def _log_binomial_half(n: int, i: int) -> float:
    """log P(B = i) for B ~ Binomial(n, 1/2)."""
    return math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2)


def binomial_half_cdf(n: int, k: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2) (0 for k < 0)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return min(1.0, math.fsum(math.exp(_log_binomial_half(n, i)) for i in range(k + 1)))


@functools.lru_cache(maxsize=256)
def order_statistic_rank(n: int, level: float = LEVEL) -> tuple[int, float] | None:
    """(k, coverage): the largest 1-based rank k with ``[x(k), x(n-k+1)]`` covering the median
    with probability >= ``level``, and that probability; None when no k reaches it."""
    tail = (1 - level) / 2
    below = 0.0  # P(B <= k - 1) for the k being tried
    best = None
    for k in range(1, n // 2 + 1):
        below += math.exp(_log_binomial_half(n, k - 1))
        if below > tail + 1e-12:
            break
        best = (k, 1 - 2 * min(below, 0.5))
    return best


def median_ci(values: Sequence[float], level: float = LEVEL) -> tuple[list[float], float] | None:
    """The order-statistic interval of the median and its exact coverage, or None (too few)."""
    found = order_statistic_rank(len(values), level)
    if found is None:
        return None
    k, coverage = found
    ordered = sorted(values)
    return [float(ordered[k - 1]), float(ordered[len(ordered) - k])], coverage
