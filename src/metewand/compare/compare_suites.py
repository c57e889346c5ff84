"""The compute and browser suite kinds: how their rows are grouped, read, scored and reported.

Adding a suite means registering one more ``SuiteKind`` (``compare.suite_registry``) here;
nothing else in ``compare`` branches on the suite name. The report's HTML sections are imported
when a report is drawn, so ``metewand compare`` does not pay for numpy plots it never makes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from metewand.compare import (
    browser_code,
    browser_phases,
    cases,
    compute_rows,
    hosts,
    pollution,
    verdict,
)
from metewand.compare.case_text import cases_csv
from metewand.compare.columns import metric_value
from metewand.compare.driver_costs import driver_path_of, rollup
from metewand.compare.phase_costs import PHASE_METRICS, phase_value
from metewand.compare.resource_metrics import BROWSER_RESOURCE_METRICS as BROWSER_RESOURCE_METRICS
from metewand.compare.resource_metrics import form_value
from metewand.compare.run_facts import ENGINE_PIN_FIELDS, MISSING, lookup, manifest_data
from metewand.compare.run_warnings import browser_failed_attempts, compute_failed_attempts
from metewand.compare.rundir import RunData
from metewand.compare.scorecard import browser_scorecard, compute_scorecard
from metewand.compare.scores import browser_scores, compute_scores
from metewand.compare.suite_registry import Group, Section, SuiteKind, register
from metewand.runtime import rundir

if TYPE_CHECKING:
    from metewand.compare.report_resources import ResourceContext

ENGINE_CPU = "engine_cpu_ns"  # the engine group's CPU over one attempt, from its phase marks
HOST_FACTS = ("hostname", "kernel", "cpu_model", "machine", "cpu_count", "platform")


def _found(data: Mapping[str, Any], *paths: str) -> Any:
    """The first of ``paths`` present in ``data`` (None when none is)."""
    for path in paths:
        value = lookup(data, path)
        if value is not MISSING and value is not None:
            return value
    return None


def common_provenance(run: RunData) -> dict[str, Any]:
    """Host, metewand version, source tree and its dirty flag, pollution-gate verdict."""
    data = manifest_data(run.manifest)
    host: Mapping[str, Any] = {}
    for candidate in (lookup(data, "host"), (run.host_summary or {}).get("host")):
        if isinstance(candidate, Mapping):
            host = {**candidate, **host}
    facts: dict[str, Any] = {f"host.{name}": host.get(name) for name in HOST_FACTS}
    facts["metewand_version"] = _found(data, "tool_version", "runner.version")
    facts["source_tree_sha256"] = _found(data, "runner.source.tree_sha256", "harness_pin")
    facts["source_git_commit"] = _found(data, "runner.git.commit")
    facts["source_dirty"] = _found(data, "runner.git.dirty")
    gate = (run.host_summary or {}).get("gate")
    facts["pollution_gate_passed"] = gate.get("passed") if isinstance(gate, Mapping) else None
    # a Dask run's rows name the hosts they ran on: other hosts, another comparison
    row_hosts = hosts.rows_by_host(run.rows)
    facts["row_hosts"] = ",".join(row_hosts) if row_hosts else None
    return {k: v for k, v in facts.items() if v is not None}


# ---- compute ----


def _compute_group(row: Mapping[str, Any]) -> Group | None:
    if compute_rows.is_warmup(row):
        return None
    return (cases.case_label(cases.case_of(row)), cases.implementation_label(row, side=False))


def _compute_family(metric: str) -> str:
    if metric == "cpu_time_ns" or metric.endswith(".cpu_ns"):
        return pollution.CPU
    if metric.endswith("_bytes"):
        return pollution.MEMORY
    return pollution.WALL  # timed wall, the phase timers, phase.<name>.wall_ns


def _compute_companion(metric: str) -> str | None:
    pairs = {"timed_wall_time_ns": "cpu_time_ns", "cpu_time_ns": "timed_wall_time_ns"}
    if metric in pairs:
        return pairs[metric]
    return _phase_companion(metric)


def _phase_companion(metric: str) -> str | None:
    """``phase.<name>.wall_ns`` <-> ``phase.<name>.cpu_ns``."""
    if metric.startswith("phase.") and metric.endswith(".wall_ns"):
        return metric.removesuffix(".wall_ns") + ".cpu_ns"
    if metric.startswith("phase.") and metric.endswith(".cpu_ns"):
        return metric.removesuffix(".cpu_ns") + ".wall_ns"
    return None


SPEED_PROBE = "phase.prepare.cpu_ns"
# the implementation process's own time after prepare: what the probe's speed applies to (not
# the evaluator's or the materializer's, other processes, nor prepare itself)
SPEED_ADJUSTED = frozenset(
    {
        "timed_wall_time_ns",
        "cpu_time_ns",
        "execute_request_time_ns",
        "phase.execute.wall_ns",
        "phase.execute.cpu_ns",
    }
)


def _compute_speed_probe(metric: str, paired: bool) -> str | None:
    """The worker's prepare phase (it loads the dataset: the same work on both sides) as its
    process's speed, for the implementation's own time metrics. Pairs ran back to back, so what
    differs between their halves is each process's CPU speed: prepare's CPU. Separate runs also
    differ by the host's drift between them, and on a wall metric that includes waits only
    prepare's wall sees: on the two kept work dirs of compare_false_alarms.py, the wall probe
    left 0 unchanged groups flagged in the planted runs where the CPU probe left 1 and 1; in
    pairs the CPU probe found more (96% / 88% of planted groups against 92% / 80%)."""
    if metric not in SPEED_ADJUSTED:
        return None
    if not paired and _compute_family(metric) == pollution.WALL:
        return "phase.prepare.wall_ns"
    return SPEED_PROBE


def _compute_value(row: Mapping[str, Any], metric: str) -> float | None:
    if not compute_rows.is_accepted(row):
        return None
    if metric.startswith(
        "phase."
    ):  # phase.<name>.<wall_ns|cpu_ns|memory_peak_bytes>: the row's phase marks
        return phase_value(row, metric)
    value, _ = metric_value(compute_rows.measurements_of(row), metric)
    return value


def _compute_status(row: Mapping[str, Any]) -> str:
    if compute_rows.is_accepted(row):
        return "pass"
    diagnostic = compute_rows.diagnostic_of(row) or {}
    return f"failed:{diagnostic.get('code')}"


def _compute_provenance(run: RunData) -> dict[str, Any]:
    facts = common_provenance(run)
    data = manifest_data(run.manifest)
    facts["manifest_sha256"] = lookup(data, "manifest_sha256")
    # marks read counters inside the timed wall: runs with and without them differ in observer
    facts["phase_marks"] = lookup(data, "phase_marks")
    # The implementation configuration digest in each attempt key pins the worker's entrypoint,
    # arguments and environment: a changed worker shows up here.
    configs: dict[str, set[str]] = {}
    for row in run.rows:
        key = str(row.get("key", ""))
        impl = compute_rows.implementation_of(row)
        digest = next(
            (p.split("@", 1)[1] for p in key.split("/") if p.startswith(impl + "@")), None
        )
        if digest:
            configs.setdefault(impl, set()).add(digest)
    for impl, digests in sorted(configs.items()):
        facts[f"implementation_config.{impl}"] = ",".join(sorted(digests))
    return {k: v for k, v in facts.items() if v is not None and v is not MISSING}


def _compute_sections(
    run: RunData, scores: Mapping[str, Any], _ctx: ResourceContext
) -> list[Section]:
    from metewand.compare.report_html import compute_sections

    return compute_sections(run, scores)


def _compute_csv_files(scores: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """cases.csv: one line per case x implementation x metric."""
    return {"cases_csv": (rundir.CASES_CSV, cases_csv(scores["cases"]))}


register(
    SuiteKind(
        name="compute",
        group_names=("case", "implementation"),
        default_metric="timed_wall_time_ns",
        metrics=(*cases.CASE_METRICS, *PHASE_METRICS),
        group_of=_compute_group,
        value_of=_compute_value,
        status_of=_compute_status,
        provenance_of=_compute_provenance,
        scores_of=compute_scores,
        scorecard_of=compute_scorecard,
        failed_attempts=compute_failed_attempts,
        report_sections=_compute_sections,
        resource_sections=lambda _ctx: [],  # no engine comparison in a compute run
        has_resources=False,
        verdict_of=lambda run, scores, _summary: verdict.compute_verdict(run, scores),
        csv_files=_compute_csv_files,
        run_end_formats=(),  # a compute run ends with rows and raw files; `report` derives
        launches_of=compute_rows.launches_of,
        metric_family=_compute_family,
        companion_of=_compute_companion,
        ab_of=compute_rows.ab_of,
        speed_probe_of=_compute_speed_probe,
        code_of=lambda _run: lambda row: row.get("implementation_configuration"),
    )
)


# ---- browser ----


def _browser_group(row: Mapping[str, Any]) -> Group | None:
    task = row.get("task_id")
    return (str(task), str(row.get("engine", ""))) if task is not None else None


def _browser_value(row: Mapping[str, Any], metric: str) -> float | None:
    if row.get("status") != "pass":
        return None  # a failed attempt did a different amount of work
    if metric == "duration_ms":
        return form_value(row.get("duration_ms"))
    if metric == ENGINE_CPU:  # the engine group's CPU over the attempt (phase marks on)
        return browser_phases.engine_cpu_ns(row)
    if metric.startswith("phase."):  # phase.<name>.<wall_ns|cpu_ns>: the engine group's phase
        return browser_phases.phase_value(row, metric)
    value, _ = metric_value(row.get("resource"), metric)
    return value


def _browser_launches(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The engine process each attempt ran on (its worker slot and generation): one engine
    process usually serves every attempt of a task, so its attempts are repetitions in it."""
    out = []
    for row in rows:
        context = row.get("run_context")
        context = context if isinstance(context, Mapping) else {}
        generation = context.get("browser_generation")
        if generation is None:
            out.append(f"attempt:{row.get('key')}")
        else:
            out.append(f"engine:{row.get('engine')}:{context.get('worker_slot')}:{generation}")
    return out


