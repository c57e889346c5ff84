"""The per-attempt resource metrics a comparison aggregates, and how to read them from a row.

``results.jsonl[].resource`` is an ``abb_engine_resources/1`` object: measured values are
measurement forms (``{"status", "value"?, "reason"?}``), derived ratios (``avg_cores``) are plain
numbers or null. Fixture traffic is the row's ``traffic`` (``abb_fixture_traffic/1``) or
``resource.fixture_traffic``; it counts only when ``available`` is true. A value that is
missing or ``unavailable`` reads as None — never as 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Row = Mapping[str, Any]
PRESENT = ("complete", "partial")


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    source: str  # "resource" or "traffic"
    required: bool  # must be present on every intersection row for eligibility
    label: str

    def read(self, row: Row) -> float | None:
        if self.source == "traffic":
            return traffic_value(row, self.name)
        return resource_value(row, self.name)


METRICS: tuple[Metric, ...] = (
    Metric("cpu_total_ms", "ms", "resource", True, "CPU total"),
    Metric("cpu_user_ms", "ms", "resource", True, "CPU user"),
    Metric("cpu_system_ms", "ms", "resource", True, "CPU system"),
    Metric("avg_cores", "cores", "resource", True, "average cores"),
    Metric("pss_baseline_bytes", "bytes", "resource", True, "PSS baseline"),
    Metric("pss_peak_bytes", "bytes", "resource", True, "PSS peak (sampled)"),
    Metric("pss_end_bytes", "bytes", "resource", True, "PSS end"),
    Metric("pss_peak_delta_bytes", "bytes", "resource", True, "PSS peak delta"),
    Metric("process_count_baseline", "processes", "resource", False, "processes at baseline"),
    Metric("process_count_peak", "processes", "resource", True, "processes at peak"),
    Metric("process_count_end", "processes", "resource", False, "processes at end"),
    Metric("cgroup_memory_current_bytes", "bytes", "resource", False, "cgroup memory at end"),
    Metric("cgroup_memory_peak_bytes", "bytes", "resource", False, "cgroup memory high-water"),
    Metric("fixture_app_rx_body_bytes", "bytes", "traffic", True, "fixture rx body"),
    Metric("fixture_app_tx_body_bytes", "bytes", "traffic", True, "fixture tx body"),
    Metric("fixture_app_rx_header_bytes", "bytes", "traffic", True, "fixture rx headers"),
    Metric("fixture_app_tx_header_bytes", "bytes", "traffic", True, "fixture tx headers"),
)
METRICS_BY_NAME = {m.name: m for m in METRICS}

COLD_START_METRICS: tuple[Metric, ...] = (
    Metric("ready_ms", "ms", "cold_start", True, "ready"),
    Metric("launch_cpu_ms", "ms", "cold_start", True, "launch CPU"),
    Metric("launch_peak_pss_bytes", "bytes", "cold_start", True, "launch peak PSS"),
)


def form_value(value: Any) -> float | None:
    """A measurement form's value (complete or partial), or a plain number; else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, Mapping) and value.get("status") in PRESENT:
        inner = value.get("value")
        return float(inner) if isinstance(inner, int | float) else None
    return None


def resource_value(row: Row, field: str) -> float | None:
    resource = row.get("resource")
    return form_value(resource.get(field)) if isinstance(resource, Mapping) else None


def traffic_of(row: Row) -> Mapping[str, Any] | None:
    traffic = row.get("traffic")
    if not isinstance(traffic, Mapping) and isinstance(row.get("resource"), Mapping):
        traffic = row["resource"].get("fixture_traffic")
    return traffic if isinstance(traffic, Mapping) else None


def traffic_value(row: Row, field: str) -> float | None:
    traffic = traffic_of(row)
    if traffic is None or traffic.get("available") is not True:
        return None
    return form_value(traffic.get(field))


def quality_flags(row: Row) -> list[str]:
    resource = row.get("resource")
    flags = resource.get("quality_flags") if isinstance(resource, Mapping) else None
    return [str(f) for f in flags] if isinstance(flags, list) else []
