"""Per-case statistics of a compute run: one summary per case x implementation, never pooled.

A *case* is one point of the experiment after axis expansion: experiment, case name, dataset
and its parameters, problem and its parameters, and the timing scope. Pooling the attempts of
a 2,000-element and a 20,000-element sort into one median answers no question, so every figure
here is computed inside one case.

Per case x implementation: attempts, accepted, failures by code, and for each timing metric
n / median / p95 / min with a bootstrap 95% CI of the median (repetitions resampled, seeded, the
resample count recorded). With a reference implementation: per case the ratio of medians with a
bootstrap CI, paired on the dataset instance when both sides ran the same instance at the same
repetition indices, and the geometric mean of those ratios over cases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metewand import canonical
from metewand.compare import compute_rows, hierarchy, hierarchy_figures, hosts, stats
from metewand.compare.columns import metric_value
from metewand.compare.labels import CASE_METRICS as CASE_METRICS
from metewand.compare.labels import case_label as case_label
from metewand.compare.labels import case_of as case_of
from metewand.compare.labels import implementation_label as implementation_label

SCHEMA = "metewand_compute_cases/1"
TIME_METRIC = "timed_wall_time_ns"
NO_SUCCESS = "no successful attempt"
MIN_UNITS = 5  # independent units (process launches) below which no CI is given


def numeric_axes(case: Mapping[str, Any]) -> dict[str, float]:
    """``dataset.size`` -> 20000.0 for every numeric parameter of the case."""
    axes: dict[str, float] = {}
    for prefix, key in (("dataset", "dataset_parameters"), ("problem", "problem_parameters")):
        for name, value in sorted(case[key].items()):
            if isinstance(value, int | float) and not isinstance(value, bool):
                axes[f"{prefix}.{name}"] = float(value)
    return axes


def _instance_of(row: Mapping[str, Any]) -> tuple[Any, Any]:
    """(dataset instance digest, repetition): attempts that share it saw the same input."""
    receipt = compute_rows.dataset_receipt_of(row)
    digest = receipt.get("output_sha256") if isinstance(receipt, Mapping) else None
    return (digest or row.get("dataset_configuration"), row.get("repetition"))


@dataclass
class _Group:
    """The measured attempts of one implementation inside one case."""

    outcomes: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    warmups: Counter[str] = field(default_factory=Counter)  # counted apart, never timed
    values: dict[str, list[float]] = field(default_factory=dict)
    instances: dict[str, list[tuple[Any, Any]]] = field(default_factory=dict)
    accepted_rows: list[Mapping[str, Any]] = field(default_factory=list)
    row_of: dict[str, list[int]] = field(default_factory=dict)  # metric -> index in accepted_rows
    missing: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, row: Mapping[str, Any]) -> None:
        if compute_rows.is_warmup(row):
            self.warmups[compute_rows.status_of(row)] += 1
            return
        self.outcomes[compute_rows.status_of(row)] += 1
        if not compute_rows.is_accepted(row):
            diagnostic = compute_rows.diagnostic_of(row) or {}
            self.failures[str(diagnostic.get("code"))] += 1
            return  # a failed attempt's timings describe a different piece of work
        measurements = compute_rows.measurements_of(row)
        self.accepted_rows.append(row)
        for metric in CASE_METRICS:
            value, reason = metric_value(measurements, metric)
            if value is None:
                self.missing.setdefault(metric, Counter())[str(reason)] += 1
                continue
            self.values.setdefault(metric, []).append(value)
            self.instances.setdefault(metric, []).append(_instance_of(row))
            self.row_of.setdefault(metric, []).append(len(self.accepted_rows) - 1)

    def items(self, metric: str) -> list[tuple[int, str, float]]:
        """(run, launch, value) of the metric: the launch each value's attempt ran in."""
        launches = compute_rows.launches_of(self.accepted_rows)
        rows = self.row_of.get(metric, [])
        return [(0, launches[i], v) for i, v in zip(rows, self.values.get(metric, []), strict=True)]


def group_rows(
    rows: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, _Group]]]:
    """Case id -> coordinates, and case id -> implementation -> its attempts (warm-ups are
    only counted)."""
    cases: dict[str, dict[str, Any]] = {}
    groups: dict[str, dict[str, _Group]] = {}
    for row in rows:
        case = case_of(row)
        case_id = case_label(case)
        cases.setdefault(case_id, case)
        groups.setdefault(case_id, {}).setdefault(implementation_label(row), _Group()).add(row)
    return cases, groups


