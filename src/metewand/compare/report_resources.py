"""The fair-comparison parts of a report: resource summary, card, calibration, eligibility.

``resource_context`` runs the same functions the browser runner runs at the end of a profiled
run (``compare.resource_summary.summarize`` over ``compare.intersection``,
``compare.calibration.calibrate`` against the profiler-off baseline, ``compare.eligibility``),
so ``metewand report RUN --baseline OFF --reference-engine E`` regenerates them from the run
directories alone. The HTML sections below only render what those documents say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metewand.compare import resource_card, stats
from metewand.compare.calibration import CalibrationThresholds, calibrate, calibrate_interleaved
from metewand.compare.html_parts import Omitted, esc, kv_table, paragraph, section, table
from metewand.compare.intersection import Intersection, all_pass_intersection
from metewand.compare.resource_hosts import Calibrator, Row, host_levels
from metewand.compare.resource_hosts_text import headline, host_tables
from metewand.compare.resource_summary import summarize
from metewand.compare.run_facts import MISSING, lookup, manifest_data, read_facts
from metewand.compare.rundir import RunData, load_run
from metewand.compare.suite_registry import suite_kind
from metewand.runtime import rundir

RESOURCE_SUMMARY = rundir.RESOURCE_SUMMARY
RESOURCE_CARD = rundir.RESOURCE_CARD


@dataclass(frozen=True)
class ResourceContext:
    profiled: bool
    reference_engine: str | None
    calibration: dict[str, Any] | None  # compare.calibration.calibrate(...) output
    summary: dict[str, Any] | None  # abb_resource_summary/1, only for a profiled browser run
    # the all-pass intersection behind the summary, built once and reused by the efficiency map
    intersection: Intersection | None = None

    def card(self) -> str | None:
        return resource_card.render(self.summary) if self.summary is not None else None


def _setting(run: RunData, dotted: str) -> Any:
    found = lookup(manifest_data(run.manifest), dotted)
    return None if found is MISSING else found


def is_profiled(run: RunData) -> bool:
    """Engine profiling asked for in the manifest, or resource records in the rows."""
    if read_facts(run.manifest).get("resource_profile") == "engine":
        return True
    return any(isinstance(row.get("resource"), Mapping) for row in run.rows[:200])


def baseline_dir(run: RunData, given: Path | None) -> Path | None:
    """``--baseline`` if given, else the run's own ``--resource-calibration-baseline``."""
    if given is not None:
        return given
    named = read_facts(run.manifest).get("calibration_baseline")
    if not isinstance(named, str) or not named:
        return None
    return rundir.recorded_run_dir(run.path, named)


def _thresholds(run: RunData) -> CalibrationThresholds:
    pct = _setting(run, "resource_profile.max_observer_effect_pct")
    if isinstance(pct, int | float) and not isinstance(pct, bool):
        return CalibrationThresholds.from_observer_effect_pct(float(pct))
    return CalibrationThresholds()


def resource_context(
    run: RunData, baseline: Path | None = None, reference_engine: str | None = None
) -> ResourceContext:
    if not suite_kind(run.kind).has_resources:
        return ResourceContext(False, None, None, None)
    reference = reference_engine or _setting(run, "resource_profile.reference_engine")
    reference = reference if isinstance(reference, str) else None
    calibration, base = None, None
    base_path = baseline_dir(run, baseline)
    interleaved = _setting(run, "resource_profile.calibration") == "interleaved" and not baseline
    if interleaved:
        calibration = calibrate_interleaved(
            run.manifest, run.rows, run.calibration_twins, _thresholds(run)
        )
    elif base_path is not None and base_path.is_dir():
        base = load_run(base_path)
        calibration = calibrate(base.manifest, base.rows, run.manifest, run.rows, _thresholds(run))
        calibration["baseline_run_dir"] = str(base_path)
    profiled = is_profiled(run)
    summary, inter = None, None
    if profiled:
        inter = all_pass_intersection(run.rows, read_facts(run.manifest).engines)
        summary = summarize(
            run.manifest,
            run.rows,
            host_summary=run.host_summary,
            calibration=calibration,
            cold_start_rows=run.cold_start,
            reference_engine=reference,
            intersection=inter,
            hosts=host_levels(
                run.manifest,
                run.rows,
                run.calibration_twins,
                run.cold_start,
                run.dask_hosts,
                _place_calibrator(run, interleaved, base),
                stats.DEFAULT_RESAMPLES,
                stats.DEFAULT_BOOTSTRAP_SEED,
            ),
        )
    return ResourceContext(profiled, reference, calibration, summary, inter)


