"""A whole run: plan → materialize (once per configuration) → attempts → rows in the RunStore.

Worker units (one attempt, or warm-ups plus repetitions on a reused worker) go to a thread pool
of ``jobs`` workers in plan order (sequential, or the seeded randomized order of the plan).
Concurrency changes nothing inside an attempt: every envelope and scope stays the same.

Ctrl-C (or SIGTERM): every live worker process is killed, attempts cut short leave neither row
nor artifacts, the run is marked ``interrupted`` and ``KeyboardInterrupt`` propagates (the CLI
exits 130); ``--resume`` runs exactly the attempts without a row.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metewand import __version__
from metewand.measure.host import HostTelemetry
from metewand.measure.host_gate import GateThresholds
from metewand.runtime import rundir
from metewand.runtime.owned import OwnedJournal, sweep
from metewand.runtime.progress import ReporterFactory, RunReporter, null_reporter
from metewand.runtime.rundir import write_json_atomic
from metewand.runtime.store import RunStore, RunView, StoreError
from metewand.suites.compute.execute import AttemptInput, AttemptRun, Timeouts
from metewand.suites.compute.interrupt import (
    RunInterrupted,
    SessionRegistry,
    ignoring_interrupts,
    terminate_as_interrupt,
)
from metewand.suites.compute.launch import Builder, launch_spec
from metewand.suites.compute.manifest import Manifest, load
from metewand.suites.compute.manifest_guard import DEFAULT_MAX_ATTEMPTS
from metewand.suites.compute.materialize import DatasetCache, default_cache_dir
from metewand.suites.compute.plan import Plan, PlannedAttempt, build_plan
from metewand.suites.compute.records import VERSIONS, build_row
from metewand.suites.compute.session import WorkerSession
from metewand.suites.compute.workers import Containment, ImplementationWorker

RowCallback = Callable[[dict[str, Any]], None]


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


def _open_store(options: RunOptions, data: dict[str, Any]) -> RunStore:
    # Absolute: workers run in their attempt dirs, so a relative result_dir would miss.
    out_dir = Path(options.out_dir).absolute()
    if options.resume:
        run_dir = rundir.locate_run_dir(options.resume, out_dir)
        _check_same_benchmark(run_dir, data)  # before the run is touched
        store = RunStore.open(run_dir)
        sweep(run_dir)  # what the killed session left: workers, groups
        return store
    return RunStore.create(out_dir, options.run_id, data)


def _check_same_benchmark(run_dir: Path, data: dict[str, Any]) -> None:
    """A resume appends rows of this manifest: it must be the manifest the run started from."""
    recorded = RunView(run_dir).manifest.get("data", {})
    if recorded.get("suite") != "compute":
        raise StoreError(f"{run_dir} is not a compute run (suite {recorded.get('suite')!r})")
    if recorded.get("manifest_sha256") != data["manifest_sha256"]:
        raise StoreError(
            f"{run_dir} was started from {recorded.get('manifest_path')} "
            f"(sha256 {str(recorded.get('manifest_sha256'))[:12]}…); {data['manifest_path']} "
            f"differs (sha256 {data['manifest_sha256'][:12]}…): refusing to mix two benchmarks "
            "in one run"
        )


def _manifest_data(manifest: Manifest, plan: Plan, jobs: int) -> dict[str, Any]:
    with open(manifest.path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    return {
        "suite": "compute",
        "benchmark": manifest.name,
        "manifest_path": manifest.path,
        "manifest_sha256": digest,
        "tool_version": __version__,
        "versions": {**VERSIONS, "measurements_version": 2},
        "jobs": jobs,
        "planned_attempts": len(plan.attempts),
        "reference_implementation": manifest.reference_implementation,
    }


class ComputeRun:
    def __init__(self, manifest: Manifest, plan: Plan, store: RunStore, options: RunOptions):
        self.manifest, self.plan, self.store, self.options = manifest, plan, store, options
        self.work_dir = str(store.run_dir / rundir.WORK)
        shutil.rmtree(self.work_dir, ignore_errors=True)  # a killed session's leftovers
        os.makedirs(self.work_dir, exist_ok=True)
        # Every group and process this run makes is recorded before it can outlive a kill -9.
        self.journal = OwnedJournal(store.run_dir)
        self.containment = Containment(options.accounting_backend, self.journal.group)
        self.sessions = SessionRegistry()
        self.builder = Builder(
            manifest.root,
            os.path.join(self.work_dir, "build"),
            self.containment,
            on_start=self.journal.process,
        )
        self.cache = DatasetCache(
            options.cache_dir or default_cache_dir(),
            self.work_dir,
            self.builder,
            on_start=self._started,
            containment=self.containment,
        )
        self.reporter: RunReporter = null_reporter(0)
        self.report_lock = threading.Lock()
        first = manifest.experiments[0].policy.jobs if manifest.experiments else 1
        self.jobs = max(1, options.jobs or first)

    def _started(self, session: WorkerSession) -> None:
        if session.pid is not None:
            self.journal.process(session.pid)
        self.sessions.started(session)

    def todo_units(self, summary: RunSummary) -> list[tuple[PlannedAttempt, ...]]:
        done = self.store.finished_keys()
        units = []
        for unit in self.plan.units:
            todo = tuple(a for a in unit if a.key not in done)
            summary.skipped += len(unit) - len(todo)
            if todo:
                units.append(todo)
        return units

    def execute(
        self, units: list[tuple[PlannedAttempt, ...]], on_row: RowCallback | None = None
    ) -> RunSummary:
        summary = RunSummary(str(self.store.run_dir))
        pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="mw-attempt")
        try:
            futures = [pool.submit(self._run_unit, unit, on_row) for unit in units]
            for future in futures:
                summary.rows.extend(future.result())
        except BaseException:
            with ignoring_interrupts():
                self._stop(pool)
            raise
        finally:
            pool.shutdown(wait=True)
            shutil.rmtree(self.work_dir, ignore_errors=True)
        for row in summary.rows:
            summary.attempts += 1
            summary.accepted += row["status"] == "accepted"
            summary.failed += row["status"] == "failed"
        return summary

    def _stop(self, pool: ThreadPoolExecutor) -> None:
        """Drop queued units, kill every live worker, wait for the threads to notice."""
        pool.shutdown(wait=False, cancel_futures=True)
        self.sessions.stop()
        pool.shutdown(wait=True)

    def _run_unit(self, unit: tuple[PlannedAttempt, ...], on_row: RowCallback | None) -> list:
        worker = ImplementationWorker(
            self.options.accounting_backend,
            self.options.log_limit,
            self._started,
            containment=self.containment,
        )
        rows = []
        try:
            for index, attempt in enumerate(unit):
                if self.sessions.stopping:
                    break
                self._report(started=attempt.key)
                row = self._run_attempt(attempt, worker, last=index == len(unit) - 1)
                rows.append(row)
                self._report(finished=str(row["status"]))
                if on_row is not None:
                    on_row(row)
        finally:
            worker.finish(self.options.timeouts.shutdown_s)
        return rows

    def _report(self, started: str | None = None, finished: str | None = None) -> None:
        with self.report_lock:
            if started is not None:
                self.reporter.attempt_started(started)
            if finished is not None:
                self.reporter.attempt_finished(finished)

    def _run_attempt(
        self, attempt: PlannedAttempt, worker: ImplementationWorker, last: bool
    ) -> dict:
        dataset = self.cache.get(attempt.dataset)
        impl_def = self.manifest.implementations[attempt.implementation]
        problem = self.manifest.problems[attempt.problem]
        impl_build = self.builder.build(f"impl-{impl_def.name}", impl_def.launch)
        eval_build = self.builder.build(f"eval-{problem.name}", problem.evaluator)
        setup_error = dataset.error or impl_build.error or eval_build.error
        rel = f"artifacts/{attempt.key}"
        with self.store.artifact_dir(attempt.key) as staging:
            adir = str(staging)
            spec = AttemptInput(
                attempt=attempt,
                problem=problem,
                dataset=dataset,
                implementation=launch_spec(
                    "implementation",
                    impl_def.name,
                    impl_def.launch,
                    adir,
                    impl_build.build_dir,
                    ("one_shot",),
                ),  # fmt: skip
                evaluator=launch_spec(
                    "problem_evaluator", problem.name, problem.evaluator, adir, eval_build.build_dir
                ),
                attempt_dir=adir,
                timeouts=self.options.timeouts,
                setup_error=setup_error,
            )
            outcome = AttemptRun(spec, worker, release_worker=last).run()
            if self.sessions.stopping:  # cut short by the interrupt: not a result
                raise RunInterrupted(attempt.key)
            row = build_row(outcome, dataset.receipt, adir, rel, self.jobs)
        self.store.append(row)
        return row


def run(
    manifest_path: str,
    options: RunOptions,
    progress: RowCallback | None = None,
    reporter: ReporterFactory = null_reporter,
) -> RunSummary:
    """Run (or resume) a manifest; ``progress`` sees each row, ``reporter`` the counts."""
    options = absolute_options(options)
    manifest = load(os.path.abspath(manifest_path))
    plan = build_plan(manifest, options.max_attempts)
    first = manifest.experiments[0].policy.jobs if manifest.experiments else 1
    with terminate_as_interrupt():
        store = _open_store(options, _manifest_data(manifest, plan, options.jobs or first))
        host = _start_host_telemetry(store.run_dir, options)
        try:
            return _execute(ComputeRun(manifest, plan, store, options), progress, reporter)
        except BaseException as exc:
            reason = "interrupted by signal" if isinstance(exc, KeyboardInterrupt) else (
                f"{type(exc).__name__}: {exc}"
            )  # fmt: skip
            store.update_manifest({"interruption_reason": reason})
            store.set_state("interrupted")
            raise
        finally:
            if host is not None:  # whether the machine was quiet enough, even for a cut run
                write_json_atomic(store.run_dir / rundir.HOST_SUMMARY, host.stop())
            sweep(store.run_dir)  # nothing the run made outlives it (and the record goes)
            store.close()


def _start_host_telemetry(run_dir: Path, options: RunOptions) -> HostTelemetry | None:
    """Host load, memory, swap, PSI and foreign CPU beside the run (appended to on resume).

    Workers and evaluators are this process's children, so its tree is the whole benchmark."""
    if options.host_sample_interval_s is None:
        return None
    thresholds = GateThresholds(foreign_cpu_max_cores=options.host_foreign_cpu_max)
    sink = run_dir / rundir.HOST_TELEMETRY
    return HostTelemetry(options.host_sample_interval_s, os.getpid(), sink, thresholds).start()


def _execute(
    compute: ComputeRun, on_row: RowCallback | None, reporter: ReporterFactory
) -> RunSummary:
    skipped = RunSummary(str(compute.store.run_dir))
    units = compute.todo_units(skipped)
    compute.reporter = reporter(sum(len(unit) for unit in units))
    compute.reporter.start()
    try:
        summary = compute.execute(units, on_row)
    finally:
        compute.reporter.close()
    summary.skipped = skipped.skipped
    # Every row of the run, so a resumed run keeps the receipts of its earlier sessions; plus
    # this session's sources of transformed datasets, which no attempt names directly.
    receipts = _receipts(compute.store.rows(), compute.cache.receipts())
    compute.store.update_manifest({"dataset_materializations": receipts})
    compute.store.set_state("complete")
    return summary


def _receipts(
    rows: list[dict[str, Any]], built: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        receipt = row["record"]["provenance"]["data"]["context"]["dataset_materialization"]
        seen.setdefault(receipt["derivation_id"], receipt)
    for receipt in built or []:
        seen.setdefault(receipt["derivation_id"], receipt)
    return list(seen.values())
