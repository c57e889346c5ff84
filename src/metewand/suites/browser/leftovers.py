"""Find and kill engine processes left behind by an earlier, killed run of the same run id.

Every engine the runner launches carries ``METEWAND_RUN_ID=<run id>`` in its environment, which
its descendants inherit and which ``/proc/PID/environ`` shows even after the runner died with
``kill -9`` (the engines then live on, re-parented). The runner also appends each engine pid to
``engine_pids.jsonl`` in the run directory; a recorded pid is only killed while it still carries
the marker, so a reused pid is never hit.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Final

from metewand.measure import procfs

RUN_MARKER_VAR: Final = "METEWAND_RUN_ID"
PID_FILE: Final = "engine_pids.jsonl"


def _carries_marker(pid: int, marker: bytes) -> bool:
    try:
        return marker in procfs.read_environ(pid)
    except (procfs.ProcessGone, OSError):
        return False


def _is_zombie(pid: int) -> bool:
    try:
        return procfs.read_stat(pid).state == "Z"
    except (procfs.ProcessGone, OSError, ValueError, IndexError):
        return True  # gone


def marked_processes(run_id: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries this run's marker."""
    marker = f"{RUN_MARKER_VAR}={run_id}".encode()
    own = os.getpid()
    found = []
    for pid in procfs.iter_pids():
        if pid != own and _carries_marker(pid, marker) and not _is_zombie(pid):
            found.append(pid)
    return sorted(found)


def recorded_pids(run_dir: Path) -> list[int]:
    path = Path(run_dir) / PID_FILE
    pids = []
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                pids.append(int(json.loads(line)["pid"]))
    return pids


def record_pid(run_dir: Path, record: dict[str, object]) -> None:
    with open(Path(run_dir) / PID_FILE, "a") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


def kill_leftovers(run_dir: Path, run_id: str, wait_s: float = 5.0) -> list[int]:
    """SIGKILL every process of this run still alive; returns the pids that were signalled."""
    marker = f"{RUN_MARKER_VAR}={run_id}".encode()
    targets = set(marked_processes(run_id))
    targets |= {pid for pid in recorded_pids(run_dir) if _carries_marker(pid, marker)}
    for pid in sorted(targets):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and marked_processes(run_id):
        time.sleep(0.05)
    return sorted(targets)
