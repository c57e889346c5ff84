"""Each group's between-run spread moderated by the other groups' (empirical Bayes, as limma's
moderated variances: Smyth, "Linear models and empirical Bayes methods for assessing
differential expression in microarray experiments", 2004, section 6.2).

A spread from 3 earlier runs has 2 degrees of freedom: its t quantile is 4.3, and a change must
be huge to clear it. The groups of one metric have all been through the same runs, so their
spreads say something about each other's. The prior is fitted to the groups' log variances: its
degrees of freedom ``d0`` say how alike the groups' true spreads are (large when their sample
variances scatter no more than sampling alone would make them; small when they truly differ),
and each group's moderated variance is ``(d0 s0^2 + d s^2) / (d0 + d)`` with ``d0 + d`` degrees
of freedom. A group with a spread far from the others keeps much of its own when ``d0`` is
small. With fewer than ``MIN_GROUPS`` groups nothing is moderated.

The probe's variance and the covariance (for a speed-adjusted metric) are moderated with the same
weights, each towards the groups' df-weighted mean of its own, so that the adjusted spread
``v - 2 b cov + b^2 pv`` is the same mix of the group's and the prior's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import digamma, polygamma

MIN_GROUPS = 4
MAX_PRIOR_DF = 1e6  # "the groups' spreads scatter no more than sampling makes them"


@dataclass(frozen=True)
class Prior:
    variance: float  # s0^2
    df: float  # d0


def prior(variances: Sequence[float], dfs: Sequence[float]) -> Prior | None:
    """The prior fitted to groups' sample variances (each with its df), or None when there are
    too few groups or a variance is not positive."""
    if len(variances) < MIN_GROUPS or min(variances) <= 0:
        return None
    d = np.asarray(dfs, dtype=float)
    e = np.log(np.asarray(variances, dtype=float)) - digamma(d / 2) + np.log(d / 2)
    mean = float(e.mean())
    excess = float(e.var(ddof=1) - np.mean(polygamma(1, d / 2)))
    if excess <= 0:
        return Prior(math.exp(mean), MAX_PRIOR_DF)
    d0 = min(2 * _trigamma_inverse(excess), MAX_PRIOR_DF)
    return Prior(math.exp(mean + digamma(d0 / 2) - math.log(d0 / 2)), d0)


def moderated(value: float, df: float, prior_value: float, fitted: Prior) -> tuple[float, float]:
    """``(moderated value, its df)``: the group's ``value`` mixed with ``prior_value``."""
    total = fitted.df + df
    return (fitted.df * prior_value + df * value) / total, total


def _trigamma_inverse(y: float) -> float:
    """x with trigamma(x) = y (Newton's method on 1/x, Smyth's algorithm)."""
    if y > 1e7:
        return 1 / math.sqrt(y)
    if y < 1e-6:
        return 1 / y
    x = 0.5 + 1 / y
    for _ in range(50):
        tri = float(polygamma(1, x))
        step = tri * (1 - tri / y) / float(polygamma(2, x))
        x += step
        if -step / x < 1e-8:
            break
    return x
