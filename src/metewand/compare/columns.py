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

from metewand.compare.resource_metrics import form_value, quality_flags, resource_of, traffic_of

BROWSER_METRICS = ("pss_peak_bytes", "cpu_total_ms")
TRAFFIC_FIELDS = (
    "fixture_app_rx_body_bytes",
    "fixture_app_tx_body_bytes",
    "fixture_app_rx_header_bytes",
    "fixture_app_tx_header_bytes",
)
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
    reasons: dict[str, list[str | None]] = field(default_factory=dict)  # per attempt, or None

    def add(self, name: str, value: float | None, reason: str | None) -> None:
        self.values.setdefault(name, []).append(np.nan if value is None else value)
        why = None if value is not None else (reason or "unavailable")
        self.reasons.setdefault(name, []).append(why)
        if why is not None:
            self.missing.setdefault(name, Counter())[why] += 1

    def array(self, name: str) -> np.ndarray:
        return np.asarray(self.values.get(name, []), dtype=float)

    def pass_mask(self) -> np.ndarray:
        return np.asarray(self.passed, dtype=bool)

    def missing_where(self, name: str, mask: np.ndarray) -> Counter[str]:
        """Reasons a metric is missing, counted over the attempts selected by ``mask``."""
        reasons = self.reasons.get(name, [])
        return Counter(
            why for why, keep in zip(reasons, mask, strict=True) if keep and why is not None
        )


def traffic_bytes(row: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """Fixture application bytes of one attempt (rx + tx, headers + bodies), or the reason."""
    traffic = traffic_of(row)
    if traffic is None:
        return None, "no_traffic_record"
    if traffic.get("available") is not True:
        return None, str(traffic.get("reason") or "traffic_unavailable")
    total = 0.0
    for name in TRAFFIC_FIELDS:
        value = form_value(traffic.get(name))
        if value is None:
            return None, f"{name}_missing"
        total += value
    return total, None


def browser_columns(rows: list[dict[str, Any]]) -> dict[str, GroupColumns]:
    groups: dict[str, GroupColumns] = {}
    for row in rows:
        group = groups.setdefault(str(row.get("engine", "")), GroupColumns())
        group.passed.append(row.get("status") == "pass")
        duration = form_value(row.get("duration_ms"))
        group.add("duration_ms", duration, None if duration is not None else "absent")
        resource = resource_of(row)
        for name in BROWSER_METRICS:
            group.add(name, *metric_value(resource, name))
        group.add("fixture_app_bytes", *traffic_bytes(row))
        group.flags.update(quality_flags(row))
    return groups
