"""Find and kill engine processes left behind by an earlier, killed run of the same run id.

Two independent ways find them after the runner died with ``kill -9`` (the engines live on,
re-parented):

- every engine carries ``METEWAND_RUN_ID=<run id>`` and ``METEWAND_RUN_DIR=<run directory>`` in
  its environment, which its descendants inherit and ``/proc/PID/environ`` shows. Both must
  match: run ids repeat across output directories (tests all call their run ``r``), and a run
  must never kill another run's engines that happen to share its id. Chromium rewrites that memory with its process title,
  so the marker alone misses a Chromium browser process;
- the runner appends each engine's pid, start time and session to ``engine_pids.jsonl`` in the run
  directory. Engines run in a session of their own, so every process of that session started no
  earlier than its recorded leader belongs to the engine; a reused pid or session id has a later
  leader start time, or its members started before, and is never hit.

Once those processes are gone, the private dirs of the killed run's engines (user-data dir and
TMPDIR, see ``private_dirs``) are removed too: the roots recorded in ``engine_pids.jsonl`` plus
the working directory of each killed process (an engine runs inside its root; this also finds
launches whose record lacks the dirs). ``private_dirs.owned_root`` decides what may go.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

from metewand.measure import process_sweep, procfs
from metewand.runtime import rundir
from metewand.suites.browser import private_dirs

RUN_MARKER_VAR: Final = "METEWAND_RUN_ID"
RUN_DIR_VAR: Final = "METEWAND_RUN_DIR"
PID_FILE: Final = rundir.ENGINE_PIDS


def run_markers(run_id: str, run_dir: Path | None) -> dict[str, str]:
    """The environment entries that mark an engine as this run's (see the module doc)."""
    markers = {RUN_MARKER_VAR: run_id}
    if run_dir is not None:
        markers[RUN_DIR_VAR] = os.path.realpath(run_dir)
    return markers


def _carries_markers(pid: int, markers: list[bytes]) -> bool:
    try:
        environ = procfs.read_environ(pid)
    except (procfs.ProcessGone, OSError):
        return False
    return all(marker in environ for marker in markers)


def _is_zombie(pid: int) -> bool:
    try:
        return procfs.read_stat(pid).state == "Z"
    except (procfs.ProcessGone, OSError, ValueError, IndexError):
        return True  # gone


def marked_processes(run_id: str, run_dir: Path | None = None) -> list[int]:
    """Live (non-zombie) processes whose environment carries this run's markers (the run id,
    and the run directory when given)."""
    markers = [f"{k}={v}".encode() for k, v in run_markers(run_id, run_dir).items()]
    own = os.getpid()
    found = []
    for pid in procfs.iter_pids():
        if pid != own and _carries_markers(pid, markers) and not _is_zombie(pid):
            found.append(pid)
    return sorted(found)


def _lines(run_dir: Path) -> list[dict[str, Any]]:
    """The JSON objects of ``engine_pids.jsonl``, by ``rundir.read_journal``'s rule (a torn
    final line or a damaged whole line skipped; ``rundir.journal_warnings`` names the latter)."""
    return rundir.read_journal(Path(run_dir) / PID_FILE).rows


def _recorded(run_dir: Path) -> list[process_sweep.Identity]:
    found = (process_sweep.Identity.from_record(record) for record in _lines(run_dir))
    return [identity for identity in found if identity is not None]


def recorded_pids(run_dir: Path) -> list[int]:
    return [identity.pid for identity in _recorded(run_dir)]


def recorded_dirs(run_dir: Path) -> list[str]:
    """Every private dir named by a record (unchecked: ``private_dirs.owned_root`` judges)."""
    dirs: list[str] = []
    for record in _lines(run_dir):
        named = record.get("private_dirs")
        if isinstance(named, list):
            dirs.extend(d for d in named if isinstance(d, str))
    return dirs


def record_pid(run_dir: Path, record: dict[str, object]) -> None:
    """Append an engine's pid with its start time and session (what identifies it later)."""
    entry = dict(record)
    identity = process_sweep.identity_of(int(str(record["pid"])))
    if identity is not None:
        entry.update(starttime=identity.starttime, session=identity.session)
    rundir.append_line(Path(run_dir) / PID_FILE, entry)


def session_processes(run_dir: Path) -> list[int]:
    """Live processes of the recorded engines and of their sessions (``process_sweep``'s rule:
    by pid and start time, or in a recorded session started no earlier than its leader)."""
    return process_sweep.left_alive(_recorded(run_dir))


def run_processes(run_dir: Path, run_id: str) -> list[int]:
    """Every live process of this run's engines, by marker or by recorded session."""
    return sorted(set(marked_processes(run_id, run_dir)) | set(session_processes(run_dir)))


def kill_leftovers(run_dir: Path, run_id: str, wait_s: float = 5.0) -> list[int]:
    """SIGKILL every process of this run still alive, then (once none is left) remove the
    private dirs of this run's engines; returns the pids that were signalled."""
    targets = [pid for pid in run_processes(run_dir, run_id) if pid != os.getpid()]
    dirs = [cwd for cwd in map(procfs.read_cwd, targets) if cwd is not None]
    _, alive = process_sweep.kill_until_gone(lambda: run_processes(run_dir, run_id), wait_s)
    if not alive:  # a live engine may still write into its dirs
        private_dirs.remove_owned(recorded_dirs(run_dir) + dirs, run_id)
    return targets
