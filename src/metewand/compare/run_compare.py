"""``metewand compare BASE NEW``: what changed between two runs of the same suite.

Suite-specific parts (how attempts group, which metric is the default, what a status is, which
provenance facts matter) come from ``compare.suite_registry``, keyed by the run's suite kind;
this module only matches groups, bootstraps NEW/BASE ratios and judges them.

A group is "slower" only when the whole 95% CI of NEW/BASE lies above 1 + threshold, "faster"
only when it lies below 1 - threshold; anything else is "no change" (including a CI that
straddles the threshold: the data cannot tell). The two runs are independent samples, so the
ratio's bootstrap resamples each side on its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from metewand.compare import (
    compare_suites,  # noqa: F401  (the edge: registers the suite kinds)
    hosts,
    stats,
)
from metewand.compare.rundir import RunData
from metewand.compare.suite_registry import CompareError, Group, SuiteKind, suite_kind

SCHEMA = "metewand_compare/1"
DEFAULT_THRESHOLD = 0.05
SLOWER, FASTER, SAME = "slower", "faster", "no change"
UNMEASURED = "not comparable"
PASS = "pass"


@dataclass
class _Side:
    values: list[float]
    statuses: Counter[str]
    rows: list[Mapping[str, Any]] = field(default_factory=list)  # for the hosts they ran on


def _collect(run: RunData, kind: SuiteKind, metric: str) -> dict[Group, _Side]:
    groups: dict[Group, _Side] = {}
    for row in run.rows:
        group = kind.group_of(row)
        if group is None:
            continue
        side = groups.setdefault(group, _Side([], Counter()))
        side.statuses[kind.status_of(row)] += 1
        value = kind.value_of(row, metric)
        if value is not None:
            side.values.append(value)
            side.rows.append(row)
    return groups


def status_text(statuses: Counter[str]) -> str:
    """``pass`` when every attempt passed, else ``fail x2, pass x1`` (most common first)."""
    if set(statuses) == {PASS}:
        return PASS
    return ", ".join(f"{s} x{n}" for s, n in sorted(statuses.items(), key=lambda i: (-i[1], i[0])))


def verdict(ci: Sequence[float] | None, threshold: float) -> str:
    if ci is None:
        return UNMEASURED
    if ci[0] > 1 + threshold:
        return SLOWER
    if ci[1] < 1 - threshold:
        return FASTER
    return SAME


def _group_entry(
    base: _Side, new: _Side, threshold: float, resamples: int, seed: int
) -> dict[str, Any]:
    ratio, _ = stats.ratio_describe(new.values, base.values, False, resamples, seed)
    entry: dict[str, Any] = {
        "base": {"n": len(base.values), "median": stats.median(base.values)},
        "new": {"n": len(new.values), "median": stats.median(new.values)},
        "ratio": ratio["ratio"],
        "ratio_ci95": ratio["ratio_ci95"],
        "verdict": verdict(ratio["ratio_ci95"], threshold),
        "base_status": status_text(base.statuses),
        "new_status": status_text(new.statuses),
    }
    pooled = {"base": hosts.pooling(base.rows), "new": hosts.pooling(new.rows)}
    if pooled["base"] or pooled["new"]:  # a Dask run's group ran on several hosts: say so
        entry["pooled_over_hosts"] = {
            side: block["statement"] if block else None for side, block in pooled.items()
        }
    if entry["ratio"] is None:
        name, side = ("BASE", base) if not base.values else ("NEW", new)
        passed = side.statuses.get(PASS, 0) > 0
        entry["note"] = f"not measured in {name}" if passed else f"no successful attempt in {name}"
    return entry


def provenance_differences(base: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Facts whose values differ between the runs (absent on one side counts as different)."""
    out = []
    for name in sorted(set(base) | set(new)):
        if base.get(name) != new.get(name):
            out.append({"fact": name, "base": base.get(name), "new": new.get(name)})
    return out


