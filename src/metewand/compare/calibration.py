"""Observer-effect calibration: the same matrix run profiler-off (A) and profiler-on (B).

Rows are paired by ``(task_id, engine, attempt)``. Per pair, with ``d`` = ``duration_ms``:

- duration overhead % = ``(d_B / d_A - 1) * 100``;
- collection-wall overhead % = ``(w_B / w_A - 1) * 100`` where ``w`` is ``collection_wall_ms``:
  the wall time of the attempt from the point where the profiler's baseline scan begins to the
  point where its end scan has finished (scans included). A baseline run records the same
  window with no scans in it, so the difference is the observer's cost. When a baseline row
  has no ``collection_wall_ms`` its ``duration_ms`` stands in (the peer benchmark's rule), and
  the figures say how many pairs needed that.

Supplementary, never gated: attempt-span overhead % over ``attempt_span_ms`` (window start to the
attempt's CPU reading, so cleanup and the settle wait included): how much longer the run takes
per attempt with the profiler on.

Both medians must stay within the threshold overall and for every engine; statuses may differ
in at most 1% of pairs; the pairing must be complete in both directions; and the provenance
facts (corpus, seed, k, jobs, engines and harness pins, runner source, host, reuse, engine
order, settle limit) must be identical, with the differing ones named.

``--resource-calibration interleaved`` (``calibrate_interleaved``): the pairs come from one run,
each profiled attempt beside its unprofiled twin (``calibration_twin`` rows), back to back on the
same engine process with the order alternating per engine. The same figures and limits apply;
provenance and modes are one run's, so those two checks have nothing to compare. A host whose
speed drifts over minutes moves both twins alike, so the drift cancels out of every pair.
A pair whose halves ran on two engine processes (a kill between them and ``--resume``, or an
engine relaunched between them) is counted under ``not_same_process``, and a pair holding the
first attempt on a fresh engine process (a cold start its twin does not pay) under
``first_on_launch``; neither gives a figure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from metewand.compare.run_facts import (
    MISSING,
    RunFacts,
    latest_rows,
    manifest_data,
    read_facts,
)

CALIBRATION_SCHEMA = "metewand_calibration/1"
Row = Mapping[str, Any]
PairKey = tuple[str, str, int]

PROVENANCE_FACTS = (
    "corpus",
    "seed",
    "k",
    "jobs",
    "selected_engines",
    "score_mode",
    "engine_pins",
    "harness_pins",
    "runner_source",
    "host",
    "reuse",
    "engine_order",
    "engine_order_algorithm",
    "settle_limit_ms",
)


@dataclass(frozen=True)
class CalibrationThresholds:
    max_duration_overhead_pct: float = 10.0
    max_collection_wall_overhead_pct: float = 10.0
    max_status_mismatch_rate: float = 0.01

    @classmethod
    def from_observer_effect_pct(cls, pct: float) -> CalibrationThresholds:
        """``--resource-max-observer-effect-pct`` sets both overhead limits."""
        return cls(max_duration_overhead_pct=pct, max_collection_wall_overhead_pct=pct)


def collection_wall_ms(row: Row) -> float | None:
    value = row.get("collection_wall_ms")
    resource = row.get("resource_forms") or row.get("resource")
    if value is None and isinstance(resource, Mapping):
        value = resource.get("collection_wall_ms")
    return float(value) if isinstance(value, int | float) else None


def _pct(after: float | None, before: float | None) -> float | None:
    if after is None or before is None or before <= 0:
        return None
    return (after / before - 1.0) * 100.0


@dataclass
class Pair:
    engine: str
    duration_pct: float | None
    wall_pct: float | None
    wall_fallback: bool
    status_mismatch: bool
    span_pct: float | None = None


def _pair(a: Row, b: Row) -> Pair:
    wall_a = collection_wall_ms(a)
    fallback = wall_a is None
    if fallback:
        wall_a = _number(a.get("duration_ms"))
    return Pair(
        engine=str(b["engine"]),
        duration_pct=_pct(_number(b.get("duration_ms")), _number(a.get("duration_ms"))),
        wall_pct=_pct(collection_wall_ms(b), wall_a),
        wall_fallback=fallback,
        status_mismatch=a.get("status") != b.get("status"),
        span_pct=_pct(_number(b.get("attempt_span_ms")), _number(a.get("attempt_span_ms"))),
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _key(row: Row) -> PairKey:
    return (str(row["task_id"]), str(row["engine"]), int(row["attempt"]))


def _figures(pairs: Sequence[Pair]) -> dict[str, Any]:
    durations = [p.duration_pct for p in pairs if p.duration_pct is not None]
    walls = [p.wall_pct for p in pairs if p.wall_pct is not None]
    spans = [p.span_pct for p in pairs if p.span_pct is not None]

    def q(values: list[float], pct: float) -> float | None:
        return float(np.percentile(values, pct)) if values else None

    mismatches = sum(p.status_mismatch for p in pairs)
    return {
        "pairs": len(pairs),
        "duration_pairs": len(durations),
        "median_duration_overhead_pct": q(durations, 50),
        "p95_duration_overhead_pct": q(durations, 95),
        "collection_wall_pairs": len(walls),
        "collection_wall_from_duration": sum(p.wall_fallback for p in pairs),
        "median_collection_wall_overhead_pct": q(walls, 50),
        "p95_collection_wall_overhead_pct": q(walls, 95),
        "status_mismatches": mismatches,
        "status_mismatch_rate": mismatches / len(pairs) if pairs else None,
        "attempt_span_pairs": len(spans),
        "median_attempt_span_overhead_pct": q(spans, 50),
    }


def _check(name: str, passed: bool, reason: str, figures: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "passed": passed, "reason": reason, "figures": figures}


def _pairing_check(
    a: dict[PairKey, Row], b: dict[PairKey, Row], engines: Sequence[str]
) -> dict[str, Any]:
    only_b, only_a = sorted(set(b) - set(a)), sorted(set(a) - set(b))
    engines_a = sorted({k[1] for k in a})
    engines_b = sorted({k[1] for k in b})
    figures = {
        "matched": len(set(a) & set(b)),
        "only_in_profiled": len(only_b),
        "only_in_baseline": len(only_a),
        "examples_unmatched": [list(k) for k in (only_b + only_a)[:5]],
        "engines_profiled": engines_b,
        "engines_baseline": engines_a,
    }
    problems = []
    if not figures["matched"]:
        problems.append("no attempt is present in both runs")
    if only_b or only_a:
        problems.append(f"{len(only_b)} profiled and {len(only_a)} baseline attempts unmatched")
    if engines_a != sorted(engines) or engines_b != sorted(engines):
        problems.append(f"engine sets differ from selected engines {sorted(engines)}")
    reason = "; ".join(problems) or f"all {figures['matched']} attempts paired both ways"
    return _check("fully_paired", not problems, reason, figures)


def _provenance_check(fa: RunFacts, fb: RunFacts) -> dict[str, Any]:
    differing, missing = [], []
    for name in PROVENANCE_FACTS:
        va, vb = fa.values.get(name, MISSING), fb.values.get(name, MISSING)
        if va is MISSING or vb is MISSING or va in (None, "", {}, []):
            missing.append(name)
        elif va != vb:
            differing.append(name)
    problems = []
    if differing:
        problems.append("differ: " + ", ".join(differing))
    if missing:
        problems.append("not recorded in both manifests: " + ", ".join(missing))
    reason = "; ".join(problems) or "all provenance facts identical"
    figures = {"compared": list(PROVENANCE_FACTS), "differing": differing, "missing": missing}
    return _check("provenance_identical", not problems, reason, figures)


def _modes_check(fa: RunFacts, fb: RunFacts) -> dict[str, Any]:
    """The baseline is the document's profiler-off side: mode ``baseline`` and no phase marks
    (marks read counters in every attempt; a marked baseline would hide the marks' cost of the
    profiled side from the A/B). A manifest without the fact predates marks: it took none."""
    mode_a, mode_b = fa.get("resource_profile"), fb.get("resource_profile")
    marks_a = bool(fa.get("phase_marks", False))
    ok = mode_a == "baseline" and mode_b == "engine" and not marks_a
    reason = f"baseline run mode {mode_a!r}, profiled run mode {mode_b!r}"
    if not (mode_a == "baseline" and mode_b == "engine"):
        reason += " (need 'baseline' and 'engine')"
    if marks_a:
        reason += "; the baseline ran with --phase-marks (its attempts were observed)"
    figures = {
        "baseline": mode_a,
        "profiled": mode_b,
        "baseline_phase_marks": marks_a,
        "profiled_phase_marks": bool(fb.get("phase_marks", False)),
    }
    return _check("profile_modes", ok, reason, figures)


def _overhead_checks(
    pairs: Sequence[Pair], th: CalibrationThresholds, scope: str
) -> list[dict[str, Any]]:
    f = _figures(pairs)
    limits: list[tuple[str, str, str, float]] = [
        (
            "duration",
            "median_duration_overhead_pct",
            "duration_pairs",
            th.max_duration_overhead_pct,
        ),
        (
            "collection_wall",
            "median_collection_wall_overhead_pct",
            "collection_wall_pairs",
            th.max_collection_wall_overhead_pct,
        ),
    ]
    checks = []
    for label, field, count_field, limit in limits:
        median, count = f[field], f[count_field]
        complete = count == f["pairs"] and count > 0
        ok = complete and median is not None and median <= limit
        reason = (
            f"{scope} median {label} overhead {median:+.2f}% (limit {limit}%)"
            if median is not None
            else f"{scope}: no {label} pair has both values"
        )
        if not complete:
            reason += f"; only {count} of {f['pairs']} pairs have both {label} values"
        checks.append(_check(f"{label}_overhead[{scope}]", ok, reason, f))
    return checks


def _status_check(pairs: Sequence[Pair], th: CalibrationThresholds) -> dict[str, Any]:
    f = _figures(pairs)
    rate = f["status_mismatch_rate"]
    ok = rate is not None and rate <= th.max_status_mismatch_rate
    reason = (
        f"{f['status_mismatches']} of {f['pairs']} pairs changed status "
        f"(rate {rate:.4f}, limit {th.max_status_mismatch_rate})"
        if rate is not None
        else "no pairs"
    )
    return _check("status_mismatch_rate", ok, reason, f)


def _by_engine(pairs: Sequence[Pair]) -> dict[str, list[Pair]]:
    by_engine: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        by_engine[p.engine].append(p)
    return by_engine


def _verdict(
    head: dict[str, Any],
    checks: list[dict[str, Any]],
    pairs: Sequence[Pair],
    engines: Sequence[str],
    th: CalibrationThresholds,
) -> dict[str, Any]:
    """The record both modes write: ``head``'s fields, the shared status and overhead checks
    after ``checks`` (overall, then per engine), the verdict and the figures."""
    by_engine = _by_engine(pairs)
    checks = [*checks, _status_check(pairs, th), *_overhead_checks(pairs, th, "overall")]
    for engine in engines:
        checks += _overhead_checks(by_engine.get(engine, []), th, engine)
    return {
        "schema": CALIBRATION_SCHEMA,
        **head,
        "thresholds": asdict(th),
        "acceptable": all(c["passed"] for c in checks),
        "failed_checks": [c["name"] for c in checks if not c["passed"]],
        "checks": checks,
        "overall": _figures(pairs),
        "by_engine": {e: _figures(by_engine.get(e, [])) for e in engines},
    }


def calibrate(
    baseline_manifest: Mapping[str, Any],
    baseline_rows: Sequence[Row],
    profiled_manifest: Mapping[str, Any],
    profiled_rows: Sequence[Row],
    thresholds: CalibrationThresholds | None = None,
) -> dict[str, Any]:
    """Every check with pass/fail, reason and figures; ``acceptable`` when all pass."""
    th = thresholds or CalibrationThresholds()
    fa, fb = read_facts(baseline_manifest), read_facts(profiled_manifest)
    a = {_key(r): r for r in latest_rows(baseline_rows)}
    b = {_key(r): r for r in latest_rows(profiled_rows)}
    pairs = [_pair(a[k], b[k]) for k in sorted(set(a) & set(b))]
    head = {"mode": "separate", "baseline_run": fa.run_id, "profiled_run": fb.run_id}
    checks = [_pairing_check(a, b, fb.engines), _provenance_check(fa, fb), _modes_check(fa, fb)]
    return _verdict(head, checks, pairs, fb.engines, th)


def calibrate_interleaved(
    manifest: Mapping[str, Any],
    rows: Sequence[Row],
    twins: Sequence[Row],
    thresholds: CalibrationThresholds | None = None,
) -> dict[str, Any]:
    """The observer checks from one run's pairs: ``twins`` (unprofiled) against ``rows``.

    Only pairs of two warm attempts on one engine process give figures. Left out, counted and
    named (``EXCLUDED_PAIRS``): a pair cut by a kill and finished on ``--resume``, or split by
    an engine relaunch, whose halves ran on two processes; and a pair holding the first attempt
    on a freshly launched process, which pays the process's cold start while its twin does not
    (in one k=2 run here, Chrome's first pair: +22% duration, +73% collection wall)."""
    th = thresholds or CalibrationThresholds()
    facts = read_facts(manifest)
    every = calibration_every(manifest)
    if every > 1:  # a sample of rounds has twins: the others' rows are no unmatched half
        sampled = {_round(r) for r in twins}
        rows = [r for r in rows if _round(r) in sampled]
    a = {_key(r): r for r in latest_rows(twins)}
    b = {_key(r): r for r in latest_rows(rows) if r.get("status") != "not_run"}
    used, excluded = _sort_pairs(a, b)
    pairs = [_pair(a[k], b[k]) for k in used]
    engines = [e for e in facts.engines if e not in _not_run_engines(rows)]
    head = {
        "mode": "interleaved",
        "calibration_every": every,
        "baseline_run": facts.run_id,
        "profiled_run": facts.run_id,
        "order": _order_figures(a, b, used),
        **{
            name: {"pairs": len(keys), "examples": [list(k) for k in keys[:5]], "rule": rule}
            for (name, rule), keys in zip(EXCLUDED_PAIRS.items(), excluded, strict=True)
        },
    }
    return _verdict(head, [_pairing_check(a, b, engines)], pairs, engines, th)


def calibration_every(manifest: Mapping[str, Any]) -> int:
    """One round in how many had twins (``--resource-calibration-every``; 1 before it existed)."""
    profile = manifest_data(manifest).get("resource_profile")
    every = profile.get("calibration_every", 1) if isinstance(profile, Mapping) else 1
    return every if isinstance(every, int) and every >= 1 else 1


def _round(row: Row) -> Any:
    order = row.get("order")
    return order.get("round") if isinstance(order, Mapping) else None


EXCLUDED_PAIRS = {
    "not_same_process": "a pair whose two attempts ran on different engine processes (a "
    "resumed run cut between them, or an engine relaunched between them) is left out of the "
    "observer figures",
    "first_on_launch": "a pair holding the first attempt on a freshly launched engine process "
    "(its cold start, which the twin after it does not pay) is left out of the observer figures",
}


def _sort_pairs(
    a: Mapping[PairKey, Row], b: Mapping[PairKey, Row]
) -> tuple[list[PairKey], tuple[list[PairKey], list[PairKey]]]:
    """The matched pairs that give figures, and those left out, in ``EXCLUDED_PAIRS`` order."""
    firsts = _first_rows_on_launch([*a.values(), *b.values()])
    used: list[PairKey] = []
    split: list[PairKey] = []
    cold: list[PairKey] = []
    for key in sorted(set(a) & set(b)):
        if not same_engine_process(a[key], b[key]):
            split.append(key)
        elif id(a[key]) in firsts or id(b[key]) in firsts:
            cold.append(key)
        else:
            used.append(key)
    return used, (split, cold)


def _launch(row: Row) -> Any:
    """Which engine launch ran ``row``: its launch id, else worker, generation and pid (rows
    from before launch ids); None when the row does not say."""
    facts = row.get("engine_process")
    if not isinstance(facts, Mapping):
        return None
    if facts.get("launch_id") is not None:
        return facts["launch_id"]
    fallback = tuple(facts.get(f) for f in ("worker", "generation", "pid"))
    return None if None in fallback else fallback


def same_engine_process(one: Row, other: Row) -> bool:
    """Did both rows run on one engine process? By the launch id each generation gets (unique
    across resumed sessions); rows written before launch ids existed fall back to worker,
    generation and pid, which a resume can repeat; one row with an id and one without cannot
    share a launch."""
    first, second = _launch(one), _launch(other)
    return first is not None and first == second


def _first_rows_on_launch(rows: Sequence[Row]) -> set[int]:
    """``id()`` of each launch's earliest row (by ``started_at``): its first attempt."""
    earliest: dict[Any, Row] = {}
    for row in rows:
        launch, started = _launch(row), row.get("started_at")
        if launch is None or not isinstance(started, str):
            continue
        if launch not in earliest or started < str(earliest[launch]["started_at"]):
            earliest[launch] = row
    return {id(row) for row in earliest.values()}


def _not_run_engines(rows: Sequence[Row]) -> set[str]:
    """Engines that were never launched (binary missing): no twin exists to pair with."""
    ran = {str(r["engine"]) for r in rows if r.get("status") != "not_run"}
    return {str(r["engine"]) for r in rows} - ran


def _order_figures(
    a: Mapping[PairKey, Row], b: Mapping[PairKey, Row], keys: Sequence[PairKey]
) -> dict[str, int]:
    """How many pairs ran profiled first: the balance the plan promised, read from the rows."""
    first = {"profiled_first": 0, "unprofiled_first": 0, "order_unknown": 0}
    for key in keys:
        twin, profiled = a[key].get("started_at"), b[key].get("started_at")
        if not isinstance(twin, str) or not isinstance(profiled, str) or twin == profiled:
            first["order_unknown"] += 1  # no timestamp, or both in the same millisecond
        elif profiled < twin:
            first["profiled_first"] += 1
        else:
            first["unprofiled_first"] += 1
    return first
