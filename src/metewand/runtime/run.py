"""One run of any suite, from its directory's creation (or resumption) to its final state.

``start(starter, RunRequest) -> RunOutcome`` is the front half of every run, the same for every
suite: the suite's resume refusals (``RunStarter.check_resume``) and the shared ones
(``check_phase_marks``: a resume never changes the phase-mark choice), the provenance collected
once for a new run's manifest, the store opened, host telemetry made once (``host_telemetry``),
then ``Run.execute`` on the local executor or a Dask session (``ExecutorChoice``). What ends a run
early is an outcome, never an exception that reaches the command (one interrupt contract):
exit 130 interrupted, 3 no usable cluster, 1 the harness broke, 2 refused; every command says it
and exits with it through ``RunOutcome.report``. The suites keep their plan, their own resume
checks and their summary; ``runtime`` names no suite.

Every run goes through the same steps, in this order:

1. ``open_store``: create ``out/<run_id>`` with the suite's manifest data, or reopen a run to
   resume it once the suite's refusal rules (``check_resume``) accepted its read-only view; then
   sweep what a killed session of the run left (workers, engines, accounting groups).
2. ``Run.execute``: host telemetry starts; the executor runs the suite's units, each row going
   to the store (and the progress reporter) as soon as it exists; SIGTERM means what Ctrl-C
   means for the whole time (one interrupt contract for both suites).
3. The end, whatever happened: host telemetry stops and writes ``host_summary.json``,
   ``suite.teardown()`` stops what the suite started outside its slots, everything the run recorded in ``owned.jsonl`` is swept, and
   ``suite.finish(completed)`` records the end-of-run facts in the manifest. Then:

   - completed: the state is ``complete`` (the derived files are the caller's: a run writes rows
     and raw files only);
   - interrupted (Ctrl-C, SIGTERM): state ``interrupted``, reason ``interrupted by signal``, and
     ``KeyboardInterrupt`` propagates (``start`` makes it the outcome 130; ``--resume`` runs the
     attempts without a row);
   - the harness broke (an exception from the suite): state ``interrupted``, the reason
     ``harness failed: <type>: <message>`` in the manifest, the traceback in
     ``harness_error.txt``, and the exception propagates (``start``: the outcome 1).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from metewand import canonical
from metewand.errors import (
    BENCHMARK_FAILURES,
    INTERRUPTED,
    OK,
    InvalidInput,
    MetewandError,
)
from metewand.measure.host import HostTelemetry, Spool
from metewand.measure.host_gate import GateThresholds
from metewand.runtime import provenance, run_sessions, rundir
from metewand.runtime.executor import Executor, LocalExecutor
from metewand.runtime.interrupts import ignoring_interrupts, sigterm_as_interrupt
from metewand.runtime.owned import sweep
from metewand.runtime.progress import ReporterFactory, RunReporter, null_reporter
from metewand.runtime.rundir import write_json_atomic
from metewand.runtime.store import RunStore, RunView, StoreError, new_run_id
from metewand.runtime.suite import Row, Suite, SuiteRef, Unit

HARNESS_ERROR_FILE: Final = rundir.HARNESS_ERROR
INTERRUPTED_REASON: Final = "interrupted by signal"


def open_store(
    out_dir: Path | str,
    run_id: str | None,
    resume: Path | str | None,
    data: dict[str, Any] | Callable[[], dict[str, Any]],
    top_level: dict[str, Any] | None = None,
    check_resume: Callable[[RunView], None] | None = None,
    on_open: Callable[[RunStore], None] | None = None,
) -> RunStore:
    """A new run (``data``: its manifest data, or what makes it) or the resumed ``resume``.

    A resume is checked on a read-only view first, so a refused one leaves the run directory as
    it was (no ``resumed_at``, no state change, no torn-tail repair). ``on_open`` sees the
    store once this process holds it, before the sweep (the browser suite's engine leftovers)."""
    if resume is not None:
        run_dir = Path(resume)
        if check_resume is not None:
            check_resume(RunView(run_dir))
        store = RunStore.open(run_dir)
    else:
        manifest_data = data() if callable(data) else data
        store = RunStore.create(out_dir, run_id, manifest_data, top_level)
    if on_open is not None:
        on_open(store)
    sweep(store.run_dir)  # what a killed session left behind: workers, engines, groups
    return store


class _StoreSink:
    """Each row into the store the moment it exists, and into the progress reporter. Only its
    key stays in memory: a browser row is ~55 KB of Python objects, so keeping the rows grew the
    harness by that much an attempt for the whole run (275 MB over 5,000 attempts), and every
    full collection of the garbage collector walked them all, wherever in an attempt it fell.
    Whoever wants them at the end reads them back (``RunOutcome.rows``)."""

    def __init__(self, store: RunStore, reporter: RunReporter) -> None:
        self.store = store
        self.reporter = reporter
        self.keys: list[str] = []

    def attempt_started(self, label: str) -> None:
        self.reporter.attempt_started(label)

    def attempt_finished(self, row: Row) -> None:
        self.store.append(row)
        self.keys.append(str(row["key"]))
        status = str(row["status"])
        # a row kept out of the scores (an interleaved calibration's unprofiled twin) is counted
        # apart, so the progress never shows more scored attempts than the matrix has
        if row.get("score_included") is False:
            status += ", not scored"
        self.reporter.attempt_finished(status)


class Run:
    """A run in progress: its store, host telemetry and reporter (see the module doc)."""

    def __init__(
        self,
        store: RunStore,
        host: HostTelemetry | None = None,
        reporter: ReporterFactory = null_reporter,
    ) -> None:
        self.store = store
        self.host = host
        self.reporter = reporter

    def execute(
        self,
        suite: Suite,
        executor: Executor,
        units: Sequence[Unit],
    ) -> list[str]:
        """Run ``units`` to the end; returns the keys of this session's rows in the order they
        were made."""
        progress = self.reporter(sum(len(unit.keys) for unit in units))
        sink = _StoreSink(self.store, progress)
        ended = False
        with sigterm_as_interrupt():
            try:
                if self.host is not None:
                    self.host.start()
                suite.prepare()
                progress.start()
                try:
                    executor.run(suite, units, sink)
                finally:
                    progress.close()
                ended = True
                self._end(suite, completed=True)
            except BaseException as exc:
                # A run is never left "running" by this process: cut during its end (a second
                # signal, a broken end-of-run fact) it is interrupted, and resumable, too.
                with ignoring_interrupts():
                    if not ended:
                        self._end(suite, completed=False)
                    self._mark_interrupted(exc)
                raise
            self.store.set_state("complete")
        return sink.keys

    def _end(self, suite: Suite, completed: bool) -> None:
        if self.host is not None:  # whether the machine was quiet enough, even for a cut run
            write_json_atomic(self.store.run_dir / rundir.HOST_SUMMARY, self.host.stop())
            self.host = None
        try:
            suite.teardown()
        finally:
            sweep(self.store.run_dir)  # nothing the run made outlives it
        suite.finish(completed)

    def _mark_interrupted(self, exc: BaseException) -> None:
        if isinstance(exc, KeyboardInterrupt):
            reason = INTERRUPTED_REASON
        else:
            reason = f"harness failed: {type(exc).__name__}: {exc}"
            error_file = rundir.side_file(self.store.run_dir, HARNESS_ERROR_FILE)
            rundir.write_text_atomic(error_file, "".join(traceback.format_exception(exc)))
        self.store.update_manifest({"interruption_reason": reason})
        self.store.set_state("interrupted")


# -- the front half of every run: plan → resume check → open store → Run → local or Dask ---------


@dataclass(frozen=True)
class ExecutorChoice:
    """Where the units run, spelled one way for every suite: ``local`` (``jobs`` slots here) or
    ``dask`` (exactly one of ``scheduler``, a running cluster's ``tcp://HOST:PORT``, and
    ``local_workers``, a LocalCluster of that many worker processes; the CLI checks the flags)."""

    kind: str = "local"
    scheduler: str | None = None
    local_workers: int | None = None


@dataclass(frozen=True)
class HostSampling:
    """Host telemetry beside a run: how often, and how much foreign CPU trips the gate."""

    interval_s: float
    foreign_cpu_max_cores: float


def host_telemetry(
    sampling: HostSampling | None,
    root_pid: int,
    sink: Path | None,
    members: Callable[[], list[int]] | None = None,
) -> HostTelemetry | None:
    """The run's host telemetry (not started), or None when the run samples none. ``sink``:
    ``host_telemetry.jsonl`` (None: a private spool, a Dask worker's); ``members``: pids
    outside ``root_pid``'s tree that are still the benchmark's (never foreign CPU)."""
    if sampling is None:
        return None
    thresholds = GateThresholds(foreign_cpu_max_cores=sampling.foreign_cpu_max_cores)
    return HostTelemetry(
        sampling.interval_s,
        root_pid,
        sink if sink is not None else Spool(),
        thresholds,
        member_pids=members,
    )


@dataclass
class Prepared:
    """What a suite hands ``start`` once the run directory is open: the suite, the units left,
    the Dask ``SuiteRef`` config (only asked for on Dask), and its host telemetry wishes."""

    suite: Suite
    units: list[Unit]
    jobs: int  # the local executor's slots
    dask_config: Callable[[], dict[str, Any]]
    host: HostSampling | None = None
    host_members: Callable[[], list[int]] | None = None
    adopt_host: Callable[[HostTelemetry | None], None] | None = None


class RunStarter(Protocol):
    """A suite's part of the front half; ``start`` does the rest, the same for every suite.

    ``name``: the suite's registered name (its Dask ``SuiteRef``). ``check_resume``: the suite's
    own refusals of a resume, on a read-only view (``InvalidInput``: exit 2). ``new_run``: the
    manifest data and top-level fields of a new run, given its id and the provenance collected
    once (``provenance.collect(list_files=True)``; ``start`` itself writes its ``host`` and
    ``runner`` into the data, so a suite does not). ``on_open``: the store once held, before the
    sweep of what a killed session left. ``prepare``: the suite and its units."""

    name: str

    def check_resume(self, view: RunView) -> None: ...

    def new_run(
        self, run_id: str, facts: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any] | None]: ...

    def on_open(self, store: RunStore) -> None: ...

    def prepare(self, store: RunStore, executor: ExecutorChoice) -> Prepared: ...


