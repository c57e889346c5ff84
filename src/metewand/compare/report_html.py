"""report.html: one self-contained page (inline CSS, inline PNGs, no scripts, no fetches).

Built from the run directory alone. Sections common to both suites (host pollution, calibration,
eligibility, provenance) live here; suite-specific sections come from ``report_browser`` and
the compute helpers below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from metewand.compare import (
    case_plots,
    compute_rows,
    phase_costs,
    phase_plots,
    plots,
    pollution,
    report_provenance,
    verdict,
)
from metewand.compare import run_warnings as run_warnings_module
from metewand.compare.case_text import (
    OUTCOME_HEADER,
    POOLED_CASES_NOTE,
    SHOWN_METRICS,
    case_rows,
    metric_cell,
    outcome_rows,
    pooled_case_lines,
    ratio_rows,
)
from metewand.compare.cases import TIME_METRIC
from metewand.compare.fmt import unavailable
from metewand.compare.html_parts import (
    Omitted,
    figure,
    page,
    paragraph,
    section,
    table,
)
from metewand.compare.report_hosts import hosts_html
from metewand.compare.report_resources import ResourceContext, resource_context
from metewand.compare.run_warnings import run_warnings
from metewand.compare.rundir import RunData
from metewand.compare.suite_registry import Section, suite_kind
from metewand.measure.host_gate import GateThresholds, evaluate_gate

FOREIGN_SERIES = "foreign CPU (cores)"
NO_MARKS = "run recorded without phase marks (--no-phase-marks)"


def _foreign_limit(summary: Mapping[str, Any] | None) -> float:
    """The run's own foreign-CPU threshold (the default for runs that did not record one)."""
    recorded = ((summary or {}).get("foreign_cpu") or {}).get("threshold_cores")
    return float(recorded) if recorded is not None else GateThresholds().foreign_cpu_max_cores


def _telemetry_series(
    samples: list[dict[str, Any]], foreign_limit: float
) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    th = GateThresholds()
    n = len(samples)
    seconds, load, psi, avail, foreign = (np.full(n, np.nan) for _ in range(5))
    busy = np.zeros(n, dtype=bool)
    for i, s in enumerate(samples):
        if isinstance(s.get("monotonic_ns"), int):
            seconds[i] = s["monotonic_ns"] / 1e9
        loadavg = s.get("loadavg") or {}
        load[i] = loadavg.get("one", np.nan)
        cpu_psi = ((s.get("psi") or {}).get("cpu") or {}).get("some") or {}
        psi[i] = cpu_psi.get("avg10", np.nan)
        mem = s.get("memory") or {}
        if mem.get("total_bytes"):
            avail[i] = mem["available_bytes"] / mem["total_bytes"] * 100
        foreign[i] = (s.get("foreign_cpu") or {}).get("foreign_cpu_cores", np.nan)
        busy[i] = bool(
            psi[i] > th.cpu_some_avg10_max
            or avail[i] < th.min_available_ratio * 100
            or foreign[i] > foreign_limit
        )
    seconds -= np.nanmin(seconds) if np.isfinite(seconds).any() else 0
    series = {"load 1 min": load, "CPU PSI some avg10 (%)": psi, "MemAvailable (%)": avail}
    if np.isfinite(foreign).any():  # runs recorded before foreign CPU telemetry have no band
        series[FOREIGN_SERIES] = foreign
    return seconds, series, busy


def _or_unavailable(value: Any) -> Any:
    return "unavailable" if value is None else value


