"""The verdict of each group of a comparison, and the rules that make it trustworthy.

A group is judged "slower" (or "faster") only when all of these hold:

1. each side has at least ``min_units`` independent units (default 5) at the comparison's unit
   level (runs when both sides have several; else process launches; else repetitions, see
   ``hierarchy``): fewer is "not comparable (n=2 < 5)", whatever the numbers say, and the gate
   does not count it;
2. the 95% CI of NEW/BASE (a hierarchical bootstrap-t of the ratio of trimmed geometric means;
   for one run's pairs, the Walsh CI of their Hodges–Lehmann ratio) lies wholly beyond
   ``threshold`` (above 1 + threshold, or below 1 - threshold);
3. a rank test over the units (rank-sum for separate runs, signed-rank for pairs) is significant
   after Benjamini–Hochberg over every comparable group of the comparison (q <= ``alpha``).

Anything else is "no change": the data show no change beyond the threshold that the noise at the
levels they repeat could not explain. Both figures (the CI, and p with its adjusted q) are kept
per group so a reader can see which condition held.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np

from metewand.compare import hierarchy, hierarchy_figures, significance

SLOWER, FASTER, SAME = "slower", "faster", "no change"
UNMEASURED = "not comparable"
DEFAULT_MIN_UNITS = 5
Item = tuple[Hashable, Hashable, float]  # (run, launch, value)
PairItem = tuple[Hashable, Hashable, float, float]  # (run, pair, base value, new value)


def _side(items: list[Item]) -> dict[str, Any]:
    values = [value for _, _, value in items]
    return {"n": len(values), "median": float(np.median(values)) if values else None}


def two_sample_figures(
    base: list[Item],
    new: list[Item],
    between_run: hierarchy.BetweenRun | None,
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """Medians, the hierarchical ratio with its CI, and the rank test's p of one group."""
    figures: dict[str, Any] = {"base": _side(base), "new": _side(new), "test": "rank_sum"}
    try:
        base_sample, new_sample = hierarchy.nested(base), hierarchy.nested(new)
    except hierarchy.NotPositive:
        return {**figures, **_undefined("a value of 0 or less has no ratio")}
    except ValueError:  # no values on a side: the caller names which
        return {**figures, **_undefined(None)}
    estimate = hierarchy.two_sample(base_sample, new_sample, between_run, resamples, seed)
    figures["base"]["levels"] = hierarchy_figures.components_of(base_sample)
    figures["new"]["levels"] = hierarchy_figures.components_of(new_sample)
    figures.update(hierarchy_figures.describe(estimate))
    figures["p_value"] = significance.rank_sum_test(
        hierarchy.unit_means(base_sample, estimate.level),
        hierarchy.unit_means(new_sample, estimate.level),
        seed,
    )
    return figures


def paired_figures(
    pairs: list[PairItem],
    between_run: hierarchy.BetweenRun | None,
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """The same figures from pairs that ran back to back (interleaved A/B, engines of a round)."""
    figures: dict[str, Any] = {
        "base": _side([(r, p, b) for r, p, b, _ in pairs]),
        "new": _side([(r, p, n) for r, p, _, n in pairs]),
        "test": "signed_rank",
        "pairs": len(pairs),
    }
    try:
        sample = hierarchy.paired(pairs)
    except hierarchy.NotPositive:
        return {**figures, **_undefined("a value of 0 or less has no ratio")}
    except ValueError:
        return {**figures, **_undefined(None)}
    estimate = hierarchy.one_sample(sample, between_run, resamples, seed)
    figures["levels"] = hierarchy_figures.components_of(sample)
    figures.update(hierarchy_figures.describe(estimate))
    units = hierarchy.unit_means(sample, estimate.level)
    figures["p_value"] = significance.signed_rank_test(units, seed)
    if sample.n_runs == 1 and not between_run:
        figures.update(_walsh(units))
    return figures


def _walsh(log_ratios: np.ndarray) -> dict[str, Any]:
    """One run's pairs: the Hodges–Lehmann ratio and the CI that inverts the signed-rank test
    the verdict uses (``significance.walsh_interval``), so the two conditions judge the same
    thing; one wild pair moves it by one rank, where it widened the bootstrap-t of 10 pairs to
    0.63-1.26 here. Fewer than 6 pairs keep the bootstrap's figures."""
    found = significance.walsh_interval(log_ratios)
    if found is None:
        return {}
    estimate, low, high = found
    return {
        "ratio": math.exp(estimate),
        "ratio_ci95": [math.exp(low), math.exp(high)],
        "ci_method": "walsh",
        "log_standard_error": None,
        "df": None,
    }


def _undefined(reason: str | None) -> dict[str, Any]:
    return {
        "ratio": None,
        "ratio_ci95": None,
        "units": [],
        "p_value": None,
        **({"undefined": reason} if reason else {}),
    }


def _not_comparable_reason(group: Mapping[str, Any], min_units: int) -> str | None:
    if group.get("ratio") is None:
        return str(group.get("note") or group.get("undefined") or "no ratio")
    units = group.get("units") or []
    if units and min(units) < min_units:
        return f"n={min(units)} < {min_units}"
    if group.get("ratio_ci95") is None:
        return "no confidence interval"
    return None


def judge(
    groups: list[dict[str, Any]], threshold: float, min_units: int, alpha: float
) -> dict[str, Any]:
    """Fill each group's ``verdict``, ``verdict_reason`` and ``q_value`` in place; return the
    gate's account (the correction, and how many groups were not comparable and why)."""
    reasons = [_not_comparable_reason(g, min_units) for g in groups]
    family = [g.get("p_value") if r is None else None for g, r in zip(groups, reasons, strict=True)]
    q_values = significance.adjusted(family)
    for group, reason, q in zip(groups, reasons, q_values, strict=True):
        group["q_value"] = q
        group["verdict_reason"] = reason
        group["verdict"] = (
            UNMEASURED if reason is not None else _verdict(group, q, threshold, alpha)
        )
    why = Counter(r for r in reasons if r is not None)
    return {
        "min_units": min_units,
        "alpha": alpha,
        "correction": "benjamini_hochberg",
        "family_size": sum(1 for p in family if p is not None),
        "not_comparable": {"count": sum(why.values()), "reasons": dict(sorted(why.items()))},
    }


def _verdict(group: Mapping[str, Any], q: float | None, threshold: float, alpha: float) -> str:
    low, high = group["ratio_ci95"]
    significant = q is not None and q <= alpha
    if significant and low > 1 + threshold:
        return SLOWER
    if significant and high < 1 - threshold:
        return FASTER
    return SAME


def verdict_text(group: Mapping[str, Any]) -> str:
    """``not comparable (n=2 < 5)``, or the verdict itself."""
    reason = group.get("verdict_reason")
    if group["verdict"] == UNMEASURED and reason:
        return f"{UNMEASURED} ({reason})"
    return str(group["verdict"])


def not_comparable_text(gate: Mapping[str, Any]) -> str | None:
    """``3 groups not comparable, not counted by the gate: n=2 < 5 (x3)``, or None."""
    account = gate["not_comparable"]
    if not account["count"]:
        return None
    why = ", ".join(f"{reason} (x{n})" for reason, n in account["reasons"].items())
    noun = "group" if account["count"] == 1 else "groups"
    return f"{account['count']} {noun} not comparable, not counted by the gate: {why}"


def counts(groups: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    return dict(Counter(str(g["verdict"]) for g in groups))