@dataclass(frozen=True)
class RunRequest:
    """``resume``: the run directory to resume (None: a new run, ``run_id`` or a fresh id).
    ``phase_marks``: the ``--phase-marks``/``--no-phase-marks`` given with a resume (None:
    neither); one that contradicts the run's recorded choice is refused."""

    out_dir: Path
    run_id: str | None = None
    resume: Path | None = None
    executor: ExecutorChoice = ExecutorChoice()
    phase_marks: bool | None = None
    reporter: ReporterFactory = null_reporter


@dataclass
class RunOutcome:
    """How a run ended, and what to say about it; ``exit_code`` is what every command exits
    with: 0 done, 2 refused (nothing changed), 3 no usable Dask cluster (interrupted,
    resumable), 130 interrupted (resumable), 1 the harness broke (interrupted, resumable)."""

    exit_code: int
    run_dir: Path | None = None
    keys: list[str] = field(default_factory=list)  # this session's rows', in the order made
    units: list[Unit] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    error: BaseException | None = None

    def rows(self) -> list[Row]:
        """This session's rows in the order they were made, read back from the run's store
        (the run keeps none in memory; a resumed run's earlier rows are not among them)."""
        if self.run_dir is None or not self.keys:
            return []
        found = {str(row["key"]): row for row in RunView(self.run_dir).rows()}
        return [found[key] for key in self.keys if key in found]

    def report(self, echo: Callable[[str], None]) -> int:
        """Say the outcome through ``echo``; the exit code. ``METEWAND_DEBUG=1`` re-raises a
        harness failure (its traceback on the terminal)."""
        for line in self.lines:
            echo(line)
        broke = self.exit_code == BENCHMARK_FAILURES and self.error is not None
        if broke and os.environ.get("METEWAND_DEBUG"):
            raise self.error  # type: ignore[misc]
        return self.exit_code


