"""Accounting groups whose creator is gone, found anywhere in the cgroup hierarchies.

Every group metewand makes is named ``metewand-<label>-<pid>-<8 hex>-s<start>`` (``group_name``):
the pid and start time (clock ticks since boot) of the process that made it. A group is an
*orphan* when that process is gone: nothing will ever read or remove it. ``sweep_orphans``
kills its members and removes it. Groups named before the start time was part of the name
(``metewand-<label>-<pid>-<8 hex>``) are orphans only when no process has that pid at all (a
reused pid keeps them: the safe side). A group whose creator is alive is never touched, so
another metewand's live run is safe.

The hierarchies are walked from each cgroup mount (v2 and the v1 ``memory`` / ``cpuacct``
ones, whichever are mounted), a few levels deep, never into a ``metewand-`` group: the groups
of one run may sit under different parents (a v1 memory hierarchy often gives every session its
own parent group).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import time
from typing import Any, Final

from metewand.measure import procfs

PREFIX: Final = "metewand-"
WALK_DEPTH: Final = 6
REMOVE_RETRY_S: Final = 0.02
_NAME: Final = re.compile(r"^metewand-.+-(?P<pid>\d+)-[0-9a-f]{8}(?:-s(?P<start>\d+))?$")
_PROBE: Final = re.compile(r"^metewand-probe-(?P<pid>\d+)-")
_MOUNT_TYPES: Final = ("cgroup2", "cgroup")


@functools.cache
def _own_start(pid: int) -> int:
    return procfs.read_stat(pid).starttime_ticks


def group_name(label: str, unique: str) -> str:
    """The name of a new group made by this process: its label, the creator's pid and start
    time (so a later metewand can tell it is an orphan), and ``unique`` (8 hex digits)."""
    pid = os.getpid()
    return f"{PREFIX}{label}-{pid}-{unique}-s{_own_start(pid)}"


def own_start() -> int:
    """This process's start time as its group names carry it."""
    return _own_start(os.getpid())


def creator_of(name: str) -> tuple[int, int | None] | None:
    """(pid, start time or None) of the process that made the group ``name``; None when the
    name is not one metewand gives."""
    found = _NAME.match(name) or _PROBE.match(name)
    if found is None:
        return None
    start = found.groupdict().get("start")
    return int(found["pid"]), int(start) if start else None


def creator_gone(name: str) -> bool:
    creator = creator_of(name)
    if creator is None:
        return False
    pid, start = creator
    try:
        stat = procfs.read_stat(pid)
    except (procfs.ProcessGone, OSError, ValueError, IndexError):
        return not os.path.exists(f"/proc/{pid}")
    if stat.state == "Z":
        return True
    return start is not None and stat.starttime_ticks != start


def cgroup_mounts(mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """The mount points of cgroup hierarchies where metewand makes groups."""
    points = []
    with contextlib.suppress(OSError), open(mountinfo, encoding="utf-8") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3 or tail[0] not in _MOUNT_TYPES:
                continue
            options = set(tail[2].split(","))
            if tail[0] == "cgroup2" or options & {"memory", "cpuacct"}:
                points.append(fields[4].replace("\\040", " "))
    return list(dict.fromkeys(points))


def metewand_groups(roots: list[str] | None = None, depth: int = WALK_DEPTH) -> list[str]:
    """Every ``metewand-`` group under the roots (default: every cgroup mount)."""
    found: list[str] = []

    def walk(directory: str, level: int) -> None:
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if entry.name.startswith(PREFIX):
                    found.append(entry.path)
                elif level < depth:
                    walk(entry.path, level + 1)

    for root in cgroup_mounts() if roots is None else roots:
        walk(root, 1)
    return found


def find_orphans(roots: list[str] | None = None) -> list[str]:
    return [p for p in metewand_groups(roots) if creator_gone(os.path.basename(p))]


def _members(path: str) -> list[int]:
    procs = os.path.join(path, "cgroup.procs")
    with contextlib.suppress(OSError, ValueError), open(procs, encoding="ascii") as handle:
        return [int(p) for p in handle.read().split()]
    return []


def kill_group(path: str) -> None:
    """Every member at once where the kernel can (cgroup v2 ``cgroup.kill``), else each one."""
    with contextlib.suppress(OSError), open(os.path.join(path, "cgroup.kill"), "w") as handle:
        handle.write("1")
        return
    for pid in _members(path):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, 9)


def remove_group(path: str, timeout_s: float) -> str | None:
    """Kill the group's members until it is empty, then remove it; None, or why it stayed."""
    from metewand.measure import process_sweep  # only here: measure's start-up never sweeps

    deadline = time.monotonic() + timeout_s
    kill_group(path)
    while True:
        process_sweep.kill_until_gone(lambda: _members(path), max(0.0, deadline - time.monotonic()))
        try:
            os.rmdir(path)
            return None
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return exc.strerror or str(exc)
        if time.monotonic() > deadline:
            return f"still busy after {timeout_s:g} s"
        time.sleep(REMOVE_RETRY_S)


class OrphanSweep:
    """(A plain class, not a dataclass: this module is on measure's start-up path, see
    measure.accounting.)"""

    def __init__(self) -> None:
        self.removed: list[str] = []
        self.failed: list[str] = []  # "path: why"

    def to_json(self) -> dict[str, Any]:
        return {"orphan_groups_removed": self.removed, "orphan_groups_failed": self.failed}


def sweep_orphans(roots: list[str] | None = None, timeout_s: float = 5.0) -> OrphanSweep:
    """Kill the members of every orphan group and remove it (deepest first)."""
    report = OrphanSweep()
    for path in sorted(find_orphans(roots), key=len, reverse=True):
        problem = remove_group(path, timeout_s)
        if problem is None:
            report.removed.append(path)
        else:
            report.failed.append(f"{path}: {problem}")
    return report
