"""``resource_summary.json`` (``abb_resource_summary/1``): resource cost over the all-pass
intersection only, with eligibility, excluded outcomes, cold start kept apart, host and
observer quality. Regenerated from run artifacts; it never changes a functional status.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from metewand.compare import eligibility, stats
from metewand.compare.intersection import (
    Intersection,
    all_pass_intersection,
    functional_outcomes,
)
from metewand.compare.peer_strata import stratified
from metewand.compare.resource_metrics import (
    COLD_START_METRICS,
    METRICS,
    METRICS_BY_NAME,
    form_value,
    quality_flags,
    read_columns,
    resource_of,
)
from metewand.compare.run_facts import latest_rows, read_facts
from metewand.suites.browser.resource_record import (
    CONTROL_PLANE_NOT_IMPLEMENTED,
    WIRE_NOT_IMPLEMENTED,
)

if TYPE_CHECKING:
    from metewand.compare.resource_hosts import HostLevels

SUMMARY_SCHEMA = "abb_resource_summary/1"
PAIRED_METRICS = ("cpu_total_ms", "pss_peak_bytes", "pss_peak_delta_bytes", "avg_cores")
LEAK_METRICS = ("pss_end_bytes", "process_count_end")
PEAK_MISSED_FLAG = "peak_missed_by_sampler"
Row = Mapping[str, Any]
Columns = Mapping[str, Sequence[float | None]]  # metric name -> value of each row, in row order
# what a run cannot measure yet, said in every summary rather than written as zero traffic
TRAFFIC_NOT_MEASURED: Final = {
    "control_plane_traffic": CONTROL_PLANE_NOT_IMPLEMENTED["reason"],
    "wire_traffic": WIRE_NOT_IMPLEMENTED["reason"],
}


def describe_metrics(
    rows: Sequence[Row], columns: Columns, names: Sequence[str], resamples: int, seed: int
) -> dict[str, Any]:
    """Per metric of ``names``: n, median with its task-bootstrap CI, p95, missing, unit."""
    out: dict[str, Any] = {}
    tasks = [str(r["task_id"]) for r in rows]
    for name in names:
        present = [(v, t) for v, t in zip(columns[name], tasks, strict=True) if v is not None]
        described = stats.describe(
            [v for v, _ in present], [t for _, t in present], resamples, seed
        )
        described["missing"] = len(rows) - len(present)
        described["unit"] = METRICS_BY_NAME[name].unit
        out[name] = described
    return out


def _engine_metrics(
    rows: Sequence[Row], columns: Columns, resamples: int, seed: int
) -> dict[str, Any]:
    return describe_metrics(rows, columns, [m.name for m in METRICS], resamples, seed)


def _memory_high_water(rows: Sequence[Row], metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The cgroup's exact high-water next to the sampled PSS peak, and how often it saw more."""
    missed = sum(PEAK_MISSED_FLAG in quality_flags(r) for r in rows)
    return {
        "pss_peak_bytes_median": metrics["pss_peak_bytes"]["median"],
        "cgroup_memory_peak_bytes_median": metrics["cgroup_memory_peak_bytes"]["median"],
        "cgroup_memory_peak_rows": metrics["cgroup_memory_peak_bytes"]["n"],
        "peak_missed_by_sampler": missed,
        "note": "cgroup memory counts page cache and kernel memory; it is never presented as PSS",
    }


def _median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if values else None


def _sampling(rows: Sequence[Row]) -> dict[str, Any]:
    """How the engine was observed, over all its profiled attempts: backend, PSS samples per
    attempt, the sampler's own CPU and the observer's wall inside the collection window."""
    res = [resource_of(r) for r in rows if isinstance(resource_of(r), Mapping)]
    numbers = {
        "pss_samples": [r.get("sample_counts", {}).get("pss_samples") for r in res],
        "sampler_cpu_ms": [r.get("sampler_cpu_ms") for r in res],
        "observer_start_ms": [(r.get("observer_wall_ms") or {}).get("start") for r in res],
        "observer_stop_ms": [(r.get("observer_wall_ms") or {}).get("stop") for r in res],
    }
    present = {k: [float(v) for v in vs if isinstance(v, int | float)] for k, vs in numbers.items()}
    return {
        "attempts": len(res),
        "backends": sorted({str(r.get("backend")) for r in res}),
        "interval_ms": sorted({r.get("interval_ms") for r in res if r.get("interval_ms")}),
        "pss_samples_median": _median(present["pss_samples"]),
        "sampler_cpu_ms_median": _median(present["sampler_cpu_ms"]),
        "observer_wall_ms_median": {
            "start": _median(present["observer_start_ms"]),
            "stop": _median(present["observer_stop_ms"]),
        },
        "settle": _settle(rows),
    }


