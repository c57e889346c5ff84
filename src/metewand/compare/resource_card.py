"""``resource-card.md``: the resource summary as a report a person would publish.

Rendered only from an ``abb_resource_summary/1`` document, so every figure traces to it.
A value that was not measured prints as ``unavailable``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from metewand import markdown
from metewand.compare.resource_hosts_text import headline, host_tables

MIB = 2**20
NA = "unavailable"
Summary = Mapping[str, Any]


def _num(value: Any, digits: int = 1, scale: float = 1.0) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return NA
    return f"{value / scale:,.{digits}f}"


def _with_ci(metric: Mapping[str, Any] | None, digits: int = 1, scale: float = 1.0) -> str:
    if not metric or metric.get("median") is None:
        return NA
    text = _num(metric["median"], digits, scale)
    ci = metric.get("median_ci95")
    if ci:
        text += f" [{_num(ci[0], digits, scale)}, {_num(ci[1], digits, scale)}]"
    return text


def _metric(summary: Summary, engine: str, name: str) -> Mapping[str, Any] | None:
    metrics = summary["by_engine"].get(engine, {}).get("metrics", {})
    return metrics.get(name)


def _intro(s: Summary) -> list[str]:
    inter = s["all_pass_intersection"]
    stats = s["comparison_contract"]["statistics"]["median_ci95"]
    verdict = "**eligible**" if s["resource_comparison_eligible"] else "**not eligible**"
    return [
        f"# Resource card: {s['run_id']}",
        "",
        f"- Resource comparison: {verdict} (all seven conditions listed below).",
        f"- Engines: {', '.join(s['engines'])}; reference engine for ratios: "
        f"{s.get('reference_engine') or 'none'}.",
        f"- All-pass intersection: {inter['attempts']} task-attempts over {inter['tasks']} tasks "
        "(only task-attempts every engine passed are compared, so failing fast never looks "
        "efficient).",
        "- Scope: warm attempts, engine root plus all descendants. Harness and host costs are "
        "reported apart; resource cost is never blended into the functional score.",
        *(f"- {line}" for line in _host_headline(s)),
        f"- Medians carry a 95% bootstrap CI that resamples tasks, not attempts "
        f"({stats['resamples']} resamples, seed {stats['seed']}); p95 uses "
        f"{s['comparison_contract']['statistics']['p95']}.",
        "",
    ]


def _host_headline(s: Summary) -> list[str]:
    hosts = s.get("hosts")
    return headline(hosts) if isinstance(hosts, Mapping) else []


def _hosts(s: Summary) -> list[str]:
    """A Dask run's per-host level: verdicts side by side, the homogeneity test, medians, cold
    starts and fingerprints per host (``compare.resource_hosts_text``)."""
    hosts = s.get("hosts")
    if not isinstance(hosts, Mapping):
        return []
    lines = ["## Hosts (Dask)", "", *(f"- {line}" for line in headline(hosts)), ""]
    for t in host_tables(hosts):
        lines += [f"### {markdown.text(t.title)}", "", *markdown.table(t.header, t.rows), ""]
        lines += [t.note, ""] if t.note else []
    return lines


def _eligibility(s: Summary) -> list[str]:
    rows = [
        [c["id"], "pass" if c["passed"] else "**FAIL**", c["reason"]]
        for c in s["eligibility_conditions"]
    ]
    return ["## Eligibility", "", *markdown.table(["condition", "result", "reason"], rows), ""]


def _engine_table(s: Summary) -> list[str]:
    header = [
        "engine",
        "functional pass/attempts",
        "intersection",
        "CPU median ms [95% CI]",
        "CPU p95 ms",
        "avg cores",
        "PSS peak median MiB [95% CI]",
        "PSS Δ median MiB",
        "cgroup high-water median MiB",
        "peaks missed by sampler",
        "processes at peak (median)",
        "fixture tx body median B",
    ]
    rows = []
    for e in s["engines"]:
        outcome = s["functional_outcomes"].get(e, {})
        by = s["by_engine"].get(e, {})
        cpu = _metric(s, e, "cpu_total_ms") or {}
        rows.append(
            [
                e,
                f"{outcome.get('pass', 0):,}/{outcome.get('attempts', 0):,}",
                f"{by.get('intersection_attempts', 0):,}",
                _with_ci(cpu),
                _num(cpu.get("p95")),
                _num((_metric(s, e, "avg_cores") or {}).get("median"), 2),
                _with_ci(_metric(s, e, "pss_peak_bytes"), 1, MIB),
                _num((_metric(s, e, "pss_peak_delta_bytes") or {}).get("median"), 2, MIB),
                _num((_metric(s, e, "cgroup_memory_peak_bytes") or {}).get("median"), 1, MIB),
                str(by.get("memory_high_water", {}).get("peak_missed_by_sampler", NA)),
                _num((_metric(s, e, "process_count_peak") or {}).get("median"), 0),
                _num((_metric(s, e, "fixture_app_tx_body_bytes") or {}).get("median"), 0),
            ]
        )
    note = (
        "PSS peak is the largest sampled value; the cgroup high-water is the kernel's exact "
        "memory high-water for the engine tree (page cache included, so it is not PSS). "
        "'peaks missed by sampler' counts attempts where the kernel saw clearly more than "
        "any sample."
    )
    return ["## All-pass intersection, per engine", "", *markdown.table(header, rows), "", note, ""]


def _paired(s: Summary) -> list[str]:
    paired = s.get("paired_vs_reference")
    if not paired:
        return []
    ref = s["reference_engine"]
    header = ["engine", f"CPU ÷ {ref}", f"PSS peak ÷ {ref}", f"PSS Δ ÷ {ref}", "tasks"]
    rows = []
    for engine, ratios in paired.items():

        def cell(name: str, ratios: Mapping[str, Any] = ratios) -> str:
            r = ratios.get(name, {})
            return _with_ci(
                {"median": r.get("median_ratio"), "median_ci95": r.get("median_ratio_ci95")}, 3
            )

        tasks = str(ratios.get("cpu_total_ms", {}).get("tasks", NA))
        rows.append(
            [
                engine,
                cell("cpu_total_ms"),
                cell("pss_peak_bytes"),
                cell("pss_peak_delta_bytes"),
                tasks,
            ]
        )
    note = (
        "Median over tasks of (engine median ÷ reference median) on the same task-attempts; "
        "95% CI by task bootstrap."
    )
    return [f"## Paired ratios against {ref}", "", *markdown.table(header, rows), "", note, ""]


def _leaks(s: Summary) -> list[str]:
    rows = []
    for e in s["engines"]:
        entry = s["by_engine"].get(e, {})
        curve = entry.get("leak_curve_fit") or entry.get("leak_curve", {})
        pss = curve.get("pss_end_bytes_slope_per_attempt", {})
        procs = curve.get("process_count_end_slope_per_attempt", {})
        rows.append(
            [
                e,
                _num(pss.get("slope_per_attempt"), 1, 1024),
                _num(procs.get("slope_per_attempt"), 4),
                str(pss.get("n", 0)),
            ]
        )
    header = ["engine", "PSS end KiB per attempt", "processes at end per attempt", "attempts"]
    return [
        "## Leak slopes (least squares over the run order)",
        "",
        *markdown.table(header, rows),
        "",
    ]


def _excluded_pairs(observer: Mapping[str, Any]) -> list[str]:
    """Interleaved pairs left out of the observer figures, and why."""
    lines = []
    split, cold = observer.get("pairs_not_same_process"), observer.get("pairs_first_on_launch")
    if split:
        lines.append(
            f"- {split} pair(s) ran their two attempts on different engine processes (a resumed "
            "run cut between them, or an engine relaunched between them): left out of the "
            "observer figures."
        )
    if cold:
        lines.append(
            f"- {cold} pair(s) held the first attempt on a freshly launched engine process (its "
            "cold start, which the twin after it does not pay): left out of the observer figures."
        )
    return lines


def _cold_start(s: Summary) -> list[str]:
    rows = []
    for e in s["engines"]:
        entry = s["cold_start"]["by_engine"].get(e, {"samples": 0, "metrics": {}})
        m = entry["metrics"]
        rows.append(
            [
                e,
                str(entry["samples"]),
                _with_ci(m.get("ready_ms")),
                _with_ci(m.get("launch_cpu_ms")),
                _with_ci(m.get("launch_peak_pss_bytes"), 1, MIB),
            ]
        )
    header = [
        "engine",
        "launches",
        "ready median ms",
        "launch CPU median ms",
        "launch peak PSS median MiB",
    ]
    note = "Fresh launches outside the warm loop; never part of the warm figures above."
    return [
        "## Cold start (separate from warm attempts)",
        "",
        *markdown.table(header, rows),
        "",
        note,
        "",
    ]


def _settled(settle: Mapping[str, Any]) -> str:
    if not settle.get("attempts"):
        return NA
    return f"{settle['quiet']}/{settle['attempts']}, {_num(settle.get('waited_ms_median'), 0)}"


def _setup(s: Summary) -> list[str]:
    samplings = [s["by_engine"].get(e, {}).get("sampling") or {} for e in s["engines"]]
    rows = []
    for e, sampling in zip(s["engines"], samplings, strict=True):
        wall = sampling.get("observer_wall_ms_median") or {}
        rows.append(
            [
                e,
                ", ".join(sampling.get("backends") or []) or NA,
                ", ".join(str(i) for i in sampling.get("interval_ms") or []) or NA,
                _num(sampling.get("pss_samples_median"), 0),
                _num(sampling.get("sampler_cpu_ms_median"), 1),
                _num(wall.get("start"), 1),
                _num(wall.get("stop"), 1),
                _settled(sampling.get("settle") or {}),
            ]
        )
    header = [
        "engine",
        "accounting backend",
        "interval ms",
        "PSS scans per attempt (median)",
        "sampler CPU ms per attempt (median)",
        "baseline scan wall ms (median)",
        "end scan wall ms (median)",
        "settle: quiet / attempts, median wait ms",
    ]
    notes = [
        "The sampler's CPU (all reader threads included) is the observer's cost, not the "
        "engine's; the scan walls are inside the collection window the observer-effect check "
        "compares."
    ]
    if any((sampling.get("settle") or {}).get("attempts") for sampling in samplings):
        notes.append(
            "After each attempt's cleanup the engine was given time to go quiet (members still, "
            "CPU flat; both runs of an A/B alike), so one attempt's teardown is charged to it "
            "and not to the next."
        )
    if any((sampling.get("pss_samples_median") or 3) <= 2 for sampling in samplings):
        notes.append(
            "Where the median is 2 PSS scans, most attempts were shorter than the interval: "
            "their PSS peak is the larger of the baseline and end scans "
            "(`baseline_end_only`), not a continuously sampled peak. The cgroup high-water "
            "column is the kernel's exact peak for those attempts."
        )
    return [
        "## Measurement setup and observer cost",
        "",
        *markdown.table(header, rows),
        "",
        *notes,
        "",
    ]


def _excluded(s: Summary) -> list[str]:
    excluded = s["excluded"]
    lines = _counts_section("Excluded outcomes", excluded["status_by_engine"], "none")
    n = excluded.get("task_attempts", 0)
    note = (
        f"{n} task-attempt(s) are outside the intersection because at least one engine did not "
        "pass them. Each engine's own status on those task-attempts is counted above, so a "
        "'pass' there is an attempt this engine passed that another engine did not; their raw "
        "resource data stays in results.jsonl and is not aggregated."
        if n
        else "No task-attempt was excluded: every engine passed every task-attempt."
    )
    return [*lines, note, ""]


FLAG_MEANINGS: dict[str, str] = {
    "baseline_end_only": "only the baseline and end PSS scans exist (attempt shorter than the "
    "interval); the PSS peak is not a sampled peak",
    "pss_scan_retried": "a member exited during a PSS scan; the scan re-listed and re-read",
    "pss_zero_address_space_process": "a member had released its address space (zombie or "
    "exiting): counted as a process, 0 live PSS",
    "pss_unavailable": "a PSS scan could not read every member; the value is unavailable, not 0",
    "peak_missed_by_sampler": "the cgroup high-water rose clearly above what the samples saw",
    "sampler_fault": "the sampler failed mid-attempt; values after the fault are missing",
    "proc_tree_child_exit_loss_risk": "CPU from the /proc tree: children reaped early may be lost",
    "cpu_accounting_fallback": "no dedicated cgroup for CPU; a fallback backend was used",
}


def _flags(s: Summary) -> list[str]:
    counts = s["quality_flags_by_engine"]
    lines = _counts_section("Measurement quality flags", counts, "none")
    seen = sorted({flag for c in counts.values() for flag in c})
    legend = [f"- `{flag}`: {FLAG_MEANINGS[flag]}." for flag in seen if flag in FLAG_MEANINGS]
    return [*lines, *legend, *([""] if legend else [])]


def _counts_section(title: str, counts: Mapping[str, Mapping[str, int]], empty: str) -> list[str]:
    rows = [[e, ", ".join(f"{k} {v:,}" for k, v in c.items()) or empty] for e, c in counts.items()]
    return [f"## {title}", "", *markdown.table(["engine", "counts"], rows), ""]


def _foreign_cpu_lines(foreign: Mapping[str, Any] | None) -> list[str]:
    """Foreign CPU: what the machine spent beside the run, and who spent it."""
    if not foreign:
        return ["- Foreign CPU: unavailable (the host summary predates foreign CPU telemetry)."]
    if not foreign.get("evaluated"):
        return ["- Foreign CPU: unavailable (no sample carried it)."]
    state = "TRIPPED" if foreign.get("triggered") else "under the limit"
    visible = foreign.get("median_visible_cores")
    lines = [
        f"- Foreign CPU (machine minus this run): median {foreign.get('median_cores')} cores, "
        f"max {foreign.get('max_cores')} over {foreign.get('sample_count')} samples (median "
        f"{NA if visible is None else visible} by processes a scan saw twice); limit "
        f"{foreign.get('threshold_cores')} cores for {foreign.get('sustained_samples')} samples "
        f"in a row, longest run over it {foreign.get('longest_run_samples')}: {state}."
    ]
    top = foreign.get("top_foreign") or []
    if top:
        named = ", ".join(
            f"{t['comm']} (pid {t['pid']}) {t['cpu_cores_mean']} cores" for t in top[:5]
        )
        lines.append(f"- Top foreign processes (mean over the run): {named}.")
    lines.append(
        f"- Foreign processes started during the run: {foreign.get('started_during_run', NA)} "
        f"({foreign.get('kernel_threads_started', NA)} kernel threads)."
    )
    return lines


def _host_observer(s: Summary) -> list[str]:
    lines = ["## Host and observer quality", ""]
    facts = (s.get("provenance") or {}).get("host") or {}
    if facts:
        governor = _governor(facts.get("cpu_governor"))
        lines.append(
            f"- Host: {facts.get('kernel', NA)}, {facts.get('cpu_count', NA)} CPUs "
            f"({facts.get('cpu_model', NA)}), governor {governor}."
        )
    host = s.get("host_quality")
    if host is None:
        lines.append("- Host telemetry: unavailable (no host summary).")
    else:
        flags = ", ".join(host.get("flags") or []) or "none"
        state = "polluted" if host.get("polluted") else "clean"
        lines.append(
            f"- Host pollution gate: {state} (flags: {flags}; {host.get('sample_count')} samples)."
        )
        for item in host.get("unevaluated") or []:
            lines.append(f"- Not evaluated: {item['condition']}: {item['reason']}.")
        lines += _foreign_cpu_lines(host.get("foreign_cpu"))
    observer = s.get("observer_effect")
    if observer is None:
        return [*lines, "- Observer effect: unavailable (no profiler-off baseline run).", ""]
    verdict = "acceptable" if observer.get("acceptable") else "NOT acceptable"
    baseline = observer.get("baseline_run")
    th = observer.get("thresholds") or {}
    source = (
        f"from interleaved pairs in this run (each attempt beside its unprofiled twin on the "
        f"same engine process, order alternating: {_order(observer.get('pair_order'))})"
        if observer.get("calibration_mode") == "interleaved"
        else f"against baseline run {baseline} (separate-runs A/B)"
    )
    lines.append(
        f"- Observer effect {source}: {verdict} (limits: median duration "
        f"Δ ≤ {th.get('max_duration_overhead_pct', NA)}%, median collection-wall Δ ≤ "
        f"{th.get('max_collection_wall_overhead_pct', NA)}%, status mismatches ≤ "
        f"{_num((th.get('max_status_mismatch_rate') or 0) * 100, 1)}%, overall and per engine)."
    )
    lines.append(
        "- Collection wall: baseline scan start to end scan end (the task and both scans). "
        "Attempt span: on through the page's cleanup, the settle wait and the CPU reading, i.e. "
        "what the profiler adds to the run's time per attempt."
    )
    lines += _excluded_pairs(observer)
    failed = observer.get("failed_checks") or []
    if failed:
        lines.append(f"- Failed calibration checks: {', '.join(failed)}.")
    header = [
        "scope",
        "median duration Δ %",
        "p95 duration Δ %",
        "median collection-wall Δ %",
        "p95 collection-wall Δ %",
        "median attempt-span Δ % (not gated)",
        "status mismatches",
    ]
    scopes: list[tuple[str, Mapping[str, Any]]] = [("overall", observer.get("overall") or {})]
    scopes += list((observer.get("by_engine") or {}).items())
    rows = [
        [
            name,
            _pct(f, "median_duration_overhead_pct"),
            _pct(f, "p95_duration_overhead_pct"),
            _pct(f, "median_collection_wall_overhead_pct"),
            _pct(f, "p95_collection_wall_overhead_pct"),
            _pct(f, "median_attempt_span_overhead_pct"),
            f"{f.get('status_mismatches', NA)}/{f.get('pairs', NA)}",
        ]
        for name, f in scopes
    ]
    return [*lines, "", *markdown.table(header, rows), ""]


def _order(order: Any) -> str:
    if not isinstance(order, Mapping):
        return NA
    return (
        f"{order.get('profiled_first', NA)} profiled first, "
        f"{order.get('unprofiled_first', NA)} unprofiled first, "
        f"{order.get('order_unknown', NA)} unknown"
    )


def _governor(value: Any) -> str:
    """``{"all": g}``, ``{"per_cpu": {...}}`` or ``{"unavailable": reason}`` as one phrase."""
    if not isinstance(value, Mapping):
        return NA
    if "all" in value:
        return str(value["all"])
    if "per_cpu" in value:
        return ", ".join(sorted({str(v) for v in value["per_cpu"].values()}))
    return f"unavailable: {value.get('unavailable', 'unknown')}"


def _pct(figures: Mapping[str, Any], key: str) -> str:
    value = figures.get(key)
    return NA if value is None else f"{value:+.2f}"


def _harness_and_traffic(s: Summary) -> list[str]:
    """harness_scope apart from the engines, and the byte counts metewand does not take."""
    rows = []
    for e in s["engines"]:
        h = s["by_engine"].get(e, {}).get("harness_scope") or {}
        rows.append(
            [
                e,
                str(h.get("attempts", 0)),
                _num(h.get("cpu_ms_median"), 2),
                _num(h.get("cpu_ms_p95"), 2),
            ]
        )
    header = ["engine", "attempts", "harness CPU median ms", "harness CPU p95 ms"]
    concurrent = any(
        (s["by_engine"].get(e, {}).get("harness_scope") or {}).get("concurrent")
        for e in s["engines"]
    )
    note = (
        "harness_scope: metewand's own process (CDP client, driver, grader, fixture server) over "
        "each attempt, minus the sampler's threads; never part of an engine's figures."
    )
    if concurrent:
        note += " jobs > 1: the process served several attempts at once, so these overlap."
    missing = s.get("traffic_not_measured") or {}
    return [
        "## Harness scope (not engine cost)",
        "",
        *markdown.table(header, rows),
        "",
        note,
        "",
        f"- control-plane bytes: {missing.get('control_plane_traffic', 'not implemented')}",
        f"- wire bytes: {missing.get('wire_traffic', 'not implemented')}",
        "",
    ]


SECTIONS: tuple[Callable[[Summary], list[str]], ...] = (
    _intro,
    _eligibility,
    _hosts,
    _engine_table,
    _paired,
    _leaks,
    _cold_start,
    _setup,
    _excluded,
    _flags,
    _harness_and_traffic,
    _host_observer,
)


def render(summary: Summary) -> str:
    lines: list[str] = []
    for section in SECTIONS:
        lines += section(summary)
    return "\n".join(lines).rstrip() + "\n"
