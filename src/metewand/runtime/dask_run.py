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
The manifest's ``host_fingerprints`` lists every host (place) that registered in any session:
CPU model, usable cores, memory, kernel, the metewand it runs, accepted or refused with why;
written once the workers registered and again at the end (workers may join later).

``execute_on_dask`` is what both suites' runners call for ``--executor dask``: the run lifecycle
(``runtime.run.Run``) over a ``DaskExecutor``, with the same two side files, and the session
recorded (``runtime.run_sessions``).
"""

from __future__ import annotations

import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metewand.runtime import run_sessions, rundir
from metewand.runtime.dask_executor import DaskExecutor, DaskExecutorError
from metewand.runtime.store import RunStore
from metewand.runtime.suite import Row, Suite, SuiteRef, Unit

if TYPE_CHECKING:  # the run lifecycle starts a Dask session (runtime.run.start), never the reverse
    from metewand.runtime.run import Run

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
) -> list[str]:
    """``units`` on a Dask cluster; the keys of this session's rows, as ``Run.execute``. Lost
    tries go to ``lost_tries.jsonl`` as they are known, and ``dask_hosts.json`` (registrations,
    per-host counts and telemetry) is written however the run ends.

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
        if not isinstance(exc, DaskExecutorError | KeyboardInterrupt):  # a break: its traceback
            error_file = rundir.side_file(store.run_dir, rundir.HARNESS_ERROR)
            rundir.write_text_atomic(error_file, "".join(traceback.format_exception(exc)))
        raise
    record_fingerprints(store, executor.registrations, entry["started_at"])
    try:
        return session.execute(suite, executor, units)
    finally:
        try:
            count_session_rows(store.rows(), {key for unit in units for key in unit.keys}, tally)
            record = run_sessions.dask_session_record(store, entry, hosts_record(executor, tally))
            rundir.write_json_atomic(store.run_dir / HOSTS_NAME, record)
            record_fingerprints(store, executor.registrations, entry["started_at"])
        finally:
            executor.close()


FINGERPRINTS_KEY = "host_fingerprints"


def fingerprint(registration: dict[str, Any], session: str) -> dict[str, Any]:
    """What a host is, from its worker's registration: what decides whether two hosts' figures
    may be pooled (CPU model, usable cores, memory, kernel) and what it runs."""
    facts = registration.get("host_facts") or {}
    runner = registration.get("runner") or {}
    affinity = facts.get("cpu_affinity")
    return {
        "host": registration.get("host"),
        "place": registration.get("place") or registration.get("host"),
        "worker_name": registration.get("worker_name"),
        "accepted": bool(registration.get("accepted")),
        "reason": registration.get("reason"),
        "session": session,
        "cpu_model": facts.get("cpu_model"),
        "cpu_count": facts.get("cpu_count"),
        "cpu_affinity": affinity,
        "usable_cores": len(affinity) if isinstance(affinity, list | tuple) else None,
        "memory_bytes": facts.get("memory_bytes"),
        "kernel": facts.get("kernel"),
        "arch": facts.get("arch"),
        "cpu_governor": facts.get("cpu_governor"),
        "metewand_version": runner.get("metewand_version"),
        "tree_sha256": (runner.get("source") or {}).get("tree_sha256"),
    }


def record_fingerprints(store: RunStore, registrations: list[dict[str, Any]], session: str) -> None:
    """Every registered host's fingerprint into the manifest, by place (earlier sessions' kept;
    a place that registered again is described by its latest registration)."""
    if not registrations:
        return
    known = dict(store.manifest["data"].get(FINGERPRINTS_KEY) or {})
    for registration in sorted(registrations, key=lambda r: str(r.get("worker"))):
        if not registration.get("host"):  # its plugin failed before it could say anything
            continue
        found = fingerprint(registration, session)
        previous = known.get(found["place"])
        if previous is not None and previous.get("accepted") and not found["accepted"]:
            continue  # one place's accepted worker is not hidden by a refused one beside it
        known[str(found["place"])] = found
    store.update_manifest({FINGERPRINTS_KEY: dict(sorted(known.items()))})


def count_session_rows(rows: list[Row], keys: set[str], tally: DaskRunTally) -> None:
    """This session's rows per host and per worker (a resumed run's earlier rows are not)."""
    for row in rows:
        where = row.get("placement") or {}
        if where.get("executor") == "dask" and row["key"] in keys:
            tally.rows_by_host[where["host"]] += 1
            tally.rows_by_worker[where["worker"]] += 1
            tally.rows_written += 1