def _settle(rows: Sequence[Row]) -> dict[str, Any]:
    """The wait after each attempt for the engine to go quiet: how long, and how often it did."""
    settles = [r["settle"] for r in rows if isinstance(r.get("settle"), Mapping)]
    waited = [float(s["waited_ms"]) for s in settles if isinstance(s.get("waited_ms"), int | float)]
    return {
        "attempts": len(settles),
        "quiet": sum(bool(s.get("quiet")) for s in settles),
        "quiet_with_unreaped": sum(bool(s.get("quiet") and s.get("unreaped")) for s in settles),
        "waited_ms_median": _median(waited),
        "waited_ms_max": max(waited) if waited else None,
    }


def _sequence_index(row: Row) -> float | None:
    order = row.get("order")
    if isinstance(order, Mapping) and isinstance(order.get("round"), int):
        return float(order["round"])
    return None


def _leak_curves(rows: Sequence[Row]) -> dict[str, Any]:
    """Run-level slopes over every row of the engine, against the task-attempt sequence index."""
    out: dict[str, Any] = {}
    columns = read_columns(rows, [METRICS_BY_NAME[name] for name in LEAK_METRICS])
    rounds = [_sequence_index(r) for r in rows]
    for name in LEAK_METRICS:
        points = list(zip(rounds, columns[name], strict=True))
        usable = [(x, y) for x, y in points if x is not None and y is not None]
        slope = stats.leak_slope([x for x, _ in usable], [y for _, y in usable])
        slope["x"] = "order.round (task-attempt sequence index)"
        out[f"{name}_slope_per_attempt"] = slope
    return out


def _paired(
    inter: Intersection,
    columns: Mapping[str, Columns],
    reference: str | None,
    resamples: int,
    seed: int,
) -> dict[str, Any] | None:
    if reference is None or reference not in inter.rows_by_engine:
        return None
    out: dict[str, Any] = {}
    ref_rows = inter.rows_by_engine[reference]
    theirs = {n: _keyed(ref_rows, columns[reference][n]) for n in PAIRED_METRICS}
    for engine, rows in inter.rows_by_engine.items():
        if engine == reference:
            continue
        out[engine] = {}
        for name in PAIRED_METRICS:
            mine = _keyed(rows, columns[engine][name])
            out[engine][name] = stats.paired_ratio(mine, theirs[name], resamples, seed)
    return out


def _keyed(rows: Sequence[Row], values: Sequence[float | None]) -> dict[tuple[str, int], float]:
    out: dict[tuple[str, int], float] = {}
    for row, value in zip(rows, values, strict=True):
        if value is not None:
            out[(str(row["task_id"]), int(row["attempt"]))] = value
    return out


def cold_start_summary(
    cold_rows: Sequence[Row], engines: Sequence[str], resamples: int, seed: int
) -> dict[str, Any]:
    """Cold-start launches per engine; each launch is its own cluster (launches independent)."""
    by_engine: dict[str, list[Row]] = defaultdict(list)
    for row in cold_rows:
        by_engine[str(row.get("engine"))].append(row)
    out: dict[str, Any] = {}
    for engine in engines:
        rows = by_engine.get(engine, [])
        metrics = {}
        for metric in COLD_START_METRICS:
            values = [v for v in (form_value(r.get(metric.name)) for r in rows) if v is not None]
            described = stats.describe(values, list(range(len(values))), resamples, seed)
            described["missing"] = len(rows) - len(values)
            described["unit"] = metric.unit
            metrics[metric.name] = described
        out[engine] = {"samples": len(rows), "metrics": metrics}
    return {"separate_from_warm_aggregation": True, "by_engine": out}


def _flags_by_engine(rows: Sequence[Row], engines: Sequence[str]) -> dict[str, dict[str, int]]:
    counts: dict[str, Counter[str]] = {e: Counter() for e in engines}
    for row in rows:
        if row["engine"] in counts:
            counts[str(row["engine"])].update(quality_flags(row))
    return {e: dict(sorted(c.items())) for e, c in counts.items()}