def _foreign_parts(foreign: Mapping[str, Any] | None) -> list[str]:
    """Foreign CPU in words and the processes that spent it (pid and comm only)."""
    if not foreign:
        return [paragraph(unavailable("no foreign CPU figures in host_summary.json"), "muted")]
    started = foreign.get("started_during_run") or {}
    text = (
        f"Foreign CPU (machine minus this run): median {foreign.get('median_cores')} cores, max "
        f"{foreign.get('max_cores')} over {foreign.get('sample_count')} samples, of which median "
        f"{_or_unavailable(foreign.get('median_visible_cores'))} by processes seen by two scans "
        "(the rest: processes born and gone between samples, interrupts, processes this /proc "
        "cannot show); the gate's limit "
        f"is {foreign.get('threshold_cores')} cores for {foreign.get('sustained_samples')} "
        f"samples in a row. Foreign processes started during the run: {started.get('count')}."
    )
    rows = [
        [t["comm"], t["pid"], t["cpu_cores_mean"], t["samples_named"]]
        for t in foreign.get("top_foreign", [])
    ]
    return [
        paragraph(text),
        table(["foreign process", "pid", "mean cores over the run", "samples naming it"], rows),
    ]


def host_section(run: RunData) -> str:
    verdict = run.host_summary or {}
    gate = verdict.get("gate") if isinstance(verdict.get("gate"), Mapping) else None
    if gate is None:  # no recorded verdict: evaluate the recorded samples the same way
        gate = evaluate_gate(run.host_telemetry)
    parts = [
        paragraph(
            "Pollution gate: "
            + ("passed" if gate.get("passed") else "did not pass")
            + f" over {gate.get('sample_count', len(run.host_telemetry))} samples."
        ),
        table(
            ["triggered condition", "detail"],
            [[t.get("condition"), t.get("detail")] for t in gate.get("triggered", [])],
        ),
        *_foreign_parts(verdict.get("foreign_cpu")),
    ]
    if run.host_telemetry:
        limit = _foreign_limit(run.host_summary)
        seconds, series, busy = _telemetry_series(run.host_telemetry, limit)
        timeline = plots.host_timeline(
            seconds, series, busy, limits={FOREIGN_SERIES: limit}, bands=(FOREIGN_SERIES,)
        )
        uri = plots.to_data_uri(timeline)
        parts.append(
            figure(uri, "host pollution timeline", "Host telemetry over the run.", "host-timeline")
        )
    else:
        parts.append(paragraph(unavailable("no host_telemetry.jsonl in the run"), "muted"))
    return section("host", "Host pollution timeline", *parts)


def comparability_sections(run: RunData, ctx: ResourceContext) -> list[Section]:
    return [("host", "Host", host_section(run)), *suite_kind(run.kind).resource_sections(ctx)]


def provenance_section(run: RunData) -> str:
    return report_provenance.provenance_section(run.manifest)


def _phase_rows(summary: Mapping[str, Any]) -> list[list[Any]]:
    """Per case x implementation x field: n measured, median [CI], why the rest is missing."""
    rows = []
    for case in summary["cases"]:
        for name, block in case["implementations"].items():
            for metric in summary["metrics"]:
                stat = block["metrics"][metric]
                reasons = stat.get("unavailable") or {}
                missing = ", ".join(f"{r} x{n}" for r, n in reasons.items()) or "none"
                shown = block["note"] or metric_cell(metric, stat)
                rows.append([case["case"], name, metric, stat["n"], shown, missing])
    return rows


def _outcome_rows(scores: Mapping[str, Any]) -> list[list[Any]]:
    """Outcome counts per case x implementation, like every other table of the report."""
    return outcome_rows(scores["cases"])


def _failed_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    failed = []
    for row in rows:
        diagnostic = compute_rows.diagnostic_of(row)
        if diagnostic is None:
            continue
        failed.append(
            [
                row.get("key"),
                compute_rows.implementation_of(row),
                row.get("role"),
                compute_rows.status_of(row),
                diagnostic["code"],
                diagnostic["message"],
            ]
        )
    return failed


SCALING_METRICS = (TIME_METRIC, "cpu_time_ns")  # wall beside CPU, one row of panels each


def unreliable_metrics(run: RunData) -> dict[str, str]:
    """Which of the charted metrics the host made unreliable (a failed pollution gate), and
    why, for a panel title."""
    gate = pollution.account([("RUN", run.run_id, run.host_summary)])
    spoiled = set(gate["unreliable"])
    named = ", ".join(c["condition"] for r in gate["runs"] for c in r["conditions"])
    why = f"unreliable: host polluted ({named or 'gate failed'})"
    out = {}
    if pollution.WALL in spoiled:
        out[TIME_METRIC] = why
    if pollution.CPU in spoiled:
        out["cpu_time_ns"] = why
    return out


