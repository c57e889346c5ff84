"""``resource_comparison_eligible``: true only when all seven conditions of the contract hold.

The conditions are data (``CONDITIONS``): each has an id, the contract's wording and an
evaluator returning pass/fail with a reason and figures, so a summary lists every one of them.

1. at least two engines selected, and every row's engine is one of them;
2. ``--resource-profile engine``, ``--jobs 1``, ``--k >= 5``;
3. independent score mode with the balanced rotation order (and rows that show it);
4. the all-pass intersection is non-empty;
5. no required CPU / PSS / traffic metric is missing on an intersection row;
6. the host pollution gate passed;
7. the profiler on/off calibration is present and acceptable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from metewand.compare.hosts import split_by_host
from metewand.compare.intersection import Intersection, all_pass_intersection
from metewand.compare.resource_metrics import METRICS
from metewand.compare.run_facts import RunFacts, latest_rows, read_facts
from metewand.runtime.schedule import ENGINE_ORDER_BALANCED, ROTATION_ALGORITHM

MIN_K = 5
REQUIRED_JOBS = 1
MAX_MISSING_LISTED = 100


@dataclass(frozen=True)
class EligibilityInputs:
    facts: RunFacts
    rows: Sequence[Mapping[str, Any]]
    intersection: Intersection
    host_summary: Mapping[str, Any] | None  # host_summary.json content (or a gate verdict)
    calibration: Mapping[str, Any] | None  # compare.calibration.calibrate(...) output


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str
    figures: dict[str, Any]


@dataclass(frozen=True)
class Condition:
    id: str
    title: str
    evaluate: Callable[[EligibilityInputs], Verdict]


def _engines(inp: EligibilityInputs) -> Verdict:
    engines = inp.facts.engines
    strays = sorted({str(r["engine"]) for r in inp.rows} - set(engines))
    problems = []
    if len(engines) < 2:
        problems.append(f"{len(engines)} engine(s) selected; a comparison needs at least two")
    if strays:
        problems.append(f"rows for engines outside the selection: {', '.join(strays)}")
    reason = "; ".join(problems) or f"{len(engines)} engines selected; every row belongs to them"
    return Verdict(not problems, reason, {"selected_engines": engines, "stray_engines": strays})


def _profile_jobs_k(inp: EligibilityInputs) -> Verdict:
    mode, jobs, k = (inp.facts.get(n) for n in ("resource_profile", "jobs", "k"))
    problems = []
    if mode != "engine":
        problems.append(f"resource profile is {mode!r}, needs 'engine'")
    if jobs != REQUIRED_JOBS:
        problems.append(f"jobs={jobs}, needs jobs={REQUIRED_JOBS}")
    if not isinstance(k, int) or k < MIN_K:
        problems.append(f"k={k}, needs k>={MIN_K}")
    reason = "; ".join(problems) or f"profile engine, jobs={jobs}, k={k}"
    return Verdict(not problems, reason, {"resource_profile": mode, "jobs": jobs, "k": k})


def _order_imbalance(rows: Sequence[Mapping[str, Any]], engines: Sequence[str]) -> int | None:
    counts: dict[tuple[str, int], int] = {}
    for row in rows:
        order = row.get("order")
        if isinstance(order, Mapping) and isinstance(order.get("position"), int):
            slot = (str(row["engine"]), int(order["position"]))
            counts[slot] = counts.get(slot, 0) + 1
    if not counts:
        return None
    values = [counts.get((e, p), 0) for e in engines for p in range(len(engines))]
    return max(values) - min(values)


def _independent_balanced(inp: EligibilityInputs) -> Verdict:
    mode = inp.facts.get("score_mode")
    order, algorithm = inp.facts.get("engine_order"), inp.facts.get("engine_order_algorithm")
    imbalance = _order_imbalance(inp.rows, inp.facts.engines)
    problems = []
    if mode not in ("independent", "peer-compatible"):  # both score engines independently
        problems.append(f"score mode is {mode!r}, needs 'independent' or 'peer-compatible'")
    if order != ENGINE_ORDER_BALANCED or algorithm != ROTATION_ALGORITHM:
        problems.append(f"engine order {order!r}/{algorithm!r}, needs {ENGINE_ORDER_BALANCED}")
    if imbalance is not None and imbalance > 1:
        problems.append(f"rows show engine-position counts differing by {imbalance} (max 1)")
    reason = "; ".join(problems) or f"independent mode, {ENGINE_ORDER_BALANCED} ({algorithm})"
    figures = {"score_mode": mode, "engine_order": order, "engine_order_algorithm": algorithm}
    figures["position_imbalance"] = imbalance
    return Verdict(not problems, reason, figures)


def _intersection_nonempty(inp: EligibilityInputs) -> Verdict:
    n = len(inp.intersection.keys)
    reason = f"{n} task-attempts where every engine passed" if n else "intersection is empty"
    return Verdict(n > 0, reason, {"attempts": n})


def _metrics_complete(inp: EligibilityInputs) -> Verdict:
    missing: list[dict[str, Any]] = []
    required = [m for m in METRICS if m.required]
    for engine, rows in inp.intersection.rows_by_engine.items():
        columns = inp.intersection.metric_columns(engine)  # read once, shared with the summary
        # gaps are rare: find them per column at C speed, then list them in row, metric order
        gaps = sorted(
            (i, j)
            for j, metric in enumerate(required)
            if None in columns[metric.name]
            for i, value in enumerate(columns[metric.name])
            if value is None
        )
        for i, j in gaps:
            missing.append({"key": rows[i]["key"], "engine": engine, "metric": required[j].name})
    if not inp.intersection.keys:
        return Verdict(False, "no intersection rows to check", {"missing": 0})
    reason = (
        f"{len(missing)} required metric value(s) missing on intersection rows"
        if missing
        else "every required CPU/PSS/traffic metric present on every intersection row"
    )
    figures = {"missing": len(missing), "examples": missing[:MAX_MISSING_LISTED]}
    return Verdict(not missing, reason, figures)


def _host_gate(inp: EligibilityInputs) -> Verdict:
    summary = inp.host_summary
    if not summary:
        return Verdict(False, "host telemetry summary is missing", {})
    gate = summary.get("gate", summary)
    passed = bool(gate.get("passed"))
    flags = [t["condition"] for t in gate.get("triggered", [])]
    reason = "host pollution gate passed" if passed else "host polluted: " + ", ".join(flags)
    return Verdict(passed, reason, {"triggered": flags})


def _calibration(inp: EligibilityInputs) -> Verdict:
    cal = inp.calibration
    if not cal:
        return Verdict(False, "profiler on/off calibration is missing", {})
    failed = list(cal.get("failed_checks", []))
    reasons = [c["reason"] for c in cal.get("checks", []) if not c["passed"]]
    reason = (
        (
            "interleaved calibration (unprofiled twins in this run) acceptable"
            if cal.get("mode") == "interleaved"
            else f"calibration against {cal.get('baseline_run')} acceptable"
        )
        if cal.get("acceptable")
        else "calibration failed: " + "; ".join(reasons)
    )
    return Verdict(bool(cal.get("acceptable")), reason, {"failed_checks": failed})


def _conditions(inputs: EligibilityInputs) -> list[dict[str, Any]]:
    results = []
    for condition in CONDITIONS:
        verdict = condition.evaluate(inputs)
        results.append(
            {
                "id": condition.id,
                "title": condition.title,
                "passed": verdict.passed,
                "reason": verdict.reason,
                "figures": verdict.figures,
            }
        )
    return results


def _one_host(
    facts: RunFacts,
    by_host: Mapping[str, Sequence[Mapping[str, Any]]],
    host_summaries: Mapping[str, Mapping[str, Any]],
    calibration: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The pooled rows fail; each host is judged on its own rows and its own telemetry."""
    per_host = {}
    for host, host_rows in by_host.items():
        inter = all_pass_intersection(host_rows, facts.engines)
        summary = host_summaries.get(host)
        results = _conditions(EligibilityInputs(facts, host_rows, inter, summary, calibration))
        per_host[host] = {
            "rows": len(host_rows),
            "resource_comparison_eligible": all(r["passed"] for r in results),
            "ineligibility_reasons": [r["reason"] for r in results if not r["passed"]],
        }
    eligible = sorted(h for h, v in per_host.items() if v["resource_comparison_eligible"])
    return {
        "id": "one_host",
        "title": "every row from one host (rows of several Dask hosts are judged per host)",
        "passed": False,
        "reason": (
            f"rows from {len(by_host)} hosts ({', '.join(by_host)}) would be pooled into one "
            f"median; eligible per host: {', '.join(eligible) or 'none'}"
        ),
        "figures": {"per_host": per_host},
    }


