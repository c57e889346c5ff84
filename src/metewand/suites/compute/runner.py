"""A whole compute run: load the manifest, plan, open (or resume) the run directory, and hand
the plan's worker units to the runtime (``runtime.run.Run`` over ``ComputeSuite``, on the local
executor with ``jobs`` slots, in plan order: sequential, or the seeded randomized order of the
plan). Concurrency changes nothing inside an attempt: every envelope and scope stays the same.

The front half (resume checks, the run directory, host telemetry, the executor) and the interrupt
contract are ``runtime.run.start``'s: Ctrl-C (or SIGTERM) kills every live worker process,
attempts cut short leave neither row nor artifacts, the run is marked ``interrupted`` and the
outcome says 130; ``--resume`` runs exactly the attempts without a row.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metewand.errors import OK
from metewand.runtime import provenance, rundir
from metewand.runtime.progress import ReporterFactory, null_reporter
from metewand.runtime.run import (
    ExecutorChoice,
    HostSampling,
    Prepared,
    RunOutcome,
    RunRequest,
    start,
)
from metewand.runtime.store import RunStore, RunView, StoreError
from metewand.runtime.suite import Row, Unit
from metewand.suites.compute.ab import Baseline, ab_plan, load_baseline, manifest_facts
from metewand.suites.compute.execute import Timeouts
from metewand.suites.compute.experiment_select import recorded, select
from metewand.suites.compute.identities import LEGACY_IDENTITY_RECIPE
from metewand.suites.compute.manifest import Manifest
from metewand.suites.compute.manifest_guard import DEFAULT_MAX_ATTEMPTS
from metewand.suites.compute.manifest_load import load
from metewand.suites.compute.plan import Plan
from metewand.suites.compute.plan_expand import build_plan
from metewand.suites.compute.records import VERSIONS
from metewand.suites.compute.suite import ComputeSuite, suite_config
from metewand.version import tool_version


@dataclass
class RunOptions:
    out_dir: str = "runs"
    run_id: str | None = None
    resume: str | None = None  # a run id under out_dir, or a run directory
    jobs: int | None = None  # None: the policies' own jobs
    cache_dir: str | None = None
    accounting_backend: str = "auto"
    timeouts: Timeouts = field(default_factory=Timeouts)
    log_limit: int = 1 << 20
    host_sample_interval_s: float | None = 1.0  # None: no host telemetry
    max_attempts: int = DEFAULT_MAX_ATTEMPTS  # a larger plan is refused before expansion
    host_foreign_cpu_max: float = 0.10  # cores beside the run that trip foreign_cpu_load
    executor: ExecutorChoice = field(default_factory=ExecutorChoice)  # local, or dask
    phase_marks: bool = True  # --no-phase-marks: attempts take no phase marks (rows' phases null)
    ab_baseline: str | None = None  # --ab-baseline: an interleaved A/B run against this tree
    experiments: tuple[str, ...] = ()  # --experiment: only these of the manifest (empty: all)


@dataclass
class RunSummary:
    run_dir: str
    attempts: int = 0
    accepted: int = 0
    failed: int = 0
    skipped: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)


def absolute_options(options: RunOptions) -> RunOptions:
    """Relative ``out_dir``, ``cache_dir`` and ``resume`` resolved once, against the cwd the run
    was started from: workers and build steps run in other directories (the manifest's, the
    attempt's), where a relative ``runs/<id>/…`` would name nothing."""
    resume = options.resume
    if resume is not None:
        resume = os.path.abspath(rundir.locate_run_dir(resume, options.out_dir))
    return dataclasses.replace(
        options,
        out_dir=os.path.abspath(options.out_dir),
        cache_dir=os.path.abspath(options.cache_dir) if options.cache_dir else None,
        resume=resume,
    )


def _check_same_benchmark(view: RunView, data: dict[str, Any]) -> None:
    """A resume appends rows of this manifest: it must be the manifest the run started from
    (the phase-mark rule every suite shares is ``runtime.run.check_phase_marks``)."""
    run_dir = view.run_dir
    recorded = view.manifest.get("data", {})
    if recorded.get("suite") != "compute":
        raise StoreError(f"{run_dir} is not a compute run (suite {recorded.get('suite')!r})")
    if recorded.get("manifest_sha256") != data["manifest_sha256"]:
        raise StoreError(
            f"{run_dir} was started from {recorded.get('manifest_path')} "
            f"(sha256 {str(recorded.get('manifest_sha256'))[:12]}…); {data['manifest_path']} "
            f"differs (sha256 {data['manifest_sha256'][:12]}…): refusing to mix two benchmarks "
            "in one run"
        )
    if recorded.get("selected_experiments") != data["selected_experiments"]:
        raise StoreError(
            f"{run_dir} was run with {_selection(recorded.get('selected_experiments'))}; "
            f"resuming with {_selection(data['selected_experiments'])} would leave the run "
            "with a plan it never had"
        )
    recorded_tree = (recorded.get("ab") or {}).get("baseline_tree")
    tree = (data.get("ab") or {}).get("baseline_tree")
    if recorded_tree != tree:
        raise StoreError(
            f"{run_dir} was run with --ab-baseline {recorded_tree}; resuming with "
            f"{tree or 'no --ab-baseline'} would mix two designs in one run"
        )
    recipe = recorded.get("versions", {}).get("identity_recipe", LEGACY_IDENTITY_RECIPE)
    if recipe != VERSIONS["identity_recipe"]:
        raise StoreError(
            f"{run_dir} was planned with identity recipe {recipe} (metewand's record bodies "
            f"before the Rust field sets); this metewand plans with recipe "
            f"{VERSIONS['identity_recipe']}, whose attempt keys differ: its rows stay readable, "
            "but it cannot be resumed; start a new run"
        )
    _check_rows_resumable(view)


def _selection(names: list[str] | None) -> str:
    return " ".join(f"--experiment {name}" for name in names) if names else "every experiment"


RECEIPT_PATH = ("record", "provenance", "data", "context", "dataset_materialization")


def _check_rows_resumable(view: RunView) -> None:
    """Every row a resume keeps must be a compute row whole enough to finish the run with (its
    dataset receipt is read at the end): a row without one is refused, naming its line."""
    for number, row in enumerate(view.rows(), start=1):
        value: Any = row
        for key in RECEIPT_PATH:
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, dict) or not isinstance(value.get("derivation_id"), str):
            raise StoreError(
                f"{view.run_dir / rundir.RESULTS}:{number}: not a compute row "
                f"(no {'.'.join(RECEIPT_PATH)}.derivation_id); refusing to resume"
            )