def _browser_family(metric: str) -> str:
    if metric in ("cpu_total_ms", "cpu_user_ms", "cpu_system_ms", ENGINE_CPU):
        return pollution.CPU
    if metric.endswith(".cpu_ns"):
        return pollution.CPU
    if metric.endswith("_bytes"):
        return pollution.MEMORY
    if metric == "process_count_peak":
        return pollution.OTHER
    return pollution.WALL  # duration_ms, phase.<name>.wall_ns


def _browser_companion(metric: str) -> str | None:
    pairs = {"duration_ms": ENGINE_CPU, ENGINE_CPU: "duration_ms"}
    return pairs.get(metric) or _phase_companion(metric)


def _browser_status(row: Mapping[str, Any]) -> str:
    return str(row.get("status", "infra"))


def _browser_provenance(run: RunData) -> dict[str, Any]:
    facts = common_provenance(run)
    data = manifest_data(run.manifest)
    engines = lookup(data, "engines")
    if isinstance(engines, Mapping):
        for engine, pins in sorted(engines.items()):
            if isinstance(pins, Mapping):
                for field in ENGINE_PIN_FIELDS:
                    if field in pins and field != "binary_path":
                        facts[f"engine.{engine}.{field}"] = pins[field]
    corpus = lookup(data, "corpus")
    if isinstance(corpus, Mapping):  # its content digest: the same corpus elsewhere is the same
        facts["corpus_sha256"] = corpus.get("sha256")
    marks = lookup(data, "phase_marks")
    if marks is not MISSING:  # marks read counters in every attempt: part of the observer
        facts["phase_marks"] = marks
    profile = lookup(data, "resource_profile.mode")
    if profile is not MISSING:
        facts["resource_profile"] = profile
    calibration = lookup(data, "resource_profile.calibration")
    if calibration is not MISSING:  # separate A/B or interleaved twins: different observers
        facts["resource_calibration"] = calibration
    # the client library each driver path ran (a changed Playwright is a changed comparison), and
    # how its adapter ran (a served adapter skips start-up: a changed mode changes the cost)
    for field in ("driver_version", "adapter_mode"):
        for path, found in sorted(_per_driver_path(run.rows, field).items()):
            facts[f"driver.{path}.{field.removeprefix('driver_')}"] = ",".join(sorted(found))
    return facts