def _metric_block(group: _Group, metric: str, resamples: int, seed: int) -> dict[str, Any]:
    """n / median / p95 / min and the median's 95% CI, resampled over the attempts' process
    launches and the repetitions inside them; no CI from fewer than ``MIN_UNITS`` launches
    (with n = 2 a "95% CI" is roughly [min, max] and says nothing)."""
    values = group.values.get(metric, [])
    array = np.asarray(values, dtype=float)
    block: dict[str, Any] = {
        "n": int(array.size),
        "median": float(np.median(array)) if array.size else None,
        "p95": stats.p95(values),
        "min": float(array.min()) if array.size else None,
        "median_ci95": None,
        "units": None,  # every block has the same keys, whether or not it could be resampled
        "ci_note": None,
    }
    block["unavailable"] = dict(sorted(group.missing.get(metric, Counter()).items()))
    if not values:
        return block
    if min(values) <= 0:  # zeros: a median, but no log-scale resampling (no ratio to draw from)
        block["ci_note"] = "a value of 0: no CI"
        return block
    sample = hierarchy.nested(group.items(metric))
    level = hierarchy.side_level(sample)
    block["units"] = sample.units(level)
    if block["units"] < MIN_UNITS:
        block["ci_note"] = f"n={block['units']} < {MIN_UNITS}: no CI"
        return block
    interval = hierarchy.median_interval(sample, resamples, seed)
    block["median_ci95"] = _snapped(interval, block["median"]) if interval else None
    return block


def _snapped(interval: tuple[float, float], median: float) -> list[float]:
    """The interval with a bound that exp(log(x)) left a rounding error away from the median
    (tied peak RSS values: 17997824.00000003 against 17997824) put on the median."""
    low, high = interval
    if abs(low - median) <= 1e-9 * abs(median):
        low = median
    if abs(high - median) <= 1e-9 * abs(median):
        high = median
    return [low, high]


def _implementation_block(group: _Group, resamples: int, seed: int) -> dict[str, Any]:
    accepted = group.outcomes.get(compute_rows.ACCEPTED, 0)
    block: dict[str, Any] = {
        "attempts": sum(group.outcomes.values()),
        "accepted": accepted,
        "by_outcome": dict(sorted(group.outcomes.items())),
        "failed_by_code": dict(sorted(group.failures.items())),
        "warmups": {
            "total": sum(group.warmups.values()),
            "by_outcome": dict(sorted(group.warmups.items())),
        },
        "note": None if accepted else NO_SUCCESS,
    }
    block["metrics"] = {m: _metric_block(group, m, resamples, seed) for m in CASE_METRICS}
    return block


def _ratio(
    mine: _Group, reference: _Group, metric: str, resamples: int, seed: int
) -> dict[str, Any]:
    """NEW/reference as a ratio of geometric means with its CI (``compare.hierarchy``): paired on
    the dataset instance when every instance matches once on both sides, else two samples."""
    keys_a, keys_b = mine.instances.get(metric, []), reference.instances.get(metric, [])
    a, b = mine.values.get(metric, []), reference.values.get(metric, [])
    try:
        if len(set(keys_a)) == len(keys_a) == len(keys_b) and set(keys_a) == set(keys_b):
            position = {key: i for i, key in enumerate(keys_b)}
            pairs = [(0, key, b[position[key]], a[i]) for i, key in enumerate(keys_a)]
            estimate = hierarchy.one_sample(hierarchy.paired(pairs), None, resamples, seed)
            paired = True
        else:
            estimate = hierarchy.two_sample(
                hierarchy.nested(reference.items(metric)),
                hierarchy.nested(mine.items(metric)),
                None,
                resamples,
                seed,
            )
            paired = False
    except hierarchy.NotPositive:
        return {"ratio": None, "ratio_ci95": None, "note": "a value of 0 has no ratio"}
    figures = hierarchy_figures.describe(estimate)
    for key in ("between_run", "between_run_source", "notes"):  # one run: not a question here
        figures.pop(key)
    return {**figures, "paired": paired, "n": [len(a), len(b)], "note": None}


