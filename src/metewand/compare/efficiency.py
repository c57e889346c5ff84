"""The efficiency map's numbers: task success rate against median cost, with intervals.

Cost medians come from the all-pass intersection (task x attempt cells where every selected
engine passed), so an engine that fails fast is not drawn as cheap. The success rate is the
all-k task rate from scores.json, with a Wilson 95% interval; the cost median has a seeded
task-clustered bootstrap 95% interval from ``compare.stats`` (seeded: same rows, same map).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from metewand.compare import stats
from metewand.compare.intersection import Intersection, all_pass_intersection

Z95 = 1.959963984540054
# Fewer resamples than a resource summary uses: the map is a picture, the summary is the record.
REPORT_RESAMPLES = 400


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class EnginePoint:
    engine: str
    success: Interval | None  # None: no tasks
    tasks_passed: int
    tasks_total: int
    costs: dict[str, Interval | None]  # metric -> median with CI, None when unavailable
    samples: dict[str, int]  # metric -> number of finite values behind the median
    missing_reason: dict[str, str]


def wilson(passed: int, total: int) -> Interval | None:
    if total <= 0:
        return None
    p = passed / total
    denom = 1 + Z95**2 / total
    centre = (p + Z95**2 / (2 * total)) / denom
    half = Z95 * np.sqrt(p * (1 - p) / total + Z95**2 / (4 * total**2)) / denom
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half))


def median_ci(values: np.ndarray, clusters: Sequence[Hashable]) -> Interval | None:
    """Median with the task-clustered bootstrap CI of ``compare.stats`` (NaNs dropped)."""
    keep = np.isfinite(values)
    finite = values[keep]
    if finite.size == 0:
        return None
    kept_clusters = [clusters[int(i)] for i in np.flatnonzero(keep)]
    ci = stats.cluster_bootstrap_median_ci(finite, kept_clusters, resamples=REPORT_RESAMPLES)
    median = float(np.median(finite))
    return Interval(median, *(ci or (median, median)))


def _cost_arrays(
    inter: Intersection, engine: str, metrics: Sequence[str]
) -> tuple[dict[str, np.ndarray], list[str]]:
    """One engine's intersection rows: each metric as an array (NaN when missing), from the
    columns the intersection read once, and the task cluster of each row."""
    columns = inter.metric_columns(engine)
    arrays = {m: np.array(columns[m], dtype=float) for m in metrics}  # None -> nan
    return arrays, [str(row["task_id"]) for row in inter.rows_by_engine.get(engine, [])]


def engine_points(
    rows: Sequence[Mapping[str, Any]],
    scores: Mapping[str, Any],
    columns: Mapping[str, Any],
    metrics: tuple[str, ...],
    intersection: Intersection | None = None,
) -> list[EnginePoint]:
    """Per engine: the all-k success rate, and each cost's median over the all-pass
    intersection of ``compare.intersection`` (task-attempts every selected engine passed).

    ``intersection`` is the one the report already built; it is used only when it was built
    over exactly these engines, else it is rebuilt from ``rows``.
    """
    engines = [e for e in scores["engines"] if e in columns]
    inter = intersection
    if inter is None or inter.engines != tuple(engines):
        inter = all_pass_intersection(rows, engines)
    points = []
    for engine in engines:
        tasks = scores["by_engine"][engine]["tasks"]
        arrays, clusters = _cost_arrays(inter, engine, metrics)
        costs: dict[str, Interval | None] = {}
        samples: dict[str, int] = {}
        missing: dict[str, str] = {}
        for metric in metrics:
            values = arrays[metric]
            costs[metric] = median_ci(values, clusters) if values.size else None
            samples[metric] = int(np.isfinite(values).sum())
            if costs[metric] is None:
                missing[metric] = _missing_reason(columns[engine], metric, bool(inter.keys))
        success = wilson(tasks["passed"], tasks["total"])
        points.append(
            EnginePoint(engine, success, tasks["passed"], tasks["total"], costs, samples, missing)
        )
    return points


def _missing_reason(group: Any, metric: str, have_cells: bool) -> str:
    if not have_cells:
        return "empty all-pass intersection"
    reasons = group.missing.get(metric)
    if reasons:
        return ", ".join(f"{r} x{n}" for r, n in sorted(reasons.items()))
    return "no measured values"
