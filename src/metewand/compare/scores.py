"""scores.json and scorecard.md: functional pass rates with the counts behind every rate.

Two rates per group: the attempt-level rate (passing attempts / attempts) and the task-level rate
under the all-k rule (a task passes only when all k of its attempts pass; a task with fewer than
k recorded attempts is ``incomplete`` and does not pass). Groups: per engine, per engine x layer,
per engine x subset, and per driver path x engine with the driver's own cost beside the
engine's (``driver_costs``). Output is canonical JSON with no timestamps, so regenerating it from the same
rows gives the same bytes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from metewand import canonical
from metewand.compare import browser_phases, cases, compute_rows
from metewand.compare.driver_costs import driver_engine_table
from metewand.compare.phase_costs import phase_costs
from metewand.runtime import rundir
from metewand.suites.browser.statuses import STATUSES

SCORES_SCHEMA = "metewand_scores/1"
TASK_RULE = "a task passes only when all of its k attempts pass"


def rate(passed: int, total: int) -> float | None:
    """Share rounded to 6 places (stable bytes); None when there is nothing to divide by."""
    return round(passed / total, 6) if total else None


@dataclass
class _Tally:
    """Attempts of one group, and per task the list of attempt statuses."""

    statuses: dict[str, int] = field(default_factory=dict)
    tasks: dict[tuple[str, str, str], list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, task: tuple[str, str, str], status: str) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.tasks[task].append(status)

    def block(self, k: int) -> dict[str, Any]:
        total = sum(self.statuses.values())
        passed = self.statuses.get("pass", 0)
        by_status = {s: self.statuses.get(s, 0) for s in STATUSES}
        for other in sorted(set(self.statuses) - set(STATUSES)):
            by_status[other] = self.statuses[other]
        tasks_passed = incomplete = 0
        for statuses in self.tasks.values():
            if len(statuses) < k:
                incomplete += 1
            elif all(s == "pass" for s in statuses):
                tasks_passed += 1
        return {
            "attempts": {
                "passed": passed,
                "total": total,
                "rate": rate(passed, total),
                "by_status": by_status,
            },
            "tasks": {
                "passed": tasks_passed,
                "total": len(self.tasks),
                "incomplete": incomplete,
                "rate": rate(tasks_passed, len(self.tasks)),
            },
        }


def _task_key(row: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(row.get("layer", "")), str(row.get("subset", "")), str(row.get("task_id", "")))


def infer_k(rows: Iterable[Mapping[str, Any]], manifest: Mapping[str, Any]) -> int:
    k = manifest.get("k")
    if isinstance(k, int) and k >= 1:
        return k
    # browser attempts are numbered from 1; runs written before that numbered them from 0
    numbers = [a for a in (row.get("attempt") for row in rows) if isinstance(a, int)]
    if not numbers:
        return 1
    return max(numbers) + 1 if min(numbers) == 0 else max(max(numbers), 1)


def browser_scores(rows: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
    k = infer_k(rows, manifest)
    by_engine: dict[str, _Tally] = defaultdict(_Tally)
    by_layer: dict[tuple[str, str], _Tally] = defaultdict(_Tally)
    by_subset: dict[tuple[str, str], _Tally] = defaultdict(_Tally)
    for row in rows:  # one pass over the rows
        engine = str(row.get("engine", ""))
        task = _task_key(row)
        status = str(row.get("status", "infra"))
        by_engine[engine].add(task, status)
        by_layer[(engine, task[0])].add(task, status)
        by_subset[(engine, task[1])].add(task, status)
    engines = _engine_order(manifest, by_engine)
    return {
        **peer_scores(rows, manifest),
        "schema": SCORES_SCHEMA,
        "suite": "browser",
        "run_id": str(manifest.get("run_id", "")),
        "k": k,
        "task_rule": TASK_RULE,
        "score_mode": str(manifest.get("score_mode") or "independent"),
        "engines": engines,
        "rows": len(rows),
        "by_engine": {e: by_engine[e].block(k) for e in engines},
        "by_engine_layer": _nested(by_layer, k),
        "by_engine_subset": _nested(by_subset, k),
        # per driver path x engine: attempt pass rate, the adapter's cost beside the engine's
        "by_driver_engine": driver_engine_table(rows),
        **_browser_phase_blocks(rows),
    }


def _browser_phase_blocks(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the time and CPU go (#16): absent for rows recorded without phase marks."""
    costs = browser_phases.phase_costs(rows)
    if costs is None:
        return {}
    return {"phase_costs": costs, "phase_top_steps": browser_phases.top_steps(rows)}


NO_SEMANTIC_MAP = (
    "metewand has no L2 semantic capability map; L2 attempts are counted in layers.L2 only"
)
L1_QUESTION = "Can this protocol/driver route connect, act, and produce verifiable evidence?"


def _pass_counts() -> dict[str, Any]:
    return {"total": 0, "pass": 0, "pass_rate": 0}


def _no_semantics() -> dict[str, Any]:
    empty = {"by_driver": {}, "by_engine": {}, "row_count": 0, "task_count": 0}
    return {
        "available": False,
        "reason": NO_SEMANTIC_MAP,
        "by_engine": {},
        "capabilities": {},
        "diagnostics": dict(empty),
        "driver_cross_checks": dict(empty),
        "pairwise": {},
    }