def _ratios(
    groups: Mapping[str, _Group], reference: str, metric: str, resamples: int, seed: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ref = groups.get(reference)
    for name, group in sorted(groups.items()):
        if name == reference:
            continue
        if ref is None or not ref.values.get(metric) or not group.values.get(metric):
            out[name] = {"ratio": None, "ratio_ci95": None, "note": NO_SUCCESS}
            continue
        out[name] = _ratio(group, ref, metric, resamples, seed)
    return out


def geometric_mean(ratios: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The geometric mean of per-case ratios, its CI from the cases' log-scale standard errors
    (cases are independent; Welch–Satterthwaite degrees of freedom)."""
    usable = [r for r in ratios if r.get("ratio") and r.get("log_standard_error") is not None]
    if not usable or len(usable) != len(ratios):
        return {"cases": len(ratios), "geometric_mean": None, "ci95": None}
    logs = np.log([r["ratio"] for r in usable])
    parts = [((r["log_standard_error"] / len(usable)) ** 2, r["df"] or np.inf) for r in usable]
    se = float(np.sqrt(sum(v for v, _ in parts)))
    df = hierarchy.satterthwaite(parts)
    q = hierarchy.student_quantile(df)
    mean = float(logs.mean())
    return {
        "cases": len(ratios),
        "geometric_mean": float(np.exp(mean)),
        "ci95": [float(np.exp(mean - q * se)), float(np.exp(mean + q * se))],
    }


def case_statistics(
    rows: Sequence[Mapping[str, Any]],
    reference: str | None = None,
    resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_BOOTSTRAP_SEED,
    metric: str = TIME_METRIC,
) -> dict[str, Any]:
    """Everything per case x implementation, plus ratios against ``reference`` if named."""
    cases, groups = group_rows(rows)
    implementations = sorted({name for per in groups.values() for name in per})
    if reference and reference not in implementations and f"{reference} [new]" in implementations:
        reference = f"{reference} [new]"  # an A/B run: the reference as the current tree runs it
    out_cases = []
    per_implementation: dict[str, list[dict[str, Any]]] = {}
    case_rows: dict[str, list[Mapping[str, Any]]] = {}
    for row in compute_rows.measured_rows(rows):
        case_rows.setdefault(case_label(case_of(row)), []).append(row)
    for case_id in sorted(cases, key=lambda c: _case_sort_key(cases[c])):
        per = groups[case_id]
        entry: dict[str, Any] = {
            "case": case_id,
            "coordinates": cases[case_id],
            "axes": numeric_axes(cases[case_id]),
            "implementations": {
                name: _implementation_block(per[name], resamples, seed) for name in sorted(per)
            },
        }
        pooled = hosts.pooling(case_rows.get(case_id, []))
        if pooled is not None:  # a Dask run whose case ran on several hosts: said, not hidden
            entry["pooled_over_hosts"] = pooled
        if reference:
            entry["ratios"] = _ratios(per, reference, metric, resamples, seed)
            for name, ratio in entry["ratios"].items():
                if ratio["ratio"] is not None:
                    per_implementation.setdefault(name, []).append(ratio)
        out_cases.append(entry)
    summary: dict[str, Any] = {
        "schema": SCHEMA,
        "bootstrap": {
            **stats.bootstrap_record(resamples, seed, "repetition"),
            "method": "hierarchical_percentile",
            "levels": ["launch", "repetition"],
            "min_units": MIN_UNITS,
        },
        "metrics": list(CASE_METRICS),
        "implementations": implementations,
        "reference": reference,
        "ratio_metric": metric if reference else None,
        "cases": out_cases,
    }
    if reference:
        summary["geometric_mean_ratio"] = {
            name: geometric_mean(per_implementation[name]) if name in per_implementation else None
            for name in implementations
            if name != reference
        }
    return summary


def _case_sort_key(case: Mapping[str, Any]) -> str:
    """Numeric axes sort numerically (2000 before 20000), the rest by their canonical text."""

    def padded(params: Mapping[str, Any]) -> dict[str, Any]:
        return {
            k: f"{float(v):030.6f}" if isinstance(v, int | float) and not isinstance(v, bool) else v
            for k, v in params.items()
        }

    return canonical.dumps_str(
        {
            **case,
            "dataset_parameters": padded(case["dataset_parameters"]),
            "problem_parameters": padded(case["problem_parameters"]),
        }
    )


def default_reference(manifest: Mapping[str, Any]) -> str | None:
    """The manifest's own choice of reference implementation, if it names one."""
    for key in ("reference_implementation", "reference"):
        value = manifest.get(key)
        if isinstance(value, str) and value:
            return value
    return None
