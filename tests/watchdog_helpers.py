"""Helpers for kill -9 tests: a runner's whole process tree, its groups, its watchdog."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from metewand.measure import cgroups, orphans, procfs

WATCHDOG_SCRIPT = "watchdog_main.py"


def _stats() -> list[procfs.ProcStat]:
    found = []
    for pid in procfs.iter_pids():
        try:
            found.append(procfs.read_stat(pid))
        except (procfs.ProcessGone, OSError, ValueError, IndexError):
            continue
    return found


def tree_of(root: int) -> dict[int, int]:
    """Every live descendant of ``root`` (pid -> start time), ``root`` excluded."""
    stats = _stats()
    children: dict[int, list[procfs.ProcStat]] = {}
    for stat in stats:
        children.setdefault(stat.ppid, []).append(stat)
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for stat in children.get(todo.pop(), []):
            if stat.pid not in found:
                found[stat.pid] = stat.starttime_ticks
                todo.append(stat.pid)
    return found


def alive_of(snapshot: dict[int, int]) -> list[int]:
    """The processes of ``snapshot`` still alive (same pid and start time, not a zombie)."""
    left = []
    for pid, start in snapshot.items():
        try:
            stat = procfs.read_stat(pid)
        except (procfs.ProcessGone, OSError, ValueError, IndexError):
            continue
        if stat.starttime_ticks == start and stat.state != "Z":
            left.append(pid)
    return left


def wait_all_gone(snapshot: dict[int, int], timeout_s: float = 10.0) -> tuple[list[int], float]:
    """(the processes still alive after ``timeout_s``, the seconds it took them to go)."""
    started = time.monotonic()
    while (left := alive_of(snapshot)) and time.monotonic() - started < timeout_s:
        time.sleep(0.05)
    return left, time.monotonic() - started


def groups_made_by(pid: int) -> list[str]:
    """Every metewand group (any hierarchy) whose name says ``pid`` made it, except its
    writability probes: those live for a moment between a mkdir and an rmdir, so a poll that
    catches one would take it for one of the run's groups (local CI stop 34: a test saw the
    live run's "groups" vanish while the run went on)."""
    found = []
    for path in orphans.metewand_groups():
        name = os.path.basename(path)
        if name.startswith(cgroups.PROBE_PREFIX):
            continue
        creator = orphans.creator_of(name)
        if creator is not None and creator[0] == pid:
            found.append(path)
    return found


def wait_groups_gone(paths: list[str], timeout_s: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in paths if os.path.isdir(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def watchdogs_of(pid: int) -> list[int]:
    """The watchdog processes ``pid`` started (children running ``watchdog_main.py``)."""
    found = []
    for child, _ in tree_of(pid).items():
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if WATCHDOG_SCRIPT.encode() in command:
            found.append(child)
    return found


def kill_runner_and_watchdog(pid: int) -> list[int]:
    """``kill -9`` of the watchdog(s) and then of the runner: what is left is then only for the
    run's records and the orphan sweep. Returns the watchdogs killed."""
    os.kill(pid, signal.SIGSTOP)  # so that it cannot start a new watchdog in between
    watchdogs = watchdogs_of(pid)
    for watchdog in watchdogs:
        os.kill(watchdog, signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)
    return watchdogs