CONDITIONS: tuple[Condition, ...] = (
    Condition("engines", "at least two selected engines; every row's engine selected", _engines),
    Condition("profile_jobs_k", "resource profile engine, jobs=1, k>=5", _profile_jobs_k),
    Condition("independent_balanced", "independent mode, balanced rotation", _independent_balanced),
    Condition("intersection_nonempty", "all-pass intersection non-empty", _intersection_nonempty),
    Condition("metrics_complete", "no gaps in intersection CPU/PSS/traffic", _metrics_complete),
    Condition("host_gate", "host pollution gate passes", _host_gate),
    Condition("calibration", "profiler on/off A/B calibration acceptable", _calibration),
)


def evaluate(
    manifest: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    host_summary: Mapping[str, Any] | None,
    calibration: Mapping[str, Any] | None,
    intersection: Intersection | None = None,
    host_summaries: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """``{resource_comparison_eligible, conditions: [{id, title, passed, reason, figures}]}``.

    Rows of several Dask hosts (``placement.host``) add an eighth condition, ``one_host``, that
    fails: their medians would pool machines. Its figures hold each host's own verdict (the seven
    conditions over that host's rows, with that host's telemetry summary from
    ``host_summaries``), so a comparison is eligible per host, never over the pool."""
    facts = read_facts(manifest)
    rows = latest_rows(rows)
    inter = intersection or all_pass_intersection(rows, facts.engines)
    results = _conditions(EligibilityInputs(facts, rows, inter, host_summary, calibration))
    by_host = split_by_host(rows)
    if len(by_host) > 1:
        results.append(_one_host(facts, by_host, host_summaries or {}, calibration))
    return {
        "resource_comparison_eligible": all(r["passed"] for r in results),
        "ineligibility_reasons": [r["reason"] for r in results if not r["passed"]],
        "conditions": results,
    }
