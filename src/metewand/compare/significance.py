"""Rank tests over independent units, and the false-discovery control over a comparison's groups.

- Two samples (separate runs): the Wilcoxon–Mann–Whitney rank-sum test as an exact permutation
  test of the units' ranks (every split enumerated when there are at most ``EXACT_LIMIT`` of
  them, else ``MONTE_CARLO`` seeded random splits). Ranks, because one unit hit by a load spike
  must not decide a verdict.
- Paired samples (interleaved A/B; engines of one round): the Wilcoxon signed-rank test as a
  sign-flip permutation test of the pairs' log ratios.
- Over the groups of one comparison: Benjamini–Hochberg. Under unchanged code every null
  hypothesis is true, and then the false-discovery rate *is* the chance of any false alarm, so an
  A/A comparison fails the gate at most ``ALPHA`` of the time, as with Holm; when something did
  change, it usually moves several groups (one implementation over all its cases), and BH keeps
  the power Holm gives away: Holm's first step needs p <= 0.05/15 over 15 groups, which no rank
  test over 6 pairs can reach (its smallest p is 1/32). docs/DESIGN.md says more.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ALPHA = 0.05
EXACT_LIMIT = 20_000  # splits or sign patterns enumerated exactly up to this many
MONTE_CARLO = 9_999


def _scipy_stats():  # imported when a test runs: scipy.stats takes ~0.3 s to import
    from scipy import stats

    return stats


def rank_sum_test(
    base: Sequence[float] | np.ndarray, new: Sequence[float] | np.ndarray, seed: int = 0
) -> float | None:
    """Two-sided p of the rank-sum test (None when a side has no unit)."""
    if not len(base) or not len(new):
        return None
    stats = _scipy_stats()
    ranks = stats.rankdata(np.concatenate([np.asarray(base, float), np.asarray(new, float)]))
    x, y = ranks[len(base) :], ranks[: len(base)]

    def statistic(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
        return np.mean(a, axis=axis) - np.mean(b, axis=axis)

    result = stats.permutation_test(
        (x, y), statistic, permutation_type="independent", vectorized=True,
        n_resamples=_resamples(len(x) + len(y), len(x)), alternative="two-sided",
        random_state=np.random.default_rng(seed),
    )  # fmt: skip
    return float(result.pvalue)


def signed_rank_test(log_ratios: Sequence[float] | np.ndarray, seed: int = 0) -> float | None:
    """Two-sided p of the signed-rank test of paired log ratios against 0."""
    d = np.asarray(log_ratios, float)
    if not d.size:
        return None
    stats = _scipy_stats()
    signed = np.sign(d) * stats.rankdata(np.abs(d))
    signed[d == 0] = 0.0  # a tie between the two sides carries no sign

    def statistic(a: np.ndarray, axis: int) -> np.ndarray:
        return np.sum(a, axis=axis)

    result = stats.permutation_test(
        (signed,), statistic, permutation_type="samples", vectorized=True,
        n_resamples=MONTE_CARLO if 2 ** d.size > EXACT_LIMIT else EXACT_LIMIT,
        alternative="two-sided", random_state=np.random.default_rng(seed),
    )  # fmt: skip
    return float(result.pvalue)


def _resamples(total: int, chosen: int) -> int:
    """Enough to enumerate every split when there are few, else a Monte Carlo sample."""
    from math import comb

    return EXACT_LIMIT if comb(total, chosen) <= EXACT_LIMIT else MONTE_CARLO


def smallest_p(units: Sequence[int], paired: bool) -> float:
    """The smallest two-sided p the test can give with these unit counts (exact enumeration)."""
    from math import comb

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