# the peer's observer_effect figure names, and ours they are read from
PEER_OBSERVER_FIGURES = {
    "matched_attempts": "pairs",
    "duration_pairs": "duration_pairs",
    "collection_wall_pairs": "collection_wall_pairs",
    "median_duration_delta_pct": "median_duration_overhead_pct",
    "p95_duration_delta_pct": "p95_duration_overhead_pct",
    "median_collection_wall_delta_pct": "median_collection_wall_overhead_pct",
    "p95_collection_wall_delta_pct": "p95_collection_wall_overhead_pct",
    "status_mismatches": "status_mismatches",
    "status_mismatch_rate": "status_mismatch_rate",
}


def _peer_figures(figures: Any) -> dict[str, Any]:
    figures = figures if isinstance(figures, Mapping) else {}
    return {peer: figures.get(ours) for peer, ours in PEER_OBSERVER_FIGURES.items()}


def _observer_effect(calibration: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Our calibration's parts, with the peer's flat figures beside them (overall at the top,
    per engine inside ``by_engine``), the gate's threshold as ``max_observer_effect_pct``."""
    if not calibration:
        return None
    keep = ("baseline_run", "acceptable", "failed_checks", "thresholds", "overall")
    # ours: "separate" (a profiler-off run) or "interleaved" (unprofiled twins in this run)
    mode = calibration.get("mode", "separate")
    out: dict[str, Any] = {k: calibration.get(k) for k in keep}
    thresholds = calibration.get("thresholds") or {}
    checks = {c.get("name"): c for c in calibration.get("checks") or []}
    provenance = checks.get("provenance_identical", {}).get("figures", {})
    unmatched = set(provenance.get("differing", [])) | set(provenance.get("missing", []))
    out.update(_peer_figures(calibration.get("overall")))
    out["calibration_mode"] = mode
    if mode == "interleaved":
        out["pair_order"] = calibration.get("order")
        # pairs split across two engine processes (cut by a resume or a relaunch), and pairs
        # holding a fresh process's first attempt (its cold start): neither is figured
        for name in ("not_same_process", "first_on_launch"):
            out[f"pairs_{name}"] = (calibration.get(name) or {}).get("pairs")
    out.update(
        max_observer_effect_pct=thresholds.get("max_duration_overhead_pct"),
        complete_pairing=bool(checks.get("fully_paired", {}).get("passed")),
        profiled_attempts=(calibration.get("overall") or {}).get("pairs"),
        provenance_checks={n: n not in unmatched for n in provenance.get("compared", [])},
        provenance_mismatches=sorted(unmatched),
    )
    out["by_engine"] = {
        engine: {
            **dict(figures),
            **_peer_figures(figures),
            "acceptable": _engine_acceptable(figures, thresholds),
        }
        for engine, figures in (calibration.get("by_engine") or {}).items()
    }
    return out


def _engine_acceptable(figures: Mapping[str, Any], thresholds: Mapping[str, Any]) -> bool:
    """The peer's per-engine verdict: this engine's median overheads and status mismatches
    within the run's thresholds (a missing figure is not acceptable)."""
    limits = (
        ("median_duration_overhead_pct", "max_duration_overhead_pct"),
        ("median_collection_wall_overhead_pct", "max_collection_wall_overhead_pct"),
        ("status_mismatch_rate", "max_status_mismatch_rate"),
    )
    for figure, limit in limits:
        value, bound = figures.get(figure), thresholds.get(limit)
        if not isinstance(value, int | float) or not isinstance(bound, int | float):
            return False
        if value > bound:
            return False
    return True


def _peer_leak_curve(fits: Mapping[str, Any]) -> dict[str, float | None]:
    """The peer's ``leak_curve``: the two slopes as plain numbers (null when not fitted)."""

    def slope(name: str) -> float | None:
        fit = fits.get(name)
        value = fit.get("slope_per_attempt") if isinstance(fit, Mapping) else None
        return float(value) if isinstance(value, int | float) else None

    return {
        "pss_end_slope_bytes_per_attempt": slope("pss_end_bytes_slope_per_attempt"),
        "process_count_end_slope_per_attempt": slope("process_count_end_slope_per_attempt"),
    }


def _harness_scope(rows: Sequence[Row]) -> dict[str, Any]:
    """harness_scope per engine: this process's CPU over each attempt minus the sampler's
    threads (driver, CDP client, grader, fixture server), kept apart from engine_scope."""
    scopes = [r["harness_scope"] for r in rows if isinstance(r.get("harness_scope"), Mapping)]
    cpu = [float(h["cpu_ms"]) for h in scopes if isinstance(h.get("cpu_ms"), int | float)]
    return {
        "attempts": len(cpu),
        "cpu_ms_median": _median(cpu),
        "cpu_ms_p95": float(np.percentile(cpu, 95)) if cpu else None,
        "concurrent": any(bool(h.get("concurrent")) for h in scopes),
        "excludes": "engine processes and the sampler's own threads",
    }


def _peer_provenance(manifest: Mapping[str, Any], facts: Any) -> dict[str, Any]:
    """The peer's provenance keys, read from the run manifest's peer fields (top level of the
    raw manifest, or ``peer_manifest`` of the settings a report reads)."""
    peer = manifest.get("peer_manifest") if "data" not in manifest else manifest
    peer = peer if isinstance(peer, Mapping) else {}

    def mapping(value: Any) -> Mapping[str, Any]:
        return value if isinstance(value, Mapping) else {}

    runner = mapping(peer.get("runner"))
    return {
        "browser_reuse": runner.get("browser_reuse") or facts.get("reuse"),
        "engines": dict(mapping(peer.get("engines"))),
        "host": dict(mapping(peer.get("host"))) or None,  # null: the manifest has none
        # metewand runs no third-party drivers: its pin is its own source tree
        "harness_pins": {
            "manifest": None,
            "drivers": {},
            "metewand_source_tree_sha256": facts.get("harness_pins"),
        },
        "harness_pin": facts.get("harness_pins"),
        "jobs": facts.get("jobs"),
        "k_runs": facts.get("k"),
        "sample_interval_ms": mapping(peer.get("resource_profile")).get("sample_interval_ms"),
    }


def _host_quality(host_summary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not host_summary:
        return None
    gate = host_summary.get("gate", {})
    return {
        "started_at": host_summary.get("started_at"),
        "ended_at": host_summary.get("ended_at"),
        "max_bench_descendant_process_count": host_summary.get(
            "max_bench_descendant_process_count"
        ),
        "polluted": host_summary.get("polluted"),
        "flags": host_summary.get("flags", []),
        "sample_count": host_summary.get("sample_count"),
        "thresholds": gate.get("thresholds"),
        "unevaluated": gate.get("unevaluated", []),
        "foreign_cpu": _foreign_cpu_brief(host_summary.get("foreign_cpu")),
    }


def _foreign_cpu_brief(foreign: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The card's view of ``host_summary.json``'s ``foreign_cpu`` (None for runs before it)."""
    if not foreign:
        return None
    keep: tuple[str, ...] = ("threshold_cores", "sustained_samples", "sample_count")
    keep += ("median_cores", "max_cores", "median_visible_cores")
    gate = foreign.get("gate") or {}
    started = foreign.get("started_during_run") or {}
    return {
        **{k: foreign.get(k) for k in keep},
        "triggered": gate.get("triggered"),
        "evaluated": gate.get("evaluated"),
        "longest_run_samples": (gate.get("figures") or {}).get("longest_run_samples"),
        "top_foreign": foreign.get("top_foreign", []),
        "started_during_run": started.get("count"),
        "kernel_threads_started": started.get("kernel_threads"),
    }


def _provenance(facts: Any) -> dict[str, Any]:
    names: tuple[str, ...] = ("seed", "k", "jobs", "reuse", "sample_interval_ms", "host")
    names += ("engine_pins",)
    names += ("harness_pins", "runner_source", "engine_order", "engine_order_algorithm")
    return {n: facts.get(n) for n in names}


def _engine_summary(
    engine: str,
    inter: Intersection,
    columns: Mapping[str, Columns],
    rows: Sequence[Row],
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """One engine's block: its intersection metrics, and what every one of its rows shows
    (leak curves, how it was sampled, the harness's own CPU)."""
    engine_rows = inter.rows_by_engine.get(engine, [])
    engine_columns = columns.get(engine) or read_columns(engine_rows)
    all_rows = [r for r in rows if r["engine"] == engine]
    metrics = _engine_metrics(engine_rows, engine_columns, resamples, seed)
    fits = _leak_curves(all_rows)
    return {
        "intersection_attempts": len(engine_rows),
        "metrics": metrics,
        "memory_high_water": _memory_high_water(engine_rows, metrics),
        # the peer's plain slopes; our fits (intercept, stderr, n) stay in leak_curve_fit
        "leak_curve": _peer_leak_curve(fits),
        "leak_curve_fit": fits,
        "sampling": _sampling(all_rows),
        "harness_scope": _harness_scope(all_rows),
    }


def _comparison_contract(facts: Any, resamples: int, seed: int) -> dict[str, Any]:
    return {
        "scope": "warm engine_scope attempts",
        "population": "same task_id+attempt where every selected engine passed",
        "functional_score_combined": False,
        "engine_order": facts.get("engine_order"),
        "statistics": {
            "median": "sample median",
            "p95": f"numpy percentile, method {stats.P95_METHOD}",
            "median_ci95": stats.bootstrap_record(resamples, seed),
            "paired_ratio": "median over tasks of (engine median / reference median)",
        },
    }


def _cold_start(
    cold_start_rows: Sequence[Row], engines: Sequence[str], resamples: int, seed: int
) -> dict[str, Any]:
    """The cold-start summary with each engine's launches as recorded."""
    return {
        **cold_start_summary(cold_start_rows, engines, resamples, seed),
        "samples_by_engine": {
            e: [dict(r) for r in cold_start_rows if r.get("engine") == e] for e in engines
        },
    }


def _eligibility(verdict: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "resource_comparison_eligible": verdict["resource_comparison_eligible"],
        "ineligibility_reasons": verdict["ineligibility_reasons"],
        "eligibility_conditions": verdict["conditions"],
    }


def summarize(
    manifest: Mapping[str, Any],
    rows: Sequence[Row],
    host_summary: Mapping[str, Any] | None = None,
    calibration: Mapping[str, Any] | None = None,
    cold_start_rows: Sequence[Row] = (),
    reference_engine: str | None = None,
    resamples: int = stats.DEFAULT_RESAMPLES,
    bootstrap_seed: int = stats.DEFAULT_BOOTSTRAP_SEED,
    intersection: Intersection | None = None,
    hosts: HostLevels | None = None,
) -> dict[str, Any]:
    """The ``abb_resource_summary/1`` document for one run (``intersection``: the caller's
    ``all_pass_intersection(rows, engines)``, passed in so a report builds it once).

    ``hosts``: a Dask run's per-host levels (``compare.resource_hosts.host_levels``): the
    pooled verdict then takes its ``one_host`` condition (pooled only for hosts that passed the
    homogeneity test), every host's gate instead of the client's, and the pooled calibration
    with each host's own verdict as a check; the summary carries them under ``hosts``."""
    facts = read_facts(manifest)
    engines = facts.engines
    rows = latest_rows(rows)
    inter = intersection or all_pass_intersection(rows, engines)
    one_host, gate = None, host_summary
    if hosts is not None:
        one_host, gate = hosts.one_host, hosts.gate
        calibration = hosts.pooled_calibration(calibration)
    verdict = eligibility.evaluate(manifest, rows, gate, calibration, inter, one_host)
    # each engine's metric values are read from its intersection rows once, for every use
    columns = {e: inter.metric_columns(e) for e in inter.rows_by_engine}
    by_engine = {
        e: _engine_summary(e, inter, columns, rows, resamples, bootstrap_seed) for e in engines
    }
    missing = next(c for c in verdict["conditions"] if c["id"] == "metrics_complete")
    return {
        "schema": SUMMARY_SCHEMA,
        "run_id": facts.run_id,
        "engines": engines,
        "reference_engine": reference_engine,
        **_eligibility(verdict),
        "comparison_contract": _comparison_contract(facts, resamples, bootstrap_seed),
        **inter.to_json(),
        "functional_outcomes": functional_outcomes(rows, engines),
        "quality_flags_by_engine": _flags_by_engine(rows, engines),
        "by_engine": by_engine,
        "paired_vs_reference": _paired(inter, columns, reference_engine, resamples, bootstrap_seed),
        "cold_start": _cold_start(cold_start_rows, engines, resamples, bootstrap_seed),
        "stratified": stratified(
            inter, resamples, bootstrap_seed, {e: by_engine[e]["metrics"] for e in by_engine}
        ),
        "host_quality": _host_quality(host_summary),
        "observer_effect": _observer_effect(calibration),
        "missing_intersection_metrics": missing["figures"].get("examples", []),
        # ours first; the peer's keys (harness_pins as an object among them) replace ours
        "provenance": {**_provenance(facts), **_peer_provenance(manifest, facts)},
        "traffic_not_measured": dict(TRAFFIC_NOT_MEASURED),
        **({"hosts": hosts.to_json()} if hosts is not None else {}),
    }
