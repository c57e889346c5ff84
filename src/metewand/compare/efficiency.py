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


def all_pass_cells(rows: list[dict[str, Any]], engines: list[str]) -> set[tuple[Any, ...]]:
    """(layer, subset, task_id, attempt) cells where every selected engine passed."""
    passing: dict[tuple[Any, ...], set[str]] = {}
    for row in rows:
        if row.get("status") != "pass":
            continue
        cell = (row.get("layer"), row.get("subset"), row.get("task_id"), row.get("attempt"))
        passing.setdefault(cell, set()).add(str(row.get("engine")))
    wanted = set(engines)
    return {cell for cell, seen in passing.items() if wanted <= seen}


def intersection_mask(
    rows: list[dict[str, Any]], engine: str, cells: set[tuple[Any, ...]]
) -> tuple[list[bool], list[str]]:
    """Per row of ``engine`` (row order): in the intersection?, and the task cluster id."""
    mask: list[bool] = []
    clusters: list[str] = []
    for r in rows:
        if str(r.get("engine")) == engine:
            cell = (r.get("layer"), r.get("subset"), r.get("task_id"), r.get("attempt"))
            mask.append(cell in cells)
            clusters.append(f"{cell[0]}/{cell[1]}/{cell[2]}")
    return mask, clusters


def engine_points(
    rows: list[dict[str, Any]],
    scores: Mapping[str, Any],
    columns: Mapping[str, Any],
    metrics: tuple[str, ...],
) -> list[EnginePoint]:
    engines = [e for e in scores["engines"] if e in columns]
    cells = all_pass_cells(rows, engines)
    points = []
    for engine in engines:
        tasks = scores["by_engine"][engine]["tasks"]
        raw_mask, raw_clusters = intersection_mask(rows, engine, cells)
        mask = np.asarray(raw_mask, dtype=bool)
        clusters = [c for c, m in zip(raw_clusters, raw_mask, strict=True) if m]
        costs: dict[str, Interval | None] = {}
        samples: dict[str, int] = {}
        missing: dict[str, str] = {}
        for metric in metrics:
            values = columns[engine].array(metric)
            chosen = values[mask] if mask.size == values.size else values[:0]
            costs[metric] = median_ci(chosen, clusters) if chosen.size else None
            samples[metric] = int(np.isfinite(chosen).sum())
            if costs[metric] is None:
                missing[metric] = _missing_reason(columns[engine], metric, bool(cells))
        points.append(
            EnginePoint(
                engine,
                wilson(tasks["passed"], tasks["total"]),
                tasks["passed"],
                tasks["total"],
                costs,
                samples,
                missing,
            )
        )
    return points


def _missing_reason(group: Any, metric: str, have_cells: bool) -> str:
    if not have_cells:
        return "empty all-pass intersection"
    reasons = group.missing.get(metric)
    if reasons:
        return ", ".join(f"{r} x{n}" for r, n in sorted(reasons.items()))
    return "no measured values"
