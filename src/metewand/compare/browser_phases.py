"""Where the time and CPU go inside browser attempts: the rows' ``phases`` (issue #16).

Per task x engine and per scope (the engine's group, the harness process), each phase's median
wall and CPU over the passing attempts and its share of the scope's CPU (``phase_costs``'s
arithmetic: summed phase CPU over summed total, so a scope's phases and "between marks" add up
to 100%). Only passing attempts count: a failed one did a different amount of work.

Across the corpus, per engine, the *top steps*: each step kind's engine CPU (a step's method
with its index dropped, a driver path's op as ``op:<op>``, or a harness phase such as ``scene``
or ``page_create``) summed over
every passing attempt, over those attempts' summed engine CPU ("Runtime.evaluate costs chrome
12% of its CPU"). Rows without phases (runs before #16, ``--no-phase-marks``) give nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from metewand.compare.phase_costs import BETWEEN, PHASE_FIELDS, group_block

SCOPES = ("engine", "harness")
TABLE_HEADER = (
    "task",
    "engine",
    "scope",
    "phase",
    "n",
    "median wall (ms)",
    "median CPU (ms)",
    "share of scope CPU",
)
TOP_HEADER = ("engine", "step", "attempts", "engine CPU (ms, all attempts)", "share of engine CPU")
TOP_STEPS = 8
STEPS = "steps"  # a chart segment: every step of the task, summed per attempt


def phases_of(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    found = row.get("phases")
    return found if isinstance(found, Mapping) else None


def step_kind(phase_name: str) -> str:
    """What a phase is across tasks: a raw-CDP step's method (``step3:`` dropped), a driver op
    as ``op:<op>`` (``op2:click`` -> ``op:click``, apart from any CDP method), else its name."""
    head, sep, rest = phase_name.partition(":")
    if sep and head.startswith("step") and head[4:].isdigit():
        return rest
    if sep and head.startswith("op") and head[2:].isdigit():
        return f"op:{rest}"
    return phase_name


def _value(form: Any) -> int | None:
    if isinstance(form, Mapping) and form.get("status") in ("complete", "partial"):
        value = form.get("value")
        return value if isinstance(value, int) else None
    return None


def _records(rows: Iterable[Mapping[str, Any]], scope: str) -> Iterable[tuple[Any, Any]]:
    """(row, record) of each passing row whose ``scope`` has a phases record."""
    for row in rows:
        phases = phases_of(row)
        if phases is None or row.get("status") != "pass":
            continue
        record = phases.get(scope)
        if isinstance(record, Mapping) and "total" in record:
            yield row, record


def phase_value(row: Mapping[str, Any], metric: str) -> float | None:
    """``phase.<name>.<wall_ns|cpu_ns>`` of the engine's group in a passing attempt; a name may
    hold dots (``phase.step1:Runtime.evaluate.cpu_ns``)."""
    name, _, field = metric.removeprefix("phase.").rpartition(".")
    for _, record in _records([row], "engine"):
        for phase in record.get("phases", []):
            if phase.get("name") == name:
                value = _value(phase.get(PHASE_FIELDS[field]))
                return None if value is None else float(value)
    return None


def engine_cpu_ns(row: Mapping[str, Any]) -> float | None:
    """The engine group's CPU over a passing attempt (its phase record's total), or None."""
    for _, record in _records([row], "engine"):
        value = _value(record["total"].get("cpu_time_ns"))
        return None if value is None else float(value)
    return None


def is_phase_metric(metric: str) -> bool:
    name, _, field = metric.removeprefix("phase.").rpartition(".")
    return metric.startswith("phase.") and bool(name) and field in PHASE_FIELDS


def phase_costs(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """Per task x engine: each scope's phase figures; None when no row has phases."""
    if not any(phases_of(row) is not None for row in rows):
        return None
    groups: dict[tuple[str, str], dict[str, list[Mapping[str, Any]]]] = {}
    missing: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    for row in rows:
        phases = phases_of(row)
        if phases is None or row.get("status") != "pass":
            continue
        key = (str(row.get("task_id")), str(row.get("engine")))
        for scope in SCOPES:
            record = phases.get(scope)
            if isinstance(record, Mapping) and "total" in record:
                groups.setdefault(key, {}).setdefault(scope, []).append(record)
            elif isinstance(record, Mapping):
                reasons = missing.setdefault(key, {}).setdefault(scope, {})
                reason = str(record.get("reason", "absent"))
                reasons[reason] = reasons.get(reason, 0) + 1
    out = []
    for key in sorted(set(groups) | set(missing)):
        block: dict[str, Any] = {"case": key[0], "implementation": key[1], "groups": {}}
        for scope in SCOPES:
            if scope in groups.get(key, {}):
                block["groups"][scope] = group_block(groups[key][scope])
            elif scope in missing.get(key, {}):
                block["groups"][scope] = {"unavailable": missing[key][scope]}
        out.append(block)
    return out


