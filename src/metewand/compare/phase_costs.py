"""Where the time and CPU go inside compute attempts: the rows' ``phases`` (issue #16).

Per case x implementation and per accounting group (the implementation's, the evaluator's), each
phase's median wall and median CPU over the measured accepted attempts, and its share of the
group's CPU: the phase's CPU summed over those attempts over the group's total summed over the
same attempts, so the phases and "between marks" of a group add up to 100%. A figure some
attempts lack is counted by reason and never drawn or summed as 0. Rows without a ``phases``
field (runs from before #16, or marks off) give no table at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from metewand.compare import cases, compute_rows

ROLES = ("implementation", "evaluator")
BETWEEN = "between marks"
TOTAL = "total"
# Phase names the compute suite marks (suites/compute/phase_marks.py), for `compare --metric`.
COMPUTE_PHASES = (
    "worker_startup",
    "prepare",
    "integrity_check",
    "execute",
    "evaluator_startup",
    "evaluation",
)
PHASE_FIELDS = {
    "wall_ns": "wall_time_ns",
    "cpu_ns": "cpu_time_ns",
    "memory_peak_bytes": "memory_peak_bytes",  # where marks restart the high-water
}
PHASE_METRICS = tuple(f"phase.{p}.{f}" for p in COMPUTE_PHASES for f in PHASE_FIELDS)


def phases_of(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    found = row.get("phases")
    return found if isinstance(found, Mapping) else None


def _value(form: Any) -> int | None:
    if isinstance(form, Mapping) and form.get("status") in ("complete", "partial"):
        value = form.get("value")
        return value if isinstance(value, int) else None
    return None


def phase_value(row: Mapping[str, Any], metric: str) -> float | None:
    """``phase.<name>.<wall_ns|cpu_ns|memory_peak_bytes>`` of an accepted attempt (None: absent
    or unavailable)."""
    _, name, field = metric.split(".", 2)
    phases = phases_of(row)
    if phases is None or not compute_rows.is_accepted(row):
        return None
    for role in ROLES:
        record = phases.get(role)
        for phase in (record or {}).get("phases", []) if isinstance(record, Mapping) else []:
            if phase.get("name") == name:
                value = _value(phase.get(PHASE_FIELDS[field]))
                return None if value is None else float(value)
    return None


class _Figures:
    """One phase (or between marks / total) of one group over several attempts."""

    def __init__(self) -> None:
        self.wall: list[int] = []
        self.cpu: list[int] = []
        self.partial = 0
        self.unavailable: dict[str, int] = {}

    def add(self, span: Mapping[str, Any]) -> None:
        wall, cpu = _value(span.get("wall_time_ns")), _value(span.get("cpu_time_ns"))
        if wall is not None:
            self.wall.append(wall)
        form = span.get("cpu_time_ns") or {}
        if cpu is None:
            reason = str(form.get("reason", "absent"))
            self.unavailable[reason] = self.unavailable.get(reason, 0) + 1
            return
        self.cpu.append(cpu)
        self.partial += form.get("status") == "partial"

    def to_json(self, group_cpu: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": len(self.cpu),
            "wall_ns_median": int(np.median(self.wall)) if self.wall else None,
            "cpu_ns_median": int(np.median(self.cpu)) if self.cpu else None,
            "cpu_share": round(sum(self.cpu) / group_cpu, 6) if self.cpu and group_cpu else None,
        }
        if self.partial:
            out["partial"] = self.partial  # /proc fallback: the tree walk's figures
        if self.unavailable:
            out["unavailable"] = dict(sorted(self.unavailable.items()))
        return out


def group_block(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One accounting group over the attempts whose CPU total is known."""
    counted = [r for r in records if _value(r["total"].get("cpu_time_ns")) is not None]
    order: list[str] = []
    spans: dict[str, _Figures] = {}
    for record in records:
        for phase in record.get("phases", []):
            if phase["name"] not in spans:
                order.append(phase["name"])
                spans[phase["name"]] = _Figures()
            spans[phase["name"]].add(phase)
        spans.setdefault(BETWEEN, _Figures()).add(record.get("between_marks", {}))
        spans.setdefault(TOTAL, _Figures()).add(record["total"])
    group_cpu = sum(_value(r["total"]["cpu_time_ns"]) or 0 for r in counted)
    names = [*order, BETWEEN, TOTAL]
    return {
        "attempts": len(records),
        "phases": [{"name": n, **spans[n].to_json(group_cpu)} for n in names if n in spans],
    }


def phase_costs(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """Per case x implementation: each group's phase figures; None when no row has phases."""
    groups: dict[tuple[str, str], dict[str, list[Mapping[str, Any]]]] = {}
    missing: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    seen = False
    for row in compute_rows.measured_rows(rows):
        phases = phases_of(row)
        seen = seen or phases is not None
        if phases is None or not compute_rows.is_accepted(row):
            continue
        key = (cases.case_label(cases.case_of(row)), cases.implementation_label(row))
        for role in ROLES:
            record = phases.get(role)
            if isinstance(record, Mapping) and "total" in record:
                groups.setdefault(key, {}).setdefault(role, []).append(record)
            elif isinstance(record, Mapping):
                reasons = missing.setdefault(key, {}).setdefault(role, {})
                reason = str(record.get("reason", "absent"))
                reasons[reason] = reasons.get(reason, 0) + 1
    if not seen:
        return None
    out = []
    for key in sorted(set(groups) | set(missing)):
        block: dict[str, Any] = {"case": key[0], "implementation": key[1], "groups": {}}
        for role in ROLES:
            if role in groups.get(key, {}):
                block["groups"][role] = group_block(groups[key][role])
            elif role in missing.get(key, {}):
                block["groups"][role] = {"unavailable": missing[key][role]}
        out.append(block)
    return out


def table_rows(costs: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """case | implementation | group | phase | n | median wall ms | median CPU ms | CPU share."""
    rows = []
    for block in costs:
        for role, group in block["groups"].items():
            if "phases" not in group:
                why = ", ".join(f"{r} x{n}" for r, n in group["unavailable"].items())
                rows.append(
                    [
                        block["case"],
                        block["implementation"],
                        role,
                        "—",
                        "0",
                        f"unavailable ({why})",
                        "",
                        "",
                    ]
                )
                continue
            for phase in group["phases"]:
                rows.append(
                    [
                        block["case"],
                        block["implementation"],
                        role,
                        phase["name"],
                        str(phase["n"]),
                        _ms(phase["wall_ns_median"]),
                        _cpu_cell(phase),
                        _share(phase["cpu_share"]),
                    ]
                )
    return rows


TABLE_HEADER = (
    "case",
    "implementation",
    "group",
    "phase",
    "n",
    "median wall (ms)",
    "median CPU (ms)",
    "share of group CPU",
)


def _ms(ns: int | None) -> str:
    return "unavailable" if ns is None else f"{ns / 1e6:.3f}"


def _cpu_cell(phase: Mapping[str, Any]) -> str:
    text = _ms(phase["cpu_ns_median"])
    if phase.get("partial"):
        text += f" (partial: process_only x{phase['partial']})"
    if phase.get("unavailable"):
        why = ", ".join(f"{r} x{n}" for r, n in phase["unavailable"].items())
        text += f" (unavailable: {why})"
    return text


def _share(share: float | None) -> str:
    return "unavailable" if share is None else f"{share * 100:.1f}%"
