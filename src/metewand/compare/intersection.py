"""The all-pass intersection: task-attempts where EVERY selected engine passed.

Resource figures are compared only there, so an engine that fails fast is not mistaken for
an efficient one. Every other row keeps its raw data and is counted in
``excluded.status_by_engine``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from metewand.compare.resource_metrics import read_columns
from metewand.compare.run_facts import latest_rows

TaskAttempt = tuple[str, int]


@dataclass(frozen=True)
class Intersection:
    engines: tuple[str, ...]
    keys: tuple[TaskAttempt, ...]  # sorted (task_id, attempt)
    rows_by_engine: dict[str, list[Mapping[str, Any]]]  # intersection rows, in key order
    excluded_status_by_engine: dict[str, dict[str, int]]
    excluded_task_attempts: int
    outside_selection: int  # rows whose engine is not a selected engine
    _columns: dict[str, dict[str, list[float | None]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def metric_columns(self, engine: str) -> dict[str, list[float | None]]:
        """``read_columns`` of the engine's intersection rows (every metric), read once and
        shared by eligibility, the resource summary and the efficiency map."""
        if engine not in self._columns:
            self._columns[engine] = read_columns(self.rows_by_engine.get(engine, []))
        return self._columns[engine]

    def to_json(self) -> dict[str, Any]:
        return {
            "all_pass_intersection": {
                "attempts": len(self.keys),
                "tasks": len({task for task, _ in self.keys}),
                "keys": [{"task_id": t, "attempt": a} for t, a in self.keys],
            },
            "excluded": {
                "task_attempts": self.excluded_task_attempts,
                "status_by_engine": self.excluded_status_by_engine,
                "rows_outside_selected_engines": self.outside_selection,
            },
        }


def task_attempt(row: Mapping[str, Any]) -> TaskAttempt:
    return (str(row["task_id"]), int(row["attempt"]))


def all_pass_intersection(
    rows: Sequence[Mapping[str, Any]], engines: Sequence[str]
) -> Intersection:
    selected = tuple(engines)
    by_key: dict[TaskAttempt, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    outside = 0
    for row in latest_rows(rows):
        if row["engine"] not in selected:
            outside += 1
            continue
        by_key[task_attempt(row)][str(row["engine"])] = row
    keys = tuple(
        sorted(
            key
            for key, per_engine in by_key.items()
            if selected and all(per_engine.get(e, {}).get("status") == "pass" for e in selected)
        )
    )
    inside = set(keys)
    excluded: dict[str, Counter[str]] = {e: Counter() for e in selected}
    for key, per_engine in by_key.items():
        if key in inside:
            continue
        for engine, row in per_engine.items():
            excluded[engine][str(row["status"])] += 1
    return Intersection(
        engines=selected,
        keys=keys,
        rows_by_engine={e: [by_key[k][e] for k in keys] for e in selected},
        excluded_status_by_engine={e: dict(sorted(c.items())) for e, c in excluded.items()},
        excluded_task_attempts=len(by_key) - len(keys),
        outside_selection=outside,
    )


def functional_outcomes(
    rows: Sequence[Mapping[str, Any]], engines: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per engine: attempts, passes, pass rate and status counts over ALL its rows."""
    counts: dict[str, Counter[str]] = {e: Counter() for e in engines}
    for row in latest_rows(rows):
        if row["engine"] in counts:
            counts[str(row["engine"])][str(row["status"])] += 1
    out: dict[str, dict[str, Any]] = {}
    for engine, c in counts.items():
        total = sum(c.values())
        out[engine] = {
            "attempts": total,
            "pass": c["pass"],
            "pass_rate": c["pass"] / total if total else None,
            "status_counts": dict(sorted(c.items())),
        }
    return out