def peer_scores(rows: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The peer benchmark's scores.json fields, computed the peer's way (attempt-level pass
    counts per layer x subset and layer x engine, failure classes and origins)."""
    layers: dict[str, dict[str, Any]] = {
        "L1": {"by_subset": {}, "by_engine": {}},
        "L2": {"by_subset": {}, "by_engine": {}, "candidate_pairwise": {}},
    }
    classes: Counter[str] = Counter()
    origins: Counter[str] = Counter()
    for row in rows:
        layer = layers.get(str(row.get("layer")))
        if layer is None:
            continue
        subset = str(row.get("subset_id") or row.get("subset"))
        for group in (
            layer["by_subset"].setdefault(subset, _pass_counts()),
            layer["by_engine"].setdefault(str(row.get("engine")), _pass_counts()),
        ):
            group["total"] += 1
            group["pass"] += row.get("status") == "pass"
        failure = row.get("failure")
        if isinstance(failure, Mapping):
            classes[str(failure.get("class") or "infra")] += 1
            if failure.get("origin"):
                origins[str(failure["origin"])] += 1
    for layer in layers.values():
        for section in ("by_subset", "by_engine"):
            for counts in layer[section].values():
                counts["pass_rate"] = counts["pass"] / counts["total"] if counts["total"] else 0
    layers["L2"]["semantic_correctness"] = _no_semantics()
    no_gate = {"passed_tasks": 0, "failed_tasks": 0}  # metewand has no Chrome gate
    return {
        "run_id": str(manifest.get("run_id", "")),
        "bench_id": manifest.get("bench_id") or "metewand_browser",
        "bench_version": manifest.get("bench_version") or "unknown",
        "harness_version": manifest.get("harness_version") or "unknown",
        "score_eligible": bool(manifest.get("score_eligible", True)),
        "layers": layers,
        "evaluation_axes": {
            "protocol_driver_compatibility": {
                "source_layer": "L1",
                "unit": "task_attempt",
                "question": L1_QUESTION,
                "by_subset": layers["L1"]["by_subset"],
                "by_engine": layers["L1"]["by_engine"],
            },
            "web_platform_workflow_semantic_correctness": {
                "source_layer": "L2",
                **_no_semantics(),
            },
        },
        "chrome_baseline": dict(no_gate),
        "chrome_gate": dict(no_gate),
        "failure_classes": dict(sorted(classes.items())),
        "failure_origins": dict(sorted(origins.items())),
        "provenance": {"run_manifest": rundir.MANIFEST},
    }


def _engine_order(manifest: Mapping[str, Any], seen: Mapping[str, Any]) -> list[str]:
    """Selected engines first (even those with no rows), then any others seen, sorted."""
    selected = manifest.get("selected_engines") or manifest.get("engines") or []
    order = [str(e) for e in selected if isinstance(e, str)]
    return order + sorted(set(seen) - set(order))


def _nested(groups: Mapping[tuple[str, str], _Tally], k: int) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for (engine, name), tally in sorted(groups.items()):
        out.setdefault(engine, {})[name] = tally.block(k)
    return out


def compute_scores(
    rows: list[dict[str, Any]], manifest: Mapping[str, Any], reference: str | None = None
) -> dict[str, Any]:
    """Per implementation: measured attempts by status, diagnostic codes, warm-ups apart;
    per case x implementation: the timing statistics of ``cases.case_statistics``.

    Warm-up attempts are counted (and their failures named) but never enter the accepted rate:
    the rate is over measured attempts only.
    """
    groups: dict[str, dict[str, Any]] = {}
    for row in rows:
        group = groups.setdefault(
            compute_rows.implementation_of(row),
            {"statuses": Counter(), "diagnostics": Counter(), "warmups": Counter()},
        )
        status = compute_rows.status_of(row)
        if compute_rows.is_warmup(row):
            group["warmups"][status] += 1
            continue
        group["statuses"][status] += 1
        diagnostic = compute_rows.diagnostic_of(row)
        if diagnostic is not None:
            group["diagnostics"][str(diagnostic["code"])] += 1
    by_impl = {}
    for name in sorted(groups):
        g = groups[name]
        accepted, total = g["statuses"][compute_rows.ACCEPTED], sum(g["statuses"].values())
        by_impl[name] = {
            "accepted": accepted,
            "total": total,
            "rate": rate(accepted, total),
            "by_outcome": {o: g["statuses"][o] for o in sorted(set(g["statuses"]) | {"accepted"})},
            "diagnostics": dict(sorted(g["diagnostics"].items())),
            "warmups": {
                "total": sum(g["warmups"].values()),
                "by_outcome": dict(sorted(g["warmups"].items())),
            },
        }
    out = {
        "schema": SCORES_SCHEMA,
        "suite": "compute",
        "run_id": str(manifest.get("run_id", "")),
        "rows": len(rows),
        "measured_rows": len(compute_rows.measured_rows(rows)),
        "warmup_rows": len(rows) - len(compute_rows.measured_rows(rows)),
        "by_implementation": by_impl,
        "cases": cases.case_statistics(rows, reference or cases.default_reference(manifest)),
    }
    costs = phase_costs(rows)  # rows from before phase marks: no key, scores.json unchanged
    if costs is not None:
        out["phase_costs"] = costs
    return out


def scores_bytes(scores: Mapping[str, Any]) -> bytes:
    """Canonical JSON plus a final newline: the exact bytes of scores.json."""
    return canonical.dumps(scores) + b"\n"