def _place_calibrator(run: RunData, interleaved: bool, base: RunData | None) -> Calibrator | None:
    """Each host's own calibration: its rows with their interleaved twins, or with the
    baseline run's same attempts (wherever those ran)."""
    thresholds = _thresholds(run)
    if interleaved:

        def with_twins(rows: Sequence[Row], twins: Sequence[Row]) -> dict[str, Any]:
            return calibrate_interleaved(run.manifest, rows, twins, thresholds)

        return with_twins
    if base is None:
        return None
    baseline = base

    def separate(rows: Sequence[Row], _twins: Sequence[Row]) -> dict[str, Any]:
        keys = {(r["task_id"], r["engine"], r["attempt"]) for r in rows}
        mine = [b for b in baseline.rows if (b["task_id"], b["engine"], b["attempt"]) in keys]
        return calibrate(baseline.manifest, mine, run.manifest, rows, thresholds)

    return separate


NOT_PROFILED = "run not profiled (--resource-profile engine measures the engines' CPU and memory)"


def calibration_section(ctx: ResourceContext) -> str | Omitted:
    cal = ctx.calibration
    if cal is None:
        why = (
            "no profiler-off baseline (pass --baseline RUN, or run with "
            "--resource-calibration-baseline)"
        )
        return Omitted("Observer-effect calibration", why if ctx.profiled else NOT_PROFILED)
    verdict = "acceptable" if cal["acceptable"] else "NOT acceptable"
    failed = ", ".join(cal["failed_checks"]) or "none"
    checks = [[c["name"], "pass" if c["passed"] else "FAIL", c["reason"]] for c in cal["checks"]]
    return section(
        "calibration",
        "Observer-effect calibration",
        paragraph(
            f"Interleaved: each attempt of run {cal['profiled_run']} against its unprofiled "
            f"twin on the same engine process: {verdict} (failed checks: {failed})."
            + _split_pairs(cal)
            if cal.get("mode") == "interleaved"
            else f"Profiler-off run {cal['baseline_run']} against profiler-on run "
            f"{cal['profiled_run']}: {verdict} (failed checks: {failed})."
        ),
        table(["check", "result", "reason"], checks),
        "<h3>Overhead figures (all engines)</h3>",
        kv_table(cal.get("overall") or {}, "no pairs"),
    )


def _split_pairs(cal: Mapping[str, Any]) -> str:
    """An interleaved calibration's pairs that ran on two engine processes, said aloud."""
    split = (cal.get("not_same_process") or {}).get("pairs")
    cold = (cal.get("first_on_launch") or {}).get("pairs")
    text = ""
    if split:
        text += (
            f" {split} pair(s) ran on two engine processes (cut by a resume or an engine "
            "relaunch) and are left out of the figures."
        )
    if cold:
        text += (
            f" {cold} pair(s) held a fresh engine process's first attempt (its cold start) "
            "and are left out of the figures."
        )
    return text


def eligibility_section(ctx: ResourceContext) -> str | Omitted:
    if ctx.summary is None:
        return Omitted("Comparison eligibility conditions", NOT_PROFILED)
    s = ctx.summary
    verdict = "eligible" if s["resource_comparison_eligible"] else "NOT eligible"
    rows = [
        [c["id"], c["title"], "pass" if c["passed"] else "FAIL", c["reason"]]
        for c in s["eligibility_conditions"]
    ]
    return section(
        "eligibility",
        "Comparison eligibility conditions",
        paragraph(f"Resource comparison {verdict}: all seven conditions must hold."),
        table(["condition", "meaning", "result", "reason"], rows),
    )


def paired_section(ctx: ResourceContext) -> str | Omitted:
    paired = (ctx.summary or {}).get("paired_vs_reference")
    if not isinstance(paired, Mapping):
        why = "no reference engine (--reference-engine E)" if ctx.profiled else NOT_PROFILED
        return Omitted("Paired ratios vs reference", why)
    rows = []
    for engine, metrics in paired.items():
        for metric, r in metrics.items():
            ci = r.get("median_ratio_ci95")
            rows.append(
                [
                    engine,
                    metric,
                    r.get("median_ratio"),
                    f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else None,
                    r.get("tasks"),
                    r.get("pairs"),
                    r.get("undefined_tasks"),
                ]
            )
    return section(
        "paired",
        f"Paired ratios vs reference engine {ctx.reference_engine}",
        paragraph(
            "Per task: median of the engine's attempts / median of the reference's, over the "
            "all-pass intersection; the median of those ratios with a task-bootstrap 95% CI."
        ),
        table(
            ["engine", "metric", "median ratio", "95% CI", "tasks", "pairs", "undefined tasks"],
            rows,
            (2, 4, 5, 6),
        ),
    )


def hosts_section(ctx: ResourceContext) -> str | None:
    """A profiled Dask run's per-host level (None for a local run)."""
    hosts = (ctx.summary or {}).get("hosts")
    if not isinstance(hosts, Mapping):
        return None
    parts = [paragraph(line, "" if hosts.get("pooled") else "bad") for line in headline(hosts)]
    for t in host_tables(hosts):
        parts += [f"<h3>{esc(t.title)}</h3>", table(list(t.header), [list(r) for r in t.rows])]
        parts += [paragraph(t.note)] if t.note else []
    return section("resource-hosts", "Resource comparison per host", *parts)
