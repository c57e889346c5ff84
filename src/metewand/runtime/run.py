"""One run of any suite, from its directory's creation (or resumption) to its final state.

Both suites go through the same steps, in this order:

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
     ``KeyboardInterrupt`` propagates (the CLI exits 130; ``--resume`` runs the attempts
     without a row);
   - the harness broke (an exception from the suite): state ``interrupted``, the reason
     ``harness failed: <type>: <message>`` in the manifest, the traceback in
     ``harness_error.txt``, and the exception propagates.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from metewand.measure.host import HostTelemetry
from metewand.runtime import rundir
from metewand.runtime.executor import Executor
from metewand.runtime.interrupts import ignoring_interrupts, sigterm_as_interrupt
from metewand.runtime.owned import sweep
from metewand.runtime.progress import ReporterFactory, RunReporter, null_reporter
from metewand.runtime.rundir import write_json_atomic
from metewand.runtime.store import RunStore, RunView
from metewand.runtime.suite import Row, Suite, Unit

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
    """Each row into the store the moment it exists, and into the progress reporter."""

    def __init__(self, store: RunStore, reporter: RunReporter) -> None:
        self.store = store
        self.reporter = reporter
        self.rows: list[Row] = []

    def attempt_started(self, label: str) -> None:
        self.reporter.attempt_started(label)

    def attempt_finished(self, row: Row) -> None:
        self.store.append(row)
        self.rows.append(row)
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
    ) -> list[Row]:
        """Run ``units`` to the end; returns this session's rows in the order they were made."""
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
        return sink.rows

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