def _scaling_figures(summary: Mapping[str, Any], unreliable: Mapping[str, str]) -> list[str]:
    figures = []
    for axis in case_plots.scaling_axes(summary):
        chart = case_plots.scaling_chart(summary, axis, SCALING_METRICS, unreliable)
        uri = plots.to_data_uri(chart)
        caption = (
            f"Median timed wall (top) and CPU time (bottom), log scale, against {axis}; one line "
            "per implementation, band: the 95% CI of the median (none from fewer than 5 "
            "launches). A missing point had no accepted attempt."
        )
        if unreliable:
            caption += " " + "; ".join(
                f"{metric}: {why}" for metric, why in sorted(unreliable.items())
            )
        figures.append(
            figure(uri, f"median timed wall and CPU against {axis}", caption, f"scaling-{axis}")
        )
    return figures or [paragraph("No numeric axis takes two values: no scaling chart.", "muted")]


def _pooled_cases(summary: Mapping[str, Any]) -> list[str]:
    """The cases whose medians pool several Dask hosts (nothing for a one-host run)."""
    lines = pooled_case_lines(summary)
    if not lines:
        return []
    return [paragraph(POOLED_CASES_NOTE, "bad"), table(["case: pooled rows"], [[x] for x in lines])]


def _case_sections(summary: Mapping[str, Any], unreliable: Mapping[str, str]) -> list[Section]:
    boot = summary["bootstrap"]
    head = ["case", "implementation", "accepted", "failures by code"]
    per_case = section(
        "cases",
        "Per case",
        paragraph(
            "One row per case x implementation, measured attempts only; cells: median "
            f"[95% CI of the median, {boot['resamples']} hierarchical resamples of the worker "
            f"launches and their repetitions, seed {boot['seed']}; none from fewer than "
            f"{boot.get('min_units', 5)} launches] n."
        ),
        *(paragraph(f"{metric}: {why}", "bad") for metric, why in sorted(unreliable.items())),
        table(head + list(SHOWN_METRICS), case_rows(summary, SHOWN_METRICS)),
        *_pooled_cases(summary),
    )
    out: list[Section] = [("cases", "Cases", per_case)]
    if summary.get("reference"):
        ratios = section(
            "case-ratios",
            f"Ratio to {summary['reference']} per case ({summary['ratio_metric']})",
            paragraph(
                "Ratio of geometric means; below 1 is faster. Paired: each dataset instance's "
                "two attempts resampled together (hierarchical bootstrap-t CI)."
            ),
            table(["case", "implementation", "ratio [95% CI]"], ratio_rows(summary)),
        )
        out.append(("case-ratios", "Ratios", ratios))
    scaling = section("scaling", "Scaling", *_scaling_figures(summary, unreliable))
    out.append(("scaling", "Scaling", scaling))
    return out


def compute_sections(run: RunData, scores: Mapping[str, Any]) -> list[Section]:
    summary = scores["cases"]
    uri = plots.to_data_uri(case_plots.phase_chart(summary))
    phases = section(
        "phases",
        "Per-phase timings per case (accepted measured attempts)",
        figure(
            uri,
            "median phase timings per case and implementation, start-up apart",
            "Left: worker start-up (cold). Right: prepare and execute, so a short operation is "
            "not hidden behind interpreter start. Unmeasured phases are not drawn.",
            "phase-timings",
        ),
        table(
            [
                "case",
                "implementation",
                "field",
                "n measured",
                "median [95% CI]",
                "unavailable (reason x count)",
            ],
            _phase_rows(summary),
            (3,),
        ),
    )
    failed = _failed_rows(run.rows)
    outcomes = section(
        "scores",
        "Outcomes",
        paragraph(
            f"{scores['measured_rows']} measured attempts and {scores['warmup_rows']} warm-up "
            "attempts. Warm-ups are counted here but enter no rate and no timing."
        ),
        table(
            list(OUTCOME_HEADER),
            _outcome_rows(scores),
            (4,),
        ),
    )
    excluded = section(
        "excluded",
        "Failed attempts",
        paragraph(f"{len(failed)} failed attempts (warm-ups included).", "muted"),
        table(["attempt key", "implementation", "role", "status", "code", "message"], failed[:200])
        if failed
        else "",
    )
    where = _where_section(scores.get("phase_costs"))
    return [
        ("scores", "Scores", outcomes),
        *_case_sections(summary, unreliable_metrics(run)),
        ("phases", "Phases", phases),
        ("where-cost", "Where the CPU goes", where or Omitted("Where the CPU goes", NO_MARKS)),
        (
            "excluded",
            "Failed",
            excluded if failed else Omitted("Failed attempts", "no attempt failed"),
        ),
    ]


