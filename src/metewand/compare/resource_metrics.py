"""The per-attempt resource metrics a comparison aggregates, and how to read them from a row.

``results.jsonl[].resource`` is an ``abb_engine_resources/1`` object: measured values are
measurement forms (``{"status", "value"?, "reason"?}``), derived ratios (``avg_cores``) are plain
numbers or null. Fixture traffic is the row's ``traffic`` (``abb_fixture_traffic/1``) or
``resource.fixture_traffic``; it counts only when ``available`` is true. A value that is
missing or ``unavailable`` reads as None — never as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

# the resource figures of a browser attempt a comparison (and the history) reads
BROWSER_RESOURCE_METRICS = (
    "cpu_total_ms",
    "cpu_user_ms",
    "cpu_system_ms",
    "pss_peak_bytes",
    "pss_peak_delta_bytes",
    "cgroup_memory_peak_bytes",
    "process_count_peak",
)

Row = Mapping[str, Any]
PRESENT = ("complete", "partial")
_NO_FIELDS: Mapping[str, Any] = {}  # stands in for a missing object: every field reads None


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


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    # rows come from JSON, so nearly every mapping is a plain dict: test that exactly first,
    # the ABC check (``isinstance(x, Mapping)``) costs several times more per call
    return type(value) is dict or isinstance(value, Mapping)


def form_value(value: Any) -> float | None:
    """A measurement form's value (complete or partial), or a plain number; else None."""
    kind = type(value)
    if kind is dict:  # the common case: a form parsed from JSON with a plain number inside
        status = value.get("status")
        if status == "complete" or status == "partial":
            inner = value.get("value")
            inner_kind = type(inner)
            if inner_kind is float or inner_kind is int:
                return float(inner)
            return float(inner) if isinstance(inner, int | float) else None
        return None
    if kind is float or kind is int:  # the common plain numbers (bool is not int by type)
        return float(value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if _is_mapping(value) and value.get("status") in PRESENT:
        inner = value.get("value")
        return float(inner) if isinstance(inner, int | float) else None
    return None


def resource_of(row: Row) -> Any:
    """A row's resource record in metewand's form layout (``resource_forms``) when the row has
    one, else its ``resource`` (a peer-layout record of plain numbers, or an older row)."""
    forms = row.get("resource_forms")
    return forms if _is_mapping(forms) else row.get("resource")


def read_columns(
    rows: Sequence[Row], metrics: Sequence[Metric] = METRICS
) -> dict[str, list[float | None]]:
    """``{metric name: [value of each row]}``, equal to ``metric.read(row)`` for each pair.

    A report reads ~17 metrics from tens of thousands of rows; this looks each row's resource
    and traffic objects up once instead of once per metric.
    """
    out: dict[str, list[float | None]] = {m.name: [] for m in metrics}
    # (field, append) pairs bound once: the loop below runs rows x metrics times
    traffic_fields = [(m.name, out[m.name].append) for m in metrics if m.source == "traffic"]
    resource_fields = [(m.name, out[m.name].append) for m in metrics if m.source != "traffic"]
    for row in rows:
        resource = resource_of(row)
        if not _is_mapping(resource):
            resource = _NO_FIELDS
        for name, append in resource_fields:
            append(form_value(resource.get(name)))
        if traffic_fields:
            traffic = traffic_of(row)
            if traffic is None or traffic.get("available") is not True:
                traffic = _NO_FIELDS
            for name, append in traffic_fields:
                append(form_value(traffic.get(name)))
    return out


def resource_value(row: Row, field: str) -> float | None:
    resource = resource_of(row)
    return form_value(resource.get(field)) if _is_mapping(resource) else None


def traffic_of(row: Row) -> Mapping[str, Any] | None:
    traffic = row.get("traffic")
    if not _is_mapping(traffic) and _is_mapping(resource_of(row)):
        traffic = resource_of(row).get("fixture_traffic")
    return traffic if _is_mapping(traffic) else None


def traffic_value(row: Row, field: str) -> float | None:
    traffic = traffic_of(row)
    if traffic is None or traffic.get("available") is not True:
        return None
    return form_value(traffic.get(field))


def quality_flags(row: Row) -> list[str]:
    resource = resource_of(row)
    flags = resource.get("quality_flags") if _is_mapping(resource) else None
    return [str(f) for f in flags] if isinstance(flags, list) else []