def _per_driver_path(rows: list[dict[str, Any]], field: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for row in rows:
        if row.get("driver_path") and row.get(field):
            found.setdefault(str(row["driver_path"]), set()).add(str(row[field]))
    return found


def _browser_rollups(rows: list[dict[str, Any]]) -> dict[str, dict[Group, Any]]:
    """Pass rates and the driver's own cost per subset x engine and per driver path x engine."""
    return {
        "subset": rollup(rows, lambda r: str(r.get("subset_id") or r.get("subset") or "")),
        "driver_path": rollup(rows, driver_path_of),
    }


def _browser_scores(
    rows: list[dict[str, Any]], manifest: Mapping[str, Any], _reference: str | None
) -> dict[str, Any]:
    return browser_scores(rows, manifest)  # the reference engine matters to the resource summary


def _browser_sections(
    run: RunData, scores: Mapping[str, Any], ctx: ResourceContext
) -> list[Section]:
    from metewand.compare.columns import browser_columns
    from metewand.compare.report_browser import browser_sections

    return browser_sections(run, scores, browser_columns(run.rows), ctx.intersection)


def _browser_resource_sections(ctx: ResourceContext) -> list[Section]:
    from metewand.compare import report_resources as res

    sections = [
        ("paired", "Ratios", res.paired_section(ctx)),
        ("calibration", "Calibration", res.calibration_section(ctx)),
        ("eligibility", "Eligibility", res.eligibility_section(ctx)),
    ]
    per_host = res.hosts_section(ctx)  # a profiled Dask run: each host's verdict, pooling
    if per_host is not None:
        sections.append(("resource-hosts", "Per host", per_host))
    return sections


register(
    SuiteKind(
        name="browser",
        group_names=("task", "engine"),
        default_metric="duration_ms",
        metrics=("duration_ms", ENGINE_CPU, *BROWSER_RESOURCE_METRICS),
        # phase names are the tasks' own (step1:Runtime.evaluate): any well-formed one
        accepts_metric=browser_phases.is_phase_metric,
        group_of=_browser_group,
        value_of=_browser_value,
        status_of=_browser_status,
        provenance_of=_browser_provenance,
        rollups_of=_browser_rollups,
        scores_of=_browser_scores,
        scorecard_of=browser_scorecard,
        failed_attempts=browser_failed_attempts,
        report_sections=_browser_sections,
        resource_sections=_browser_resource_sections,
        has_resources=True,
        verdict_of=lambda run, _scores, summary: verdict.browser_verdict(run, summary),
        csv_files=lambda _scores: {},
        # scores.json, and for a profiled run resource_summary.json + resource-card.md
        run_end_formats=("json",),
        launches_of=_browser_launches,
        metric_family=_browser_family,
        companion_of=_browser_companion,
        code_of=browser_code.codes_of,
    )
)
