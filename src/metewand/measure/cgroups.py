"""cgroup v2 and v1: where they are mounted, which group this process is in, and subject groups.

The layout is read from /proc/self/mountinfo and /proc/self/cgroup, never from hard-coded paths,
so a host with cgroup2 at /sys/fs/cgroup/unified (hybrid) and one with it at /sys/fs/cgroup
(unified) are handled alike. Subject groups are created under this process's own group.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from collections.abc import Callable
from typing import NamedTuple, Self

from metewand.measure import orphans, procfs, watchdog

V1_CONTROLLERS_OF_INTEREST = ("cpuacct", "memory", "pids")
REMOVE_RETRY_S = 0.01  # an emptied group can be busy for a moment before rmdir succeeds


# NamedTuples, not dataclasses, on measure's start-up path: creating a dataclass compiles its
# methods (~0.4 ms each) and the dataclasses module loads inspect (~7 ms); see docs/measure.md.


class Hierarchy(NamedTuple):
    """One mounted hierarchy and this process's own group directory inside it."""

    version: int  # 1 or 2
    mountpoint: str
    controllers: frozenset[str]  # v2: controllers a child group of own_dir gets
    own_dir: str | None  # filesystem path of this process's group, None if not visible
    writable: bool  # a child group could be created under own_dir


class CgroupLayout(NamedTuple):
    v2: Hierarchy | None
    v1: dict[str, Hierarchy] = {}  # noqa: RUF012 - never changed: controller -> hierarchy
    reasons: dict[str, str] = {}  # noqa: RUF012 - never changed: what is unusable, and why

    def v1_usable(self, controller: str) -> bool:
        hierarchy = self.v1.get(controller)
        return hierarchy is not None and hierarchy.writable

    def to_json(self) -> dict[str, object]:
        def one(h: Hierarchy | None) -> object:
            if h is None:
                return None
            return {
                "mountpoint": h.mountpoint,
                "controllers": sorted(h.controllers),
                "own_dir": h.own_dir,
                "writable": h.writable,
            }

        return {
            "v2": one(self.v2),
            "v1": {name: one(h) for name, h in sorted(self.v1.items())},
            "reasons": dict(sorted(self.reasons.items())),
        }


class _Mount(NamedTuple):
    root: str
    mountpoint: str
    fstype: str
    superopts: frozenset[str]


