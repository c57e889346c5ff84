"""Result rows as numpy columns, built in one pass, for plots and summary figures.

A metric that was not measured is NaN in the array and its reason is counted beside it, so a
report can say "unavailable (reason)" and never draws or averages a missing value as 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

BROWSER_METRICS = ("pss_peak_bytes", "cpu_total_ms")
COMPUTE_PHASES = (
    "materialization_time_ns",
    "worker_startup_time_ns",
    "prepare_time_ns",
    "execute_request_time_ns",
    "evaluation_time_ns",
    "timed_wall_time_ns",
    "cpu_time_ns",
    "peak_rss_bytes",
)


def metric_value(container: Any, name: str) -> tuple[float | None, str | None]:
    """(value, None) or (None, reason) for a metric stored as a wire form or a plain number."""
    if not isinstance(container, Mapping):
        return None, "not_profiled"
    raw = container.get(name)
    if isinstance(raw, bool):
        return None, "not_a_number"
    if isinstance(raw, int | float):
        return float(raw), None
    if isinstance(raw, Mapping):
        value = raw.get("value")
        if raw.get("status") in ("complete", "partial") and isinstance(value, int | float):
            return float(value), None
        return None, str(raw.get("reason") or "unavailable")
    return None, "absent"


@dataclass
class GroupColumns:
    """Per-attempt arrays of one engine (or implementation)."""

    values: dict[str, list[float]] = field(default_factory=dict)
    passed: list[bool] = field(default_factory=list)
    missing: dict[str, Counter[str]] = field(default_factory=dict)
    flags: Counter[str] = field(default_factory=Counter)

    def add(self, name: str, value: float | None, reason: str | None) -> None:
        self.values.setdefault(name, []).append(np.nan if value is None else value)
        if value is None:
            self.missing.setdefault(name, Counter())[reason or "unavailable"] += 1

    def array(self, name: str) -> np.ndarray:
        return np.asarray(self.values.get(name, []), dtype=float)

    def pass_mask(self) -> np.ndarray:
        return np.asarray(self.passed, dtype=bool)


def browser_columns(rows: list[dict[str, Any]]) -> dict[str, GroupColumns]:
    groups: dict[str, GroupColumns] = {}
    for row in rows:
        group = groups.setdefault(str(row.get("engine", "")), GroupColumns())
        group.passed.append(row.get("status") == "pass")
        duration = row.get("duration_ms")
        if isinstance(duration, int | float) and not isinstance(duration, bool):
            group.add("duration_ms", float(duration), None)
        else:
            group.add("duration_ms", None, "absent")
        resource = row.get("resource")
        for name in BROWSER_METRICS:
            group.add(name, *metric_value(resource, name))
        if isinstance(resource, Mapping):
            for flag in resource.get("quality_flags") or ():
                group.flags[str(flag)] += 1
    return groups


def measurements_of(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """provenance.data.measurements of a compute attempt (or diagnostic.details.measurements)."""
    prov = row.get("provenance")
    if isinstance(prov, Mapping):
        data = prov.get("data")
        if isinstance(data, Mapping) and isinstance(data.get("measurements"), Mapping):
            return data["measurements"]
    diag = row.get("diagnostic")
    if isinstance(diag, Mapping) and isinstance(diag.get("details"), Mapping):
        found = diag["details"].get("measurements")
        return found if isinstance(found, Mapping) else None
    return None


def compute_columns(rows: list[dict[str, Any]], name_of: Any) -> dict[str, GroupColumns]:
    groups: dict[str, GroupColumns] = {}
    for row in rows:
        group = groups.setdefault(name_of(row), GroupColumns())
        group.passed.append(row.get("outcome") == "accepted")
        measurements = measurements_of(row)
        for phase in COMPUTE_PHASES:
            group.add(phase, *metric_value(measurements, phase))
    return groups


def median_or_none(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else None
