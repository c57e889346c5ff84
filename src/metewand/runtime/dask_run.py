"""A run's Dask session: the run lifecycle over a ``DaskExecutor``, and the side files it keeps.

What the client writes, as outcomes arrive:

- each finished unit's rows go to ``results.jsonl`` through the run lifecycle's sink
  (``runtime.run.Run``, one fsynced line each), as on the local executor;
- each lost try goes to ``lost_tries.jsonl`` (one fsynced ``O_APPEND`` line each): a try that a
  worker took with it when it died is a record, never silently gone;
- at the end, ``dask_hosts.json``: every worker's registration (accepted or refused, with the
  reason and its host's provenance), its host telemetry summary with the pollution verdict, and
  the count of rows and lost tries per host and per worker.

The two file names are ``runtime.rundir``'s (the one owner of the run directory's names).

``execute_on_dask`` is what both suites' runners call for ``--executor dask``: the run lifecycle
(``runtime.run.Run``) over a ``DaskExecutor``, with the same two side files, and the session
recorded (``runtime.run_sessions``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from metewand.runtime import run_sessions, rundir
from metewand.runtime.dask_executor import DaskExecutor
from metewand.runtime.run import Run
from metewand.runtime.suite import Row, Suite, SuiteRef, Unit

LOST_TRIES_NAME = rundir.LOST_TRIES
HOSTS_NAME = rundir.DASK_HOSTS
HOSTS_SCHEMA = "metewand_dask_hosts/1"


@dataclass
class DaskRunTally:
    rows_written: int = 0
    lost_tries: int = 0
    rows_by_host: Counter[str] = field(default_factory=Counter)
    rows_by_worker: Counter[str] = field(default_factory=Counter)
    lost_by_worker: Counter[str] = field(default_factory=Counter)


def hosts_record(executor: DaskExecutor, tally: DaskRunTally) -> dict[str, Any]:
    """``dask_hosts.json``: who registered, who was refused and why, each host's telemetry."""
    summaries = executor.host_summaries()
    workers = []
    for registration in sorted(executor.registrations, key=lambda r: r["worker"]):
        worker = registration["worker"]
        workers.append(
            {
                **registration,
                "rows": tally.rows_by_worker.get(worker, 0),
                "lost_tries": tally.lost_by_worker.get(worker, 0),
                "host_summary": summaries.get(worker, {"unavailable": "the worker was refused"}),
            }
        )
    return {
        "schema": HOSTS_SCHEMA,
        "scheduler": executor.scheduler or f"LocalCluster({executor.local_workers} processes)",
        "client_identity": executor.expected,
        "rows_by_host": dict(tally.rows_by_host),
        "lost_tries": tally.lost_tries,
        "closed_orphaned_slots": executor.dropped_orphans,
        "workers": workers,
    }


def execute_on_dask(
    session: Run,
    suite: Suite,
    ref: SuiteRef,
    units: list[Unit],
    scheduler: str | None,
    local_workers: int | None,
) -> list[Row]:
    """``units`` on a Dask cluster: lost tries to ``lost_tries.jsonl`` as they are known, and
    ``dask_hosts.json`` (registrations, per-host counts and telemetry) however the run ends.

    The cluster is reached (and, for ``local_workers``, started) inside the run, so a cluster
    that cannot be used ends the run ``interrupted`` with the reason, resumable once it is
    there (``DaskExecutorError``, exit 3)."""
    store = session.store
    entry = run_sessions.begin_session(store, "dask", scheduler)
    lost_file = store.run_dir / LOST_TRIES_NAME
    tally = DaskRunTally()

    def lost(record: dict[str, Any]) -> None:
        rundir.append_line(lost_file, record)
        tally.lost_tries += 1
        tally.lost_by_worker[record["worker"]] += 1

    executor = DaskExecutor(ref, scheduler=scheduler, local_workers=local_workers, on_lost_try=lost)
    try:
        executor.start()
    except BaseException as exc:  # no cluster to run on: the run stays resumable, with why
        executor.close()
        store.update_manifest({"interruption_reason": f"{type(exc).__name__}: {exc}"})
        store.set_state("interrupted")
        raise
    try:
        return session.execute(suite, executor, units)
    finally:
        try:
            count_session_rows(store.rows(), {key for unit in units for key in unit.keys}, tally)
            record = run_sessions.dask_session_record(store, entry, hosts_record(executor, tally))
            rundir.write_json_atomic(store.run_dir / HOSTS_NAME, record)
        finally:
            executor.close()


def count_session_rows(rows: list[Row], keys: set[str], tally: DaskRunTally) -> None:
    """This session's rows per host and per worker (a resumed run's earlier rows are not)."""
    for row in rows:
        where = row.get("placement") or {}
        if where.get("executor") == "dask" and row["key"] in keys:
            tally.rows_by_host[where["host"]] += 1
            tally.rows_by_worker[where["worker"]] += 1
            tally.rows_written += 1