def top_steps(rows: Sequence[Mapping[str, Any]], limit: int = TOP_STEPS) -> dict[str, Any]:
    """Per engine: step kinds by summed engine CPU over passing attempts whose engine CPU is
    known in full (a step with unavailable CPU would leave its share uncounted, not 0)."""
    out: dict[str, Any] = {}
    totals: dict[str, int] = {}
    kinds: dict[str, dict[str, list[int]]] = {}
    for row, record in _records(rows, "engine"):
        spans = [*record.get("phases", []), {"name": BETWEEN, **record.get("between_marks", {})}]
        total = _value(record["total"].get("cpu_time_ns"))
        values = [_value(span.get("cpu_time_ns")) for span in spans]
        if total is None or any(v is None for v in values):
            continue
        engine = str(row.get("engine"))
        totals[engine] = totals.get(engine, 0) + total
        mine = kinds.setdefault(engine, {})
        seen: set[str] = set()
        for span, value in zip(spans, values, strict=True):
            kind = step_kind(str(span["name"]))
            entry = mine.setdefault(kind, [0, 0])
            entry[0] += value or 0
            entry[1] += kind not in seen  # attempts with this kind, once each
            seen.add(kind)
    for engine, by_kind in sorted(kinds.items()):
        ranked = sorted(by_kind.items(), key=lambda kv: -kv[1][0])[:limit]
        out[engine] = {
            "engine_cpu_ns": totals[engine],
            "steps": [
                {
                    "step": kind,
                    "attempts": n,
                    "cpu_ns": cpu,
                    "cpu_share": round(cpu / totals[engine], 6) if totals[engine] else None,
                }
                for kind, (cpu, n) in ranked
            ],
        }
    return out


def top_sentences(top: Mapping[str, Any], limit: int = 3) -> list[str]:
    """ "Runtime.evaluate costs chrome 12% of its CPU, lightpanda 30%", for the kinds that head
    any engine's list (between marks excepted: it is no step)."""
    heads: list[str] = []
    for block in top.values():
        for entry in block["steps"]:
            if entry["step"] != BETWEEN and entry["step"] not in heads:
                heads.append(entry["step"])
                break
    for block in top.values():
        for entry in block["steps"][:limit]:
            if entry["step"] != BETWEEN and entry["step"] not in heads:
                heads.append(entry["step"])
    lines = []
    for kind in heads[:limit]:
        parts = []
        for engine, block in top.items():
            share = next((e["cpu_share"] for e in block["steps"] if e["step"] == kind), None)
            parts.append(f"{engine} {'not in its top steps' if share is None else _pct(share)}")
        first, *rest = parts
        engine, _, figure = first.partition(" ")
        lines.append(f"{kind} costs {engine} {figure} of its CPU" + "".join(f", {p}" for p in rest))
    return lines


def top_rows(top: Mapping[str, Any]) -> list[list[str]]:
    return [
        [engine, e["step"], str(e["attempts"]), f"{e['cpu_ns'] / 1e6:.1f}", _pct(e["cpu_share"])]
        for engine, block in top.items()
        for e in block["steps"]
    ]


def chart_costs(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The engine scope per task x engine with every step summed into one ``steps`` phase per
    attempt: the chart's segments stay few (the table has each step)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row, record in _records(rows, "engine"):
        key = (str(row.get("task_id")), str(row.get("engine")))
        groups.setdefault(key, []).append({**record, "phases": _steps_summed(record["phases"])})
    return [
        {"case": key[0], "implementation": key[1], "groups": {"engine": group_block(records)}}
        for key, records in sorted(groups.items())
    ]


def _steps_summed(phases: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    merged: dict[str, Any] | None = None
    for phase in phases:
        if step_kind(str(phase["name"])) == phase["name"]:
            out.append(dict(phase))
            continue
        if merged is None:
            merged = {
                "name": STEPS,
                "wall_time_ns": phase["wall_time_ns"],
                "cpu_time_ns": phase["cpu_time_ns"],
            }
            out.append(merged)
            continue
        for field in ("wall_time_ns", "cpu_time_ns"):
            merged[field] = _sum(merged[field], phase[field])
    return out


def _sum(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    for form in (a, b):
        if _value(form) is None:
            return dict(form)
    status = "partial" if "partial" in (a["status"], b["status"]) else "complete"
    out = {"status": status, "value": a["value"] + b["value"]}
    if status == "partial":
        out["reason"] = a.get("reason") or b.get("reason")
    return out


def _pct(share: float | None) -> str:
    return "unavailable" if share is None else f"{share * 100:.1f}%"
