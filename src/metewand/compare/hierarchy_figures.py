"""The JSON-ready figures of ``compare.hierarchy``: where a side's noise lives (the variance of
each level) and what an estimate of NEW/BASE says, as ``compare`` records and shows them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from metewand.compare.hierarchy import (
    LAUNCH,
    LEVELS,
    REPETITION,
    RUN,
    Estimate,
    Nested,
    _launch_means,
    _run_means,
    _weight,
)


def variance_components(side: Nested) -> dict[str, float | None]:
    """σ² of each level (log scale) by the method of moments, or None where the level is not
    repeated. Each level's raw variance includes the noise of the levels below divided by how
    many of them it averages; that share is subtracted (a negative estimate reads 0)."""
    out: dict[str, float | None] = dict.fromkeys(LEVELS)
    weight = _weight(side)
    launch_mean, reps = _launch_means(side.values, weight)
    real = reps > 0
    below = 0.0
    if side.has_level(REPETITION):
        deviation = np.where(weight > 0, side.values - launch_mean[..., None], 0.0)
        within = float((deviation**2).sum() / (reps - 1).clip(min=0).sum())
        out[REPETITION] = within
        below = within * float(np.mean(1.0 / reps[real]))
    run_mean = _run_means(launch_mean, real)
    if side.has_level(LAUNCH):
        deviation = np.where(real, launch_mean - run_mean[:, None], 0.0)
        raw = float((deviation**2).sum() / (side.launches - 1).sum())
        out[LAUNCH] = max(0.0, raw - below)
        below = raw * float(np.mean(1.0 / side.launches))
    if side.has_level(RUN):
        out[RUN] = max(0.0, float(run_mean.var(ddof=1)) - below)
    return out


def describe(estimate: Estimate) -> dict[str, Any]:
    """The JSON-ready figures of an estimate."""
    return {
        "ratio": estimate.ratio,
        "ratio_ci95": list(estimate.ci) if estimate.ci is not None else None,
        "unit_level": estimate.level,
        "units": list(estimate.units),
        "log_standard_error": (
            estimate.standard_error if math.isfinite(estimate.standard_error) else None
        ),
        "df": estimate.df if math.isfinite(estimate.df) else None,
        "ci_method": estimate.method,
        "between_run": estimate.between_run,
        "between_run_source": estimate.between_run_source,
        "notes": list(estimate.notes),
    }


def components_of(side: Nested) -> dict[str, Any]:
    """Per level: how many members, and the relative spread (σ on the log scale) where the level
    is repeated; what ``compare`` shows so a user can see where the noise lives."""
    components = variance_components(side)
    return {
        "runs": side.n_runs,
        "launches": side.n_launches,
        "repetitions": side.n_values,
        "sigma": {
            level: (math.sqrt(value) if value is not None else None)
            for level, value in components.items()
        },
    }