def marks_flag(on: bool) -> str:
    return "--phase-marks" if on else "--no-phase-marks"


def check_phase_marks(view: RunView, asked: bool | None) -> None:
    """A resume keeps the run's recorded phase-mark choice: the other flag would mix attempts
    timed with and without marks in one run (runs recorded before the switch took marks)."""
    recorded = bool(view.manifest["data"].get("phase_marks", True))
    if asked is None or asked == recorded:
        return
    raise StoreError(
        f"{view.run_dir} was run with {marks_flag(recorded)}; resuming with {marks_flag(asked)} "
        "would mix attempts timed with and without marks (resume without the flag)"
    )


def start(starter: RunStarter, request: RunRequest) -> RunOutcome:
    """Open (or resume) the run, run its units on the chosen executor, and say how it ended.

    One interrupt contract for every suite: Ctrl-C or SIGTERM (from the directory's opening on)
    is an outcome (130), never an exception that reaches the command."""
    # a run writes thousands of canonical records (rows, CDP logs, artifacts); a worker, which
    # writes a few, keeps the standard library's encoder and its shorter start-up
    canonical.use_orjson()
    run_dir = request.resume
    if run_dir is None and request.run_id is not None:
        run_dir = rundir.new_run_dir(request.out_dir, request.run_id)
    with sigterm_as_interrupt():  # also while the run directory is being opened
        try:
            store = _open(starter, request)
        except InvalidInput as exc:
            lines = getattr(exc, "lines", None) or [str(exc)]
            return RunOutcome(exc.exit_code, None, lines=[f"error: {line}" for line in lines])
        except KeyboardInterrupt as exc:
            return _ended(exc, None, run_dir)
        with store:
            try:
                prepared = starter.prepare(store, request.executor)
                keys = _execute(starter, store, prepared, request)
            except BaseException as exc:
                if not isinstance(exc, Exception | KeyboardInterrupt):
                    raise
                return _ended(exc, store, store.run_dir)
    return RunOutcome(OK, store.run_dir, keys, prepared.units)