def _benchmark_facts(
    manifest: Manifest, plan: Plan, jobs: int, options: RunOptions
) -> dict[str, Any]:
    """The manifest data that says which benchmark this is (what a resume is checked against)."""
    with open(manifest.path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    return {
        "suite": "compute",
        "benchmark": manifest.name,
        "manifest_path": manifest.path,
        "manifest_sha256": digest,
        "tool_version": tool_version(),
        "versions": {**VERSIONS, "measurements_version": 2},
        "jobs": jobs,
        "planned_attempts": len(plan.attempts),
        # --experiment: the experiments planned (null: all of the manifest's)
        "selected_experiments": recorded(options.experiments),
        "reference_implementation": manifest.reference_implementation,
        # whether attempts took phase marks (their reads are inside the timed envelope)
        "phase_marks": options.phase_marks,
    }


@dataclass
class _ComputeStart:
    """The compute suite's part of ``runtime.run.start`` (a ``RunStarter``)."""

    manifest: Manifest
    plan: Plan
    options: RunOptions
    jobs: int
    data: dict[str, Any]
    baseline: Baseline | None
    name: str = "compute"

    def check_resume(self, view: RunView) -> None:
        _check_same_benchmark(view, self.data)

    def new_run(
        self, run_id: str, facts: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        ab = {"ab": self.data["ab"]} if "ab" in self.data else {}
        benchmark = {key: value for key, value in self.data.items() if key != "ab"}
        return {
            **benchmark,
            # the commit of the benchmarked tree (the history's axis); run.start adds host, runner
            "benchmarked_tree": provenance.benchmarked_tree(os.path.dirname(self.manifest.path)),
            **ab,
        }, None

    def on_open(self, store: RunStore) -> None:
        pass

    def prepare(self, store: RunStore, executor: ExecutorChoice) -> Prepared:
        options = self.options
        suite = ComputeSuite(
            self.manifest,
            self.plan,
            store,
            jobs=self.jobs,
            cache_dir=options.cache_dir,
            accounting_backend=options.accounting_backend,
            timeouts=options.timeouts,
            log_limit=options.log_limit,
            phase_marks=options.phase_marks,
            pair_on_host=executor.kind == "dask",
            baseline=self.baseline,
        )
        interval = options.host_sample_interval_s
        # workers and evaluators are this process's children: its tree is the whole benchmark
        host = None if interval is None else HostSampling(interval, options.host_foreign_cpu_max)
        return Prepared(
            suite,
            list(suite.units()),
            self.jobs,
            lambda: _ref_config(self.manifest, store.run_dir, options, self.jobs),
            host,
        )


def start_run(
    manifest_path: str,
    options: RunOptions,
    reporter: ReporterFactory = null_reporter,
) -> tuple[RunOutcome, RunSummary | None]:
    """Run (or resume) a manifest through ``runtime.run.start``: the outcome (exit code and what
    to say), and the summary when the run completed; ``reporter`` shows the counts."""
    options = absolute_options(options)
    manifest = select(load(os.path.abspath(manifest_path)), options.experiments)
    plan = build_plan(manifest, options.max_attempts)
    baseline = None
    if options.ab_baseline is not None:
        baseline = load_baseline(manifest.path, options.ab_baseline)
        plan = ab_plan(plan, baseline)
    first = manifest.experiments[0].policy.jobs if manifest.experiments else 1
    jobs = max(1, options.jobs or first)
    data = _benchmark_facts(manifest, plan, options.jobs or first, options)
    if baseline is not None:
        data["ab"] = manifest_facts(baseline, manifest, plan)
    starter = _ComputeStart(manifest, plan, options, jobs, data, baseline)
    request = RunRequest(
        Path(options.out_dir),
        options.run_id,
        Path(options.resume) if options.resume is not None else None,
        options.executor,
        options.phase_marks,
        reporter,
    )
    outcome = start(starter, request)
    if outcome.exit_code != OK or outcome.run_dir is None:
        return outcome, None
    return outcome, _summary(outcome.run_dir, plan, outcome.units, outcome.rows())


def run(
    manifest_path: str,
    options: RunOptions,
    reporter: ReporterFactory = null_reporter,
) -> RunSummary:
    """``start_run`` for callers that want an exception (the one that ended the run) instead of
    an outcome: the API's, the conformance runs', the tests'."""
    outcome, summary = start_run(manifest_path, options, reporter)
    if summary is None:
        if outcome.error is not None:
            raise outcome.error
        raise StoreError("; ".join(line.removeprefix("error: ") for line in outcome.lines))
    return summary


def _ref_config(
    manifest: Manifest, run_dir: Path, options: RunOptions, jobs: int
) -> dict[str, Any]:
    return suite_config(
        manifest.path,
        options.max_attempts,
        run_dir,
        jobs=jobs,
        cache_dir=options.cache_dir,
        accounting_backend=options.accounting_backend,
        timeouts=options.timeouts,
        log_limit=options.log_limit,
        phase_marks=options.phase_marks,
        ab_baseline=options.ab_baseline,
        experiments=options.experiments,
    )


def _summary(run_dir: Path, plan: Plan, units: list[Unit], rows: list[Row]) -> RunSummary:
    """This session's rows in plan order; ``skipped``: planned attempts done by earlier ones."""
    order = {attempt.key: index for index, attempt in enumerate(plan.attempts)}
    summary = RunSummary(str(run_dir))
    summary.rows = sorted(rows, key=lambda row: order[str(row["key"])])
    summary.skipped = len(plan.attempts) - sum(len(unit.keys) for unit in units)
    for row in summary.rows:
        summary.attempts += 1
        summary.accepted += row["status"] == "accepted"
        summary.failed += row["status"] == "failed"
    return summary
