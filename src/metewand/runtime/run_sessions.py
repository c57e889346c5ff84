"""Which executor ran each session of a run, and a ``dask_hosts.json`` that never lies about it.

A run can be started on one executor and resumed on the other (``--resume`` with or without
``--executor dask``). Two records keep that visible:

- the manifest's ``executor_sessions``: one entry per session, appended when it starts (the
  executor, when the session started, the client's host, the scheduler);
- ``dask_hosts.json`` describes one Dask session (``session``): its workers, rows per host, lost
  tries, host telemetry. A later Dask session keeps the earlier one under
  ``earlier_dask_sessions``; a later *local* session does not rewrite the counts (they are still
  what that Dask session did) but is listed under ``later_sessions`` and sets
  ``describes_latest_session`` to false, so no reader takes the file for the latest session's.
  ``rows_before_session`` says how many rows the run already held when the described session
  began (rows of earlier sessions, local or not, are not in its counts).

No Dask import here: a local run reads and marks the file without the optional extra.
"""

from __future__ import annotations

import socket
from typing import Any

from metewand.runtime import rundir
from metewand.runtime.store import RunStore

SESSIONS_KEY = "executor_sessions"


def session_started_at(store: RunStore) -> str:
    """When this session of the run began: the last resume, or the run's creation."""
    manifest = store.manifest
    resumed = manifest.get("resumed_at") or []
    return str(resumed[-1] if resumed else manifest["created_at"])


def begin_session(store: RunStore, executor: str, scheduler: str | None = None) -> dict[str, Any]:
    """Record this session's executor in the manifest; a local session marks an earlier Dask
    session's ``dask_hosts.json`` as not describing it. Returns the session's entry."""
    entry = {
        "executor": executor,
        "started_at": session_started_at(store),
        "client_host": socket.gethostname(),
        "scheduler": scheduler,
        "rows_before_session": len(store.finished_keys()),
    }
    earlier = store.manifest["data"].get(SESSIONS_KEY) or []
    store.update_manifest({SESSIONS_KEY: [*earlier, entry]})
    if executor != "dask":
        _mark_superseded(store, entry)
    return entry


def _mark_superseded(store: RunStore, entry: dict[str, Any]) -> None:
    path = store.run_dir / rundir.DASK_HOSTS
    record = rundir.read_json(path)
    if not isinstance(record, dict):
        return
    later = [*(record.get("later_sessions") or []), entry]
    rundir.write_json_atomic(
        path, {**record, "later_sessions": later, "describes_latest_session": False}
    )


def dask_session_record(
    store: RunStore, entry: dict[str, Any], record: dict[str, Any]
) -> dict[str, Any]:
    """``record`` (this Dask session's hosts record) with its session and the run's earlier
    Dask sessions, ready to replace ``dask_hosts.json``."""
    previous = rundir.read_json(store.run_dir / rundir.DASK_HOSTS)
    earlier: list[dict[str, Any]] = []
    if isinstance(previous, dict):
        earlier = [*(previous.pop("earlier_dask_sessions", None) or []), previous]
    return {
        **record,
        "session": {"executor": "dask", "started_at": entry["started_at"]},
        "rows_before_session": entry["rows_before_session"],
        "describes_latest_session": True,
        "later_sessions": [],
        "earlier_dask_sessions": earlier,
    }