def _gate_warnings(base: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """A run whose host pollution gate did not pass is suspect even when both agree."""
    out = []
    for side, facts in (("BASE", base), ("NEW", new)):
        if facts.get("pollution_gate_passed") is False:
            out.append(f"{side} ran on a polluted host (its pollution gate did not pass)")
    return out


def _host_warnings(base: RunData, new: RunData) -> list[str]:
    """A run whose rows ran on several Dask hosts: its medians pool them (never silently)."""
    out = []
    for side, run in (("BASE", base), ("NEW", new)):
        pooled = hosts.pooling(run.rows)
        if pooled is not None:
            out.append(f"{side}'s medians are {pooled['statement']}")
    return out


def _rollups(kind: SuiteKind, base: RunData, new: RunData) -> dict[str, list[dict[str, Any]]]:
    """Each rollup's groups with both runs' summaries side by side (None: absent in a run)."""
    if kind.rollups_of is None:
        return {}
    base_r, new_r = kind.rollups_of(base.rows), kind.rollups_of(new.rows)
    out: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(set(base_r) | set(new_r)):
        b, n = base_r.get(name, {}), new_r.get(name, {})
        out[name] = [
            {name: key[0], kind.group_names[1]: key[1], "base": b.get(key), "new": n.get(key)}
            for key in sorted(set(b) | set(n))
        ]
    return out


def compare_runs(
    base: RunData,
    new: RunData,
    metric: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_BOOTSTRAP_SEED,
) -> dict[str, Any]:
    if base.kind != new.kind:
        raise CompareError(f"BASE is a {base.kind} run and NEW a {new.kind} run")
    kind = suite_kind(base.kind)
    metric = metric or kind.default_metric
    accepted = metric in kind.metrics or bool(kind.accepts_metric and kind.accepts_metric(metric))
    if not accepted:
        raise CompareError(
            f"--metric {metric!r} is not a {kind.name} metric; choose from {list(kind.metrics)}"
        )
    base_groups, new_groups = _collect(base, kind, metric), _collect(new, kind, metric)
    groups = []
    for key in sorted(set(base_groups) & set(new_groups)):
        entry = _group_entry(base_groups[key], new_groups[key], threshold, resamples, seed)
        groups.append({kind.group_names[0]: key[0], kind.group_names[1]: key[1], **entry})
    status_changes = [g for g in groups if g["base_status"] != g["new_status"]]
    regressions = [g for g in groups if g["verdict"] == SLOWER]
    lost_passes = [g for g in status_changes if g["base_status"] == PASS]
    return {
        "schema": SCHEMA,
        "suite": kind.name,
        "group_names": list(kind.group_names),
        "base": {"run_id": base.run_id, "path": str(base.path), "rows": len(base.rows)},
        "new": {"run_id": new.run_id, "path": str(new.path), "rows": len(new.rows)},
        "metric": metric,
        "threshold": threshold,
        "bootstrap": {
            **stats.bootstrap_record(resamples, seed, "attempt"),
            "method": "independent_iid_percentile_ratio_of_medians",
        },
        "provenance_differences": provenance_differences(
            kind.provenance_of(base), kind.provenance_of(new)
        ),
        "groups": groups,
        "unmatched": {
            "only_in_base": [list(k) for k in sorted(set(base_groups) - set(new_groups))],
            "only_in_new": [list(k) for k in sorted(set(new_groups) - set(base_groups))],
        },
        "status_changes": status_changes,
        "rollups": _rollups(kind, base, new),
        "warnings": _gate_warnings(kind.provenance_of(base), kind.provenance_of(new))
        + _host_warnings(base, new),
        "counts": dict(Counter(g["verdict"] for g in groups)),
        "regression": bool(regressions or lost_passes),
        "regression_reasons": [
            f"{g[kind.group_names[0]]} x {g[kind.group_names[1]]}: slower "
            f"(NEW/BASE {g['ratio']:.3f}, CI {g['ratio_ci95'][0]:.3f}-{g['ratio_ci95'][1]:.3f})"
            for g in regressions
        ]
        + [
            f"{g[kind.group_names[0]]} x {g[kind.group_names[1]]}: {g['base_status']} -> "
            f"{g['new_status']}"
            for g in lost_passes
        ],
    }