def _read_text(path: str) -> str:
    """The whole file (a cgroup or /proc file: small, read in one go without a text wrapper,
    which costs more than the read on a run's hot path)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8")


def _parse_mountinfo(text: str) -> list[_Mount]:
    mounts = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or not tail[0].startswith("cgroup"):
            continue
        mountpoint = fields[4].replace("\\040", " ")
        mounts.append(_Mount(fields[3], mountpoint, tail[0], frozenset(tail[2].split(","))))
    return mounts


def _parse_self_cgroup(text: str) -> tuple[str | None, dict[str, str]]:
    """(v2 path, {v1 controller: path}) from /proc/self/cgroup."""
    v2_path, v1_paths = None, {}
    for line in text.splitlines():
        hier_id, controllers, path = line.split(":", 2)
        if hier_id == "0" and controllers == "":
            v2_path = path
        else:
            for name in controllers.split(","):
                v1_paths[name] = path
    return v2_path, v1_paths


def _own_dir(mount: _Mount, group_path: str | None) -> str | None:
    if group_path is None:
        return None
    root = mount.root.rstrip("/")
    if root and not (group_path == root or group_path.startswith(root + "/")):
        return None  # our group lies outside what this mount shows
    relative = group_path[len(root) :].lstrip("/")
    return os.path.join(mount.mountpoint, relative) if relative else mount.mountpoint


PROBE_PREFIX = "metewand-probe-"


def _remove_dead_probes(directory: str) -> None:
    """Remove probe groups whose creator is gone (killed between its mkdir and rmdir).

    A probe never holds a process, so ``rmdir`` succeeds only on such an empty group; one whose
    pid is alive (its creator, or a reused pid) is left alone.
    """
    with contextlib.suppress(OSError):
        for name in os.listdir(directory):
            pid = name[len(PROBE_PREFIX) :].split("-")[0]
            if (
                name.startswith(PROBE_PREFIX)
                and pid.isdigit()
                and not os.path.exists(f"/proc/{pid}")
            ):
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(directory, name))


def _probe_writable(directory: str) -> str | None:
    """None if a child group can be created (and removed) here, else the reason."""
    _remove_dead_probes(directory)
    probe = os.path.join(directory, f"{PROBE_PREFIX}{os.getpid()}-{os.urandom(4).hex()}")
    try:
        os.mkdir(probe)
    except OSError as exc:
        return f"cannot create a group under {directory}: {exc.strerror}"
    with contextlib.suppress(OSError):
        os.rmdir(probe)
    return None


def _v2_hierarchy(
    mounts: list[_Mount], v2_path: str | None, reasons: dict[str, str]
) -> Hierarchy | None:
    mount = next((m for m in mounts if m.fstype == "cgroup2"), None)
    if mount is None:
        reasons["cgroup2"] = "no cgroup2 mount in /proc/self/mountinfo"
        return None
    own = _own_dir(mount, v2_path)
    if own is None or not os.path.isdir(own):
        reasons["cgroup2"] = f"this process's cgroup2 group {v2_path!r} is not visible"
        return Hierarchy(2, mount.mountpoint, frozenset(), None, False)
    try:
        controllers = frozenset(_read_text(os.path.join(own, "cgroup.subtree_control")).split())
    except OSError:
        controllers = frozenset()
    problem = _probe_writable(own)
    if problem:
        reasons["cgroup2"] = problem
    if "memory" not in controllers:
        reasons["cgroup2.memory"] = f"memory controller not enabled in {own}/cgroup.subtree_control"
    return Hierarchy(2, mount.mountpoint, controllers, own, problem is None)


def _v1_hierarchies(
    mounts: list[_Mount], v1_paths: dict[str, str], reasons: dict[str, str]
) -> dict[str, Hierarchy]:
    found: dict[str, Hierarchy] = {}
    for mount in (m for m in mounts if m.fstype == "cgroup"):
        controllers = frozenset(c for c in mount.superopts if c in V1_CONTROLLERS_OF_INTEREST)
        for name in controllers:
            own = _own_dir(mount, v1_paths.get(name))
            if own is None or not os.path.isdir(own):
                reasons[f"cgroup1.{name}"] = f"this process's {name} group is not visible"
                found[name] = Hierarchy(1, mount.mountpoint, controllers, None, False)
                continue
            problem = _probe_writable(own)
            if problem:
                reasons[f"cgroup1.{name}"] = problem
            found[name] = Hierarchy(1, mount.mountpoint, controllers, own, problem is None)
    for name in V1_CONTROLLERS_OF_INTEREST:
        if name not in found:
            reasons.setdefault(f"cgroup1.{name}", f"no cgroup v1 {name} hierarchy mounted")
    return found


def own_v2_dir() -> str | None:
    """This process's cgroup2 group directory as this mount namespace shows it, without probing
    it; None where there is no cgroup2 mount or the group lies outside it."""
    try:
        mounts = _parse_mountinfo(_read_text("/proc/self/mountinfo"))
        v2_path, _ = _parse_self_cgroup(_read_text("/proc/self/cgroup"))
    except OSError:
        return None
    mount = next((m for m in mounts if m.fstype == "cgroup2"), None)
    return None if mount is None else _own_dir(mount, v2_path)


def detect_layout() -> CgroupLayout:
    """The layout as it is now, every hierarchy's writability probed afresh."""
    try:
        sources = (_read_text("/proc/self/mountinfo"), _read_text("/proc/self/cgroup"))
    except OSError as exc:
        return CgroupLayout(None, {}, {"cgroup": f"cannot read /proc/self: {exc}"})
    return _layout_of(*sources)


def _layout_of(mountinfo: str, self_cgroup: str) -> CgroupLayout:
    reasons: dict[str, str] = {}
    mounts = _parse_mountinfo(mountinfo)
    v2_path, v1_paths = _parse_self_cgroup(self_cgroup)
    v2 = _v2_hierarchy(mounts, v2_path, reasons)
    v1 = _v1_hierarchies(mounts, v1_paths, reasons)
    return CgroupLayout(v2, v1, reasons)


_last_layout: tuple[tuple[int, str, str], CgroupLayout] | None = None  # (its sources, it)


def detect_layout_cached() -> CgroupLayout:
    """``detect_layout`` without probing again while this process's mounts and groups read the
    same: every accounting group a run opens (two per compute attempt) paid ~1 ms of mkdir and
    rmdir probes in four hierarchies for an answer that had not changed. A hierarchy that stops
    accepting groups later still fails the group's own mkdir, and ``open_accounting`` falls
    back from that as it does after a probe that said yes."""
    global _last_layout
    try:
        mountinfo, self_cgroup = _read_text("/proc/self/mountinfo"), _read_text("/proc/self/cgroup")
    except OSError:
        return detect_layout()  # says why, uncached
    sources = (os.getpid(), mountinfo, self_cgroup)
    if _last_layout is None or _last_layout[0] != sources:
        _last_layout = (sources, _layout_of(mountinfo, self_cgroup))
    return _last_layout[1]