def _where_section(costs: list[dict[str, Any]] | None) -> str | None:
    """Phase marks inside attempts (#16); None for runs recorded without them."""
    if not costs:
        return None
    uri = plots.to_data_uri(phase_plots.cost_chart(costs))
    return section(
        "where-cost",
        "Where the time and CPU go (per case × implementation)",
        paragraph(
            "Phase marks read each accounting group's CPU and memory counters at every phase "
            "boundary (no PSS scan). Measured accepted attempts; share: the phase's CPU over "
            "the group's total, both summed over the attempts, so phases and the CPU between "
            "marks add up to 100%."
        ),
        figure(
            uri,
            "median CPU per phase, stacked, per case, implementation and group",
            "One bar per case, implementation and accounting group; segments: median CPU of "
            "each phase in the order run, grey: between marks. Unmeasured phases are not drawn.",
            "where-cost-chart",
        ),
        table(list(phase_costs.TABLE_HEADER), phase_costs.table_rows(costs), (4, 5, 6, 7)),
    )


def _not_shown(omitted: list[Omitted]) -> str:
    """One line per reason naming the sections left out for it."""
    by_reason: dict[str, list[str]] = {}
    for item in omitted:
        by_reason.setdefault(item.reason, []).append(item.title)
    return "".join(
        paragraph(f"Not shown: {', '.join(titles)} — {reason}.", "muted")
        for reason, titles in by_reason.items()
    )


def render_report(
    run: RunData, scores: Mapping[str, Any], ctx: ResourceContext | None = None
) -> str:
    """The whole page as a string (write it with UTF-8)."""
    ctx = ctx or resource_context(run)
    parts = suite_kind(run.kind).report_sections(run, scores, ctx)
    parts += comparability_sections(run, ctx)
    per_host = hosts_html(scores.get("hosts"))
    if per_host is not None:  # a Dask run: each host's counts, workers and telemetry
        parts.append(("hosts", "Hosts", per_host))
    parts.append(("provenance", "Provenance", provenance_section(run)))
    shown = [(i, t, html) for i, t, html in parts if not isinstance(html, Omitted)]
    omitted = [html for _, _, html in parts if isinstance(html, Omitted)]
    intro = paragraph(
        f"{run.kind} run, state {run.manifest.get('state', 'unknown')}, {len(run.rows)} attempt rows"
        + (f", {run.torn_lines} torn tail line ignored" if run.torn_lines else "")
        + ". Regenerate with: metewand report "
        + str(run.path)
    )
    answer = verdict.html_block(verdict.verdict_of(run, scores, ctx.summary))
    # at the top, not thousands of pixels down; those the verdict box already says are not repeated
    said = {
        suite_kind(run.kind).failed_attempts(run.rows),
        run_warnings_module.host_gate(run.host_summary),
        run_warnings_module.eligibility(ctx.summary or run.resource_summary),
    }
    warnings = [w for w in run_warnings(run, ctx.summary) if w not in said]
    body = intro + answer + "".join(paragraph(f"warning: {w}", "bad") for w in warnings)
    body += _not_shown(omitted) + "".join(str(html) for _, _, html in shown)
    return page(f"metewand report: {run.run_id}", [(i, t) for i, t, _ in shown], body)