def _open(starter: RunStarter, request: RunRequest) -> RunStore:
    if request.resume is not None:

        def check(view: RunView) -> None:
            starter.check_resume(view)
            check_phase_marks(view, request.phase_marks)

        return open_store(request.out_dir, None, request.resume, {}, None, check, starter.on_open)
    run_id = request.run_id or new_run_id()
    facts = provenance.collect(list_files=True)
    data, top_level = starter.new_run(run_id, facts)
    # every suite's manifest records what ran it and on what, once, in the same place
    data = {**data, **provenance.without_files(facts)}
    try:
        return open_store(request.out_dir, run_id, None, data, top_level, None, starter.on_open)
    except OSError as exc:  # --out is a file, under a file, or not writable
        raise StoreError(
            f"--out {request.out_dir}: cannot create the run directory there: {exc.strerror or exc}"
        ) from None


def _execute(
    starter: RunStarter, store: RunStore, prepared: Prepared, request: RunRequest
) -> list[str]:
    members = prepared.host_members
    sink = store.run_dir / rundir.HOST_TELEMETRY
    host = host_telemetry(prepared.host, os.getpid(), sink, members)
    if prepared.adopt_host is not None:
        prepared.adopt_host(host)
    session = Run(store, host, request.reporter)
    executor = request.executor
    if executor.kind != "dask":
        run_sessions.begin_session(store, "local")
        return session.execute(prepared.suite, LocalExecutor(prepared.jobs), prepared.units)
    from metewand.runtime.dask_run import execute_on_dask  # the optional extra, imported late

    ref = SuiteRef(starter.name, prepared.dask_config())
    return execute_on_dask(
        session, prepared.suite, ref, prepared.units, executor.scheduler, executor.local_workers
    )


def _ended(exc: BaseException, store: RunStore | None, run_dir: Path | None) -> RunOutcome:
    """A run cut short: interrupted (130), no usable cluster (3), or the harness broke (1)."""
    where = str(run_dir) if run_dir is not None else "RUN"
    if isinstance(exc, KeyboardInterrupt):
        line = f"interrupted: resume with --resume {where}"
        return RunOutcome(INTERRUPTED, run_dir, lines=[line], error=exc)
    if isinstance(exc, MetewandError) and exc.exit_code != BENCHMARK_FAILURES:
        line = f"error: {exc} (resume with --resume {where})"
        return RunOutcome(exc.exit_code, run_dir, lines=[line], error=exc)
    recorded = store.manifest["data"].get("interruption_reason") if store is not None else None
    if store is not None and recorded is not None:  # Run marked the run, traceback on disk
        error_file = rundir.side_file(store.run_dir, HARNESS_ERROR_FILE)
        line = (
            f"error: {recorded} (the run is marked interrupted; traceback in {error_file}; "
            f"--resume {where} continues the run)"
        )
    else:
        line = (
            f"error: harness failed: {type(exc).__name__}: {exc} "
            "(METEWAND_DEBUG=1 shows the traceback)"
        )
    return RunOutcome(BENCHMARK_FAILURES, run_dir, lines=[line], error=exc)