class Group:
    """A subject group this process created; removed by ``remove()``."""

    version = 0

    def __init__(self, path: str) -> None:
        self.path = path
        self.procs_path = os.path.join(path, "cgroup.procs")

    @classmethod
    def create(
        cls, parent_dir: str, label: str, announce: Callable[[str], None] | None = None
    ) -> Self:
        """Make a new group; ``announce`` hears its path *before* it exists, so whoever keeps
        a record of groups to remove after a crash never misses one."""
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in label)[:40]
        # the name says who made it, so a later metewand can tell an orphan (measure.orphans)
        path = os.path.join(parent_dir, orphans.group_name(safe, os.urandom(4).hex()))
        if announce is not None:
            announce(path)
        # removed by the watchdog if metewand dies with it (one message per parent: its name)
        watchdog.guard_groups_in(parent_dir, orphans.own_start())
        os.mkdir(path)
        return cls(path)

    def _read(self, name: str) -> str:
        return _read_text(os.path.join(self.path, name))

    def _read_int(self, name: str) -> int | None:
        """Integer file content, None when the file does not exist here."""
        try:
            return int(self._read(name).strip())
        except FileNotFoundError:
            return None

    def procs(self) -> list[int]:
        return [int(p) for p in self._read("cgroup.procs").split()]

    def add(self, pid: int) -> None:
        with open(self.procs_path, "w", encoding="ascii") as handle:
            handle.write(str(pid))

    def kill(self) -> None:
        for pid in self.procs():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def remove(self, timeout_s: float = 5.0) -> None:
        """Kill the members, wait until the group is empty, then remove it. The members'
        exits wake the wait (pidfds); the short retry is for the kernel's own removal."""
        if self._removed():  # the usual case: the members are gone and the group goes at once
            return
        from metewand.measure import process_sweep  # members left: the slow path only

        deadline = time.monotonic() + timeout_s

        def members() -> list[int]:
            with contextlib.suppress(FileNotFoundError):
                return self.procs()
            return []

        while True:
            process_sweep.kill_until_gone(members, max(0.0, deadline - time.monotonic()))
            try:
                if self.procs():
                    self.kill()
                elif self._removed():
                    return
            except FileNotFoundError:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"cgroup {self.path} still busy after {timeout_s}s")
            time.sleep(REMOVE_RETRY_S)

    def _removed(self) -> bool:
        """rmdir: True once the group is gone, False while it is busy (members or the kernel)."""
        try:
            os.rmdir(self.path)
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
            return False
        return True


class V2Group(Group):
    version = 2

    def cpu_ns(self) -> tuple[int, int, int]:
        """(usage, user, system) in ns from cpu.stat (which counts in microseconds)."""
        values = dict(line.split() for line in self._read("cpu.stat").splitlines() if line)
        return tuple(int(values[k]) * 1000 for k in ("usage_usec", "user_usec", "system_usec"))  # type: ignore[return-value]

    def memory_peak(self) -> int | None:
        return self._read_int("memory.peak")

    def reset_memory_peak(self) -> bool:
        """cgroup2's memory.peak resets only for the file descriptor that wrote it (6.12+), so a
        plain read keeps the group-lifetime high-water: not resettable here."""
        return False

    def memory_current(self) -> int | None:
        return self._read_int("memory.current")

    def kill(self) -> None:
        if os.path.exists(os.path.join(self.path, "cgroup.kill")):
            with open(os.path.join(self.path, "cgroup.kill"), "w", encoding="ascii") as handle:
                handle.write("1")
        else:
            super().kill()


class V1CpuacctGroup(Group):
    version = 1

    def cpu_ns(self) -> tuple[int, int, int]:
        """(usage, user, system): the exact usage, and the split the kernel reconciles with it."""
        user, system = v1_split_ns(self._read("cpuacct.stat").encode("ascii").splitlines())
        return int(self._read("cpuacct.usage").strip()), user, system


def v1_split_ns(lines: list[bytes]) -> tuple[int, int]:
    """(user, system) nanoseconds from the lines of cgroup1's ``cpuacct.stat``.

    Why this file and not cpuacct.usage_user/usage_sys (nanoseconds, but raw tick samples): the
    kernel scales cpuacct.stat's tick-sampled split to the exact usage, as cgroup2's cpu.stat
    does, so user + system is the usage to within its 10 ms unit. The raw samples are not: beside
    six bursty loops on this 2-core host they summed to 1.22-1.31 s for a 1.11 s usage.
    """
    fields = dict(line.split() for line in lines if line)
    return (
        procfs.ticks_to_ns(int(fields[b"user"])),
        procfs.ticks_to_ns(int(fields[b"system"])),
    )


class V1MemoryGroup(Group):
    version = 1

    def memory_peak(self) -> int | None:
        return self._read_int("memory.max_usage_in_bytes")

    def reset_memory_peak(self) -> bool:
        """Start a new high-water window: writing 0 sets max_usage_in_bytes to current usage."""
        with open(os.path.join(self.path, "memory.max_usage_in_bytes"), "w") as handle:
            handle.write("0")
        return True

    def memory_current(self) -> int | None:
        return self._read_int("memory.usage_in_bytes")
