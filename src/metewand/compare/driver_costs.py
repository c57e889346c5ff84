"""Per driver path x engine: pass rates, and the driver's own cost beside the engine's.

A browser row names its ``driver_path`` (``playwright``, ``selenium``, ..., or ``raw_cdp`` and
``node_cdp_probe:<script>`` for the tasks metewand drives itself). A driver path's adapter runs
in its own accounting group, so its row carries ``driver_resources`` (harness scope): the
adapter tree's CPU and peak memory. The engine's cost is the row's ``resource`` record (engine
scope), present only in a profiled run. Costs are medians over the passing attempts (a failed
attempt did a different amount of work), each with its n; a cost nobody measured says why.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from metewand.compare import stats
from metewand.compare.fmt import bytes_text, ms_text, rate_text

# (name in the table, where in the row, the row's record key)
DRIVER_METRICS: Final = (
    ("driver_cpu_ms", "driver_resources", "cpu_total_ms"),
    ("driver_peak_bytes", "driver_resources", "peak_memory_bytes"),
)
ENGINE_METRICS: Final = (
    ("engine_cpu_ms", "resource", "cpu_total_ms"),
    ("engine_pss_peak_bytes", "resource", "pss_peak_bytes"),
)
IN_PROCESS: Final = "in-process driver (metewand's own CDP client): no adapter process"
NOT_PROFILED: Final = "run not profiled"


def driver_path_of(row: Mapping[str, Any]) -> str:
    """The row's driver path; rows written before driver paths existed name their kind."""
    return str(row.get("driver_path") or row.get("driver") or "unknown")


def _value(row: Mapping[str, Any], record: str, key: str) -> float | None:
    block = row.get(record)
    value = block.get(key) if isinstance(block, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _cost(rows: list[Mapping[str, Any]], metrics: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    passing = [r for r in rows if r.get("status") == "pass"]
    out: dict[str, Any] = {}
    for name, record, key in metrics:
        values = [v for v in (_value(r, record, key) for r in passing) if v is not None]
        out[name] = {"median": stats.median(values), "n": len(values)}
    return out


def _why_missing(rows: list[Mapping[str, Any]], record: str) -> str:
    if not any(r.get("status") == "pass" for r in rows):
        return "no passing attempt"
    if record == "driver_resources" and not any(isinstance(r.get(record), Mapping) for r in rows):
        return IN_PROCESS
    if record == "resource" and not any(isinstance(r.get(record), Mapping) for r in rows):
        return NOT_PROFILED
    reasons = {
        str(reason)
        for r in rows
        if isinstance(r.get(record), Mapping)
        for reason in (r[record].get("unavailable") or {}).values()
    }
    return ", ".join(sorted(reasons)) or "not measured"


def driver_engine_table(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """driver path -> engine -> attempts (passed/total/rate/by status), driver and engine cost."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(driver_path_of(row), str(row.get("engine", "")))].append(row)
    out: dict[str, dict[str, Any]] = {}
    for (path, engine), members in sorted(groups.items()):
        statuses: dict[str, int] = {}
        for member in members:
            status = str(member.get("status", "infra"))
            statuses[status] = statuses.get(status, 0) + 1
        passed = statuses.get("pass", 0)
        driver_cost = _cost(members, DRIVER_METRICS)
        engine_cost = _cost(members, ENGINE_METRICS)
        missing = {
            name: _why_missing(members, record)
            for (name, record, _), cost in (
                *zip(DRIVER_METRICS, driver_cost.values(), strict=True),
                *zip(ENGINE_METRICS, engine_cost.values(), strict=True),
            )
            if cost["median"] is None
        }
        out.setdefault(path, {})[engine] = {
            "attempts": {
                "passed": passed,
                "total": len(members),
                "rate": round(passed / len(members), 6) if members else None,
                "by_status": dict(sorted(statuses.items())),
            },
            "driver_cost": driver_cost,
            "engine_cost": engine_cost,
            "unavailable": missing,
        }
    return out


DRIVER_NOTE: Final = (
    "Attempts per driver path and engine. The driver's cost is its adapter process tree "
    "(harness scope, its own accounting group); the engine's is the engine's process tree "
    "(engine scope, profiled runs only). Medians over passing attempts, n beside each."
)
TABLE_HEAD: Final = [
    "driver path",
    "engine",
    "attempts passed",
    "statuses",
    "driver CPU (median)",
    "driver peak memory (median)",
    "engine CPU (median)",
    "engine peak PSS (median)",
]


def _cell(block: Mapping[str, Any], cost: str, name: str, show: Any) -> str:
    entry = block[cost][name]
    if entry["median"] is None:
        return f"unavailable ({block['unavailable'].get(name, 'not measured')})"
    return f"{show(entry['median'])} (n={entry['n']})"


def table_rows(table: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    """The rows of the per driver x engine table, as text cells (counts beside every rate)."""
    out = []
    for path, engines in table.items():
        for engine, block in engines.items():
            att = block["attempts"]
            statuses = ", ".join(f"{s} {n}" for s, n in att["by_status"].items() if n)
            out.append(
                [
                    path,
                    engine,
                    rate_text(att["passed"], att["total"], att["rate"]),
                    statuses,
                    _cell(block, "driver_cost", "driver_cpu_ms", ms_text),
                    _cell(block, "driver_cost", "driver_peak_bytes", bytes_text),
                    _cell(block, "engine_cost", "engine_cpu_ms", ms_text),
                    _cell(block, "engine_cost", "engine_pss_peak_bytes", bytes_text),
                ]
            )
    return out


def summary(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One group's pass counts and the driver's median cost over its passing attempts."""
    passed = sum(1 for r in rows if r.get("status") == "pass")
    cost = _cost(rows, DRIVER_METRICS)
    return {
        "passed": passed,
        "total": len(rows),
        "rate": round(passed / len(rows), 6) if rows else None,
        **{name: entry["median"] for name, entry in cost.items()},
    }


def rollup(
    rows: list[dict[str, Any]], name_of: Callable[[Mapping[str, Any]], str]
) -> dict[tuple[str, str], dict[str, Any]]:
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(name_of(row), str(row.get("engine", "")))].append(row)
    return {key: summary(members) for key, members in groups.items()}


ROLLUP_HEAD: Final = [
    "engine",
    "BASE passed",
    "NEW passed",
    "BASE driver CPU",
    "NEW driver CPU",
    "BASE driver peak",
    "NEW driver peak",
]


def rollup_rows(entries: list[Mapping[str, Any]], name: str) -> list[list[str]]:
    """Text cells of one compare rollup (a group absent from a run says so)."""

    def passed(side: Mapping[str, Any] | None) -> str:
        if side is None:
            return "absent"
        return rate_text(side["passed"], side["total"], side["rate"])

    def cost(side: Mapping[str, Any] | None, key: str, show: Any) -> str:
        if side is None:
            return "absent"
        value = side.get(key)
        return show(value, "no passing adapter attempt") if value is None else show(value)

    return [
        [
            str(e[name]),
            str(e["engine"]),
            passed(e["base"]),
            passed(e["new"]),
            cost(e["base"], "driver_cpu_ms", ms_text),
            cost(e["new"], "driver_cpu_ms", ms_text),
            cost(e["base"], "driver_peak_bytes", bytes_text),
            cost(e["new"], "driver_peak_bytes", bytes_text),
        ]
        for e in entries
    ]
