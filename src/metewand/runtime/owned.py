"""What a run started that can outlive it, recorded as it is made, and removed after a kill.

``kill -9`` of metewand leaves its workers alive (they run in sessions of their own) and its
accounting groups in the cgroup hierarchies (v2 and v1 memory/cpuacct), where nothing else will
ever remove them. So every group is written to ``owned.jsonl`` in the run directory *before* it is
created, and every process with its identity (pid, start time, session) once it started.
``sweep`` (called by ``--resume`` and by ``metewand clean``) finds what is left of them and
removes it — only what this run recorded:

- a process is hit only if its pid and start time match a record, or it is a member of a
  recorded session started no earlier than that session's recorded leader, while that leader is
  gone or still the recorded process (a session id stays allocated while any member lives, so a
  reused pid leading a newer session has another start time and its session is never hit);
- a group is removed only if its path is recorded, its name starts with ``metewand-`` and it is
  a cgroup directory (holds ``cgroup.procs``); its members are killed first.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metewand.measure import orphans, process_sweep
from metewand.runtime import rundir

OWNED_NAME = rundir.OWNED
GROUP_PREFIX = "metewand-"


class OwnedJournal:
    """Appends one canonical JSON line per group or process a run creates (thread-safe)."""

    def __init__(self, run_dir: Path | str) -> None:
        self.path = Path(run_dir) / OWNED_NAME
        self._lock = threading.Lock()

    def group(self, path: str) -> None:
        """Called before the group directory is made, so a kill in between leaves a record."""
        self._append({"kind": "group", "path": path})

    def process(self, pid: int) -> None:
        record: dict[str, Any] = {"kind": "process", "pid": pid}
        identity = process_sweep.identity_of(pid)
        if identity is not None:
            record.update(starttime=identity.starttime, session=identity.session)
        self._append(record)

    def _append(self, record: dict[str, Any]) -> None:
        with self._lock:
            rundir.append_line(self.path, record)


@dataclass
class SweepReport:
    killed: list[int] = field(default_factory=list)
    groups_removed: list[str] = field(default_factory=list)
    groups_failed: list[str] = field(default_factory=list)  # "path: why"

    def to_json(self) -> dict[str, Any]:
        return {
            "killed": self.killed,
            "groups_removed": self.groups_removed,
            "groups_failed": self.groups_failed,
        }


def read_records(run_dir: Path | str) -> list[dict[str, Any]]:
    """The journal's records, by ``rundir.read_journal``'s rule: a torn final line or a damaged
    whole line is skipped (it names nothing whole to remove; ``rundir.journal_warnings`` names
    the damaged ones)."""
    return rundir.read_journal(Path(run_dir) / OWNED_NAME).rows


def _identities(records: list[dict[str, Any]]) -> list[process_sweep.Identity]:
    found = []
    for record in records:
        if record.get("kind") == "process":
            identity = process_sweep.Identity.from_record(record)
            if identity is not None:
                found.append(identity)
    return found


def _processes(records: list[dict[str, Any]]) -> list[int]:
    """Live processes of the recorded ones (by identity) and of their sessions."""
    return process_sweep.left_alive(_identities(records))


def _owned_group(path: Any) -> bool:
    return (
        isinstance(path, str)
        and os.path.isabs(path)
        and os.path.basename(path).startswith(GROUP_PREFIX)
        and os.path.isfile(os.path.join(path, "cgroup.procs"))
    )


def sweep(run_dir: Path | str, wait_s: float = 5.0) -> SweepReport:
    """Kill what is left of the run's processes and remove its groups; forget what is gone."""
    records = read_records(run_dir)
    report = SweepReport()
    identities = _identities(records)
    report.killed = process_sweep.left_alive(identities)
    process_sweep.kill_until_gone(lambda: process_sweep.left_alive(identities), wait_s)
    named = (r.get("path") for r in records if r.get("kind") == "group")
    paths = [p for p in dict.fromkeys(named) if isinstance(p, str)]
    for path in paths:
        if not _owned_group(path):
            continue  # gone already, or not a group metewand makes: never touched
        problem = orphans.remove_group(path, wait_s)
        if problem is None:
            report.groups_removed.append(path)
        else:
            report.groups_failed.append(f"{path}: {problem}")
    if not report.groups_failed and not _processes(records):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(Path(run_dir) / OWNED_NAME)  # everything recorded is gone
    return report
