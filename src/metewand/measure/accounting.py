"""Tree accounting for one measured subject: cgroup v2, cgroup v1, or the /proc tree walk.

``open_accounting(backend="auto")`` tries cgroup2, then cgroup1, then proc, and records why each
skipped backend was unusable. Every ``Measurement`` it returns names its source.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from typing import NamedTuple

from metewand.errors import EnvironmentMissing
from metewand.measure import procfs
from metewand.measure.cgroups import (
    CgroupLayout,
    Group,
    V1CpuacctGroup,
    V1MemoryGroup,
    V2Group,
    detect_layout_cached,
)
from metewand.measure.forms import Measurement, QualityFlag, Reason, complete, partial, unavailable

BACKENDS = ("cgroup2", "cgroup1", "proc")


class AccountingUnavailable(EnvironmentMissing, RuntimeError):
    """The requested backend cannot be used here; ``reason`` says why."""

    def __init__(self, backend: str, reason: str) -> None:
        super().__init__(f"{backend}: {reason}")
        self.backend = backend
        self.reason = reason


# NamedTuples, not dataclasses, on measure's start-up path: creating a dataclass compiles its
# methods (~0.4 ms each) and the dataclasses module loads inspect (~7 ms); see docs/measure.md.


class CpuReading(NamedTuple):
    total: Measurement
    user: Measurement
    system: Measurement


class MemoryReading(NamedTuple):
    current: Measurement
    peak: Measurement


def _cpu_unavailable(reason: Reason, source: str) -> CpuReading:
    gone = unavailable(reason, source)
    return CpuReading(gone, gone, gone)


class TreeAccounting:
    """Common surface of the three backends."""

    backend: str = ""

    def __init__(self) -> None:
        self.fallback_reasons: list[str] = []
        self.root_pid: int | None = None

    @property
    def quality_flags(self) -> list[QualityFlag]:
        flags = []
        if self.fallback_reasons:
            flags.append(QualityFlag.CPU_ACCOUNTING_FALLBACK)
        return flags

    def preexec_join(self) -> Callable[[], None] | None:
        """A ``preexec_fn`` that moves the forked child into the groups before exec."""
        return None

    def join_paths(self) -> list[tuple[str, str]]:
        """Per group: its ``cgroup.procs`` and that of the group it was made in (where this
        process and its other children live), for ``measure.spawner``; none without groups."""
        return []

    def attach(self, pid: int, joined: bool = False) -> None:
        """The subject's root is ``pid``; ``joined``: it was started inside the groups."""
        self.root_pid = pid

    def pids(self) -> list[int]:
        raise NotImplementedError

    def reset_memory_peak(self) -> bool:
        return False

    def cpu(self) -> CpuReading:
        raise NotImplementedError

    def memory(self) -> MemoryReading:
        raise NotImplementedError

    def memory_current(self) -> Measurement:
        """The current memory alone (a phase mark needs no high-water: one read fewer)."""
        return self.memory().current

    def memory_peak(self) -> Measurement:
        """The high-water alone (an exited subject's report needs no current: one read fewer)."""
        return self.memory().peak

    def kill(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the accounting holds (groups are removed, members killed first)."""

    def __enter__(self) -> TreeAccounting:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CgroupAccounting(TreeAccounting):
    """Dedicated groups: one for CPU and membership, an optional one for memory."""

    def __init__(
        self,
        backend: str,
        cpu_group: V2Group | V1CpuacctGroup,
        memory_group: V2Group | V1MemoryGroup | None,
        memory_missing_reason: str | None = None,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.cpu_group = cpu_group
        self.memory_group = memory_group
        self.memory_missing_reason = memory_missing_reason
        self.groups: list[Group] = [cpu_group]
        if memory_group is not None and memory_group is not cpu_group:
            self.groups.append(memory_group)
        self._closed = False
        # The highest window peak read before a restart of cgroup1's group-wide high-water at a
        # phase mark (measure.mark_probe): memory().peak is never lower than it.
        self._peak_floor: int | None = None

    @property
    def quality_flags(self) -> list[QualityFlag]:
        flags = super().quality_flags
        if self.memory_group is None:
            flags.append(QualityFlag.CGROUP_MEMORY_UNAVAILABLE)
        return flags

    def _source(self, group: Group, what: str) -> str:
        return f"cgroup{group.version}:{what}"

    def preexec_join(self) -> Callable[[], None]:
        # Paths are prepared here: the forked child must do nothing but raw writes before exec.
        paths = [g.procs_path.encode() for g in self.groups]

        def join() -> None:
            for path in paths:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)

        return join

    def join_paths(self) -> list[tuple[str, str]]:
        return [(g.procs_path, g.path.rpartition("/")[0] + "/cgroup.procs") for g in self.groups]

    def attach(self, pid: int, joined: bool = False) -> None:
        super().attach(pid)
        if joined:  # born in the groups (measure.spawner): nothing to check or move
            return
        for group in self.groups:
            if pid not in group.procs():
                group.add(pid)

    def pids(self) -> list[int]:
        return self.cpu_group.procs()

    def cpu(self) -> CpuReading:
        source = self._source(
            self.cpu_group, "cpu.stat" if self.cpu_group.version == 2 else "cpuacct"
        )
        try:
            total, user, system = self.cpu_group.cpu_ns()
        except PermissionError:
            return _cpu_unavailable(Reason.PERMISSION_DENIED, source)
        except OSError:
            return _cpu_unavailable(Reason.ACCOUNTING_UNAVAILABLE, source)
        return CpuReading(complete(total, source), complete(user, source), complete(system, source))

    def memory(self) -> MemoryReading:
        group = self.memory_group
        if group is None:
            gone = unavailable(Reason.UNSUPPORTED, f"{self.backend}:no-memory-controller")
            return MemoryReading(gone, gone)
        source = self._source(group, "memory")
        return MemoryReading(
            _bytes_or_unavailable(group.memory_current, source), self.memory_peak()
        )

    def memory_peak(self) -> Measurement:
        if self.memory_group is None:
            return unavailable(Reason.UNSUPPORTED, f"{self.backend}:no-memory-controller")
        source = self._source(self.memory_group, "memory")
        peak = _bytes_or_unavailable(self.memory_group.memory_peak, source)
        if self._peak_floor is not None and peak.value is not None:
            peak = complete(max(peak.value, self._peak_floor), source)
        return peak

    def fold_window_peak(self, peak: int) -> None:
        """A high-water read just before a phase mark restarts it: keep it for memory().peak."""
        if self._peak_floor is None or peak > self._peak_floor:
            self._peak_floor = peak

    def memory_current(self) -> Measurement:
        if self.memory_group is None:
            return unavailable(Reason.UNSUPPORTED, f"{self.backend}:no-memory-controller")
        source = self._source(self.memory_group, "memory")
        return _bytes_or_unavailable(self.memory_group.memory_current, source)

    def reset_memory_peak(self) -> bool:
        """Restart the memory high-water at the current usage; False when it cannot be reset
        (the peak then spans the group's lifetime, not one attempt)."""
        if self.memory_group is None:
            return False
        self._peak_floor = None  # a new window for memory().peak, whoever restarted it before
        try:
            return self.memory_group.reset_memory_peak()
        except OSError:
            return False

    def kill(self) -> None:
        for group in self.groups:
            with contextlib.suppress(FileNotFoundError):
                group.kill()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        errors = []
        for group in self.groups:
            try:
                group.remove()
            except OSError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]


def _bytes_or_unavailable(read: Callable[[], int | None], source: str) -> Measurement:
    try:
        value = read()
    except PermissionError:
        return unavailable(Reason.PERMISSION_DENIED, source)
    except OSError:
        return unavailable(Reason.ACCOUNTING_UNAVAILABLE, source)
    if value is None:
        return unavailable(Reason.UNSUPPORTED, source)
    return complete(value, source)


class ProcAccounting(TreeAccounting):
    """The /proc fallback: tree walk from the root pid; values are partial ``process_only``.

    CPU sums utime+stime+cutime+cstime over the live tree (cutime/cstime cover children a member
    has waited for); a child that exits and is reaped by someone outside the tree is lost, hence
    ``proc_tree_child_exit_loss_risk``. Memory is the root's VmHWM, the highest value seen while it
    lived (a zombie has no address space left to ask).
    """

    backend = "proc"

    def __init__(self) -> None:
        super().__init__()
        self._last_cpu: CpuReading | None = None
        self._root_hwm: int | None = None

    @property
    def quality_flags(self) -> list[QualityFlag]:
        return [*super().quality_flags, QualityFlag.PROC_TREE_CHILD_EXIT_LOSS_RISK]

    def pids(self) -> list[int]:
        return [] if self.root_pid is None else procfs.descendants(self.root_pid)

    def cpu(self, pids: list[int] | None = None) -> CpuReading:
        """``pids``: the tree as just walked (a phase mark walks it once for CPU and count)."""
        source = "proc:stat"
        if self.root_pid is None:
            return _cpu_unavailable(Reason.NOT_STARTED, source)
        user = system = 0
        seen = False
        for pid in self.pids() if pids is None else pids:
            try:
                stat = procfs.read_stat(pid)
            except procfs.ProcessGone:
                continue
            except PermissionError:
                return _cpu_unavailable(Reason.PERMISSION_DENIED, source)
            seen = True
            user += stat.utime_ticks + stat.cutime_ticks
            system += stat.stime_ticks + stat.cstime_ticks
        if not seen:  # the tree is gone: the last reading is the best there is
            return self._last_cpu or _cpu_unavailable(Reason.ACCOUNTING_UNAVAILABLE, source)
        po = Reason.PROCESS_ONLY
        user_ns, system_ns = procfs.ticks_to_ns(user), procfs.ticks_to_ns(system)
        reading = CpuReading(
            partial(user_ns + system_ns, po, source),
            partial(user_ns, po, source),
            partial(system_ns, po, source),
        )
        self._last_cpu = reading
        return reading

    def memory(self) -> MemoryReading:
        source = "proc:status:VmHWM"
        if self.root_pid is None:
            gone = unavailable(Reason.NOT_STARTED, source)
            return MemoryReading(gone, gone)
        current = unavailable(Reason.ACCOUNTING_UNAVAILABLE, "proc:status:VmRSS")
        try:
            status = procfs.read_status(self.root_pid)
        except (procfs.ProcessGone, PermissionError):
            status = None
        if status is not None and status.vm_hwm_bytes is not None:
            self._root_hwm = max(self._root_hwm or 0, status.vm_hwm_bytes)
        if status is not None and status.vm_rss_bytes is not None:
            current = partial(status.vm_rss_bytes, Reason.PROCESS_ONLY, "proc:status:VmRSS")
        if self._root_hwm is None:
            return MemoryReading(current, unavailable(Reason.ACCOUNTING_UNAVAILABLE, source))
        return MemoryReading(current, partial(self._root_hwm, Reason.PROCESS_ONLY, source))

    def kill(self) -> None:
        for pid in reversed(self.pids()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


Announce = Callable[[str], None] | None


def _open_cgroup2(layout: CgroupLayout, label: str, announce: Announce) -> CgroupAccounting:
    if layout.v2 is None or layout.v2.own_dir is None or not layout.v2.writable:
        raise AccountingUnavailable("cgroup2", layout.reasons.get("cgroup2", "no cgroup2"))
    cpu_group = V2Group.create(layout.v2.own_dir, label, announce)
    memory_group: V2Group | V1MemoryGroup | None = None
    missing = None
    try:
        if "memory" in layout.v2.controllers:
            memory_group = cpu_group
        elif layout.v1_usable("memory"):
            memory_group = V1MemoryGroup.create(_own_dir(layout, "memory"), label, announce)
        else:
            missing = layout.reasons.get("cgroup2.memory", "no memory controller")
    except OSError:
        cpu_group.remove()
        raise
    return CgroupAccounting("cgroup2", cpu_group, memory_group, missing)


def _own_dir(layout: CgroupLayout, controller: str) -> str:
    own = layout.v1[controller].own_dir
    assert own is not None
    return own


def _open_cgroup1(layout: CgroupLayout, label: str, announce: Announce) -> CgroupAccounting:
    if not layout.v1_usable("cpuacct"):
        raise AccountingUnavailable("cgroup1", layout.reasons.get("cgroup1.cpuacct", "no cpuacct"))
    cpu_group = V1CpuacctGroup.create(_own_dir(layout, "cpuacct"), label, announce)
    memory_group = None
    missing = None
    try:
        if layout.v1_usable("memory"):
            memory_group = V1MemoryGroup.create(_own_dir(layout, "memory"), label, announce)
        else:
            missing = layout.reasons.get("cgroup1.memory", "no memory controller")
    except OSError:
        cpu_group.remove()
        raise
    return CgroupAccounting("cgroup1", cpu_group, memory_group, missing)


_OPENERS: dict[str, Callable[[CgroupLayout, str, Announce], TreeAccounting]] = {
    "cgroup2": _open_cgroup2,
    "cgroup1": _open_cgroup1,
    "proc": lambda layout, label, announce: ProcAccounting(),
}


def open_accounting(
    backend: str = "auto",
    label: str = "subject",
    layout: CgroupLayout | None = None,
    announce: Announce = None,
) -> TreeAccounting:
    """Open accounting for one subject. ``auto`` falls back cgroup2 → cgroup1 → proc.

    An explicitly named backend that cannot be used raises ``AccountingUnavailable``.
    ``announce`` hears each group's path before the group is made (a crash record).
    """
    if backend != "auto" and backend not in _OPENERS:
        raise ValueError(f"unknown backend {backend!r}; choose auto or one of {BACKENDS}")
    layout = layout or detect_layout_cached()
    order = BACKENDS if backend == "auto" else (backend,)
    reasons: list[str] = []
    for name in order:
        try:
            accounting = _OPENERS[name](layout, label, announce)
        except AccountingUnavailable as exc:
            reasons.append(f"{name}: {exc.reason}")
        except OSError as exc:  # e.g. EACCES creating the group after a probe said yes
            reasons.append(f"{name}: {exc.strerror or exc}")
        else:
            accounting.fallback_reasons = reasons
            return accounting
    raise AccountingUnavailable(backend, "; ".join(reasons))
