"""The cheap counters at a phase mark, read as cheaply as the kernel allows.

A mark may sit inside a timed envelope (a compute attempt's integrity check and execute marks
do), so its cost is part of what is measured. Opening a cgroup file, reading it and closing it
costs ~10 µs from Python here; ``pread`` on a descriptor kept open costs ~1 µs
(``benchmarks/compute_marks.py`` prints both). So a ``CgroupProbe`` opens every file once, and
``snap()`` only preads raw bytes and takes the clock: no open, no parse, no ``Measurement``.
``decode()`` turns a snapshot into ``Counters`` later, when the record is built.

A snapshot also carries the memory high-water since the previous snapshot, where the kernel can
restart it:

- cgroup v1 ``memory.max_usage_in_bytes``: writing 0 restarts it at the current usage, for the
  whole group. So the probe reads it, then restarts it, and folds what it read into the
  accounting's running maximum (``CgroupAccounting.fold_window_peak``): the group-lifetime peak
  others read stays right.
- cgroup v2 ``memory.peak``: since Linux 6.12 a write restarts the high-water *for the writing
  descriptor only*, so the probe's own descriptor gives the window peak while everyone else's
  read still sees the lifetime peak. Older kernels refuse the write; the peak is then unavailable
  with that reason.

Between the read and the restart a few microseconds pass in which a higher usage would be lost;
the window peak is a floor of the truth by at most that.

Another process can take a mark on the same files (``CgroupProbe.reads_plan``): a driver path's
adapter reads them at its op boundary itself, writes the raw bytes down its mark line, and the
probe turns them into the same snapshot later (``snapshot_of``), so the harness need not wake at
each op. The clock is CLOCK_MONOTONIC in both processes. The adapter restarts the high-water as
the probe would: cgroup1's for the whole group (folded into the accounting when the line is
taken); cgroup2's on the adapter's own descriptor, restarted when it opens it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from metewand.measure.accounting import (
    CgroupAccounting,
    CpuReading,
    ProcAccounting,
    TreeAccounting,
)
from metewand.measure.cgroups import V2Group, v1_split_ns
from metewand.measure.forms import Measurement, Reason, complete, partial, unavailable
from metewand.measure.phases import Counters, counters_of

PROCS_CHUNK = 1 << 16  # one pread returns every pid unless the group holds thousands
V1_RESTART: Final = "0"
V2_RESTART: Final = "reset\n"


class MarkProbe(Protocol):
    """What ``PhaseClock`` needs: a cheap ``snap()`` now, ``decode()`` of it later."""

    peak_method: str  # how the window peak is read, or why it is not

    def snap(self) -> Any: ...

    def decode(self, raw: Any) -> Counters: ...

    def close(self) -> None: ...


def probe_of(accounting: TreeAccounting) -> MarkProbe:
    """The cheapest probe ``accounting`` allows (descriptors kept open on the cgroup backends)."""
    if isinstance(accounting, CgroupAccounting):
        try:
            return CgroupProbe(accounting)
        except OSError as exc:  # a file missing here: the plain reader still says why per value
            return ReaderProbe(accounting, f"unavailable: cannot keep the files open ({exc})")
    if isinstance(accounting, ProcAccounting):
        return ProcProbe(accounting)
    return ReaderProbe(accounting, "unavailable: no probe for this accounting")


class KeptProbes:
    """Probes kept from one subject to the next (a browser run's attempts on one engine group),
    closed by their owner once it is done with them (``close``). Opening a group's files and
    closing them again cost ~0.18 ms of the harness's CPU per attempt, against ~15 µs for a
    mark's reads. Several threads may ask (one per slot); a probe of one accounting is only ever
    marked by one subject at a time, as the accounting is (a worker x engine group)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # key -> (what the key stands for, its probe): holding the accounting keeps its id its own
        self._probes: dict[object, tuple[object, MarkProbe]] = {}

    def probe(self, accounting: TreeAccounting) -> MarkProbe:
        """``accounting``'s probe (``probe_of``), opened on the first call."""
        return self.kept(id(accounting), lambda: probe_of(accounting), holds=accounting)

    def kept(self, key: object, make: Callable[[], MarkProbe], holds: object = None) -> MarkProbe:
        """The probe kept under ``key``, made by ``make`` on the first call. A ``ReaderProbe``
        (the fallback after a file could not be opened) is not kept: the next call tries again."""
        with self._lock:
            kept = self._probes.get(key)
            if kept is not None:
                return kept[1]
            probe = make()
            if not isinstance(probe, ReaderProbe):
                self._probes[key] = (holds, probe)
            return probe

    def close(self) -> None:
        with self._lock:
            kept, self._probes = self._probes, {}
        for _, probe in kept.values():
            probe.close()


class ProcProbe:
    """The /proc fallback reads at the mark (a tree walk has no descriptors to keep), but walks
    the tree once for both CPU and the process count (the plain reader walks it twice)."""

    peak_method = "unavailable: the /proc fallback has no resettable high-water"

    def __init__(self, accounting: ProcAccounting) -> None:
        self.accounting = accounting

    def snap(self) -> Counters:
        pids: list[int] | None = None
        try:
            pids = self.accounting.pids()
        except PermissionError:
            count = unavailable(Reason.PERMISSION_DENIED)
        except OSError:
            count = unavailable(Reason.ACCOUNTING_UNAVAILABLE)
        else:  # a walk from the root misses processes reparented away
            count = partial(len(pids), Reason.PROCESS_ONLY)
        cpu = self.accounting.cpu(pids)
        memory = self.accounting.memory_current()
        return Counters(time.monotonic_ns(), cpu, memory, count)

    def decode(self, raw: Counters) -> Counters:
        return raw

    def close(self) -> None:
        pass


class ReaderProbe:
    """Reads and decodes at once (``counters_of``): a fallback for other accountings."""

    def __init__(self, accounting: TreeAccounting, peak_method: str) -> None:
        self._read = counters_of(accounting)
        self.peak_method = peak_method

    def snap(self) -> Counters:
        return self._read()

    def decode(self, raw: Counters) -> Counters:
        return raw

    def close(self) -> None:
        pass


class CgroupProbe:
    """Descriptors kept open on one accounting's groups; ``snap()`` is preads and a clock read."""

    def __init__(self, accounting: CgroupAccounting) -> None:
        self.accounting = accounting
        self._fds: list[int] = []
        # what snap() reads, in its order, for a reader in another process (reads_plan)
        self._plan: list[dict[str, Any]] = []
        self._peak_kind = ""  # "v1", "v2", or "" (no window peak)
        cpu_group = accounting.cpu_group
        self.cpu_source = f"cgroup{cpu_group.version}:" + (
            "cpu.stat" if cpu_group.version == 2 else "cpuacct"
        )
        try:
            # cgroup2: cpu.stat has all three. cgroup1: cpuacct.usage is the exact total, and
            # cpuacct.stat the user/system split the kernel reconciles with it (cgroups.v1_split_ns)
            name = "cpu.stat" if cpu_group.version == 2 else "cpuacct.stat"
            self._cpu_fd = self._open(cpu_group.path, name)
            self._usage_fd = (
                None if cpu_group.version == 2 else self._open(cpu_group.path, "cpuacct.usage")
            )
            # room for the file as it is now, many times over
            self._cpu_size = max(4096, 4 * len(os.pread(self._cpu_fd, 1 << 16, 0)))
            self._plan.append(_entry(cpu_group.path, name, self._cpu_size))
            if self._usage_fd is not None:
                self._plan.append(_entry(cpu_group.path, "cpuacct.usage", 64))
            self._procs_fd = self._open(cpu_group.path, "cgroup.procs")
            self._memory_fd: int | None = None
            self._peak: Callable[[], int | str] = _no_peak
            self.peak_method = "unavailable: no memory controller"
            if accounting.memory_group is not None:
                self._open_memory(accounting)
            self._plan.append(_entry(cpu_group.path, "cgroup.procs", PROCS_CHUNK))
            if self._peak_kind:
                self._plan.append(self._peak_entry)
        except OSError:
            self.close()
            raise

    def _open(self, directory: str, name: str, flags: int = os.O_RDONLY) -> int:
        fd = os.open(os.path.join(directory, name), flags | os.O_CLOEXEC)
        self._fds.append(fd)
        return fd

    def _open_memory(self, accounting: CgroupAccounting) -> None:
        group = accounting.memory_group
        assert group is not None
        self.memory_source = f"cgroup{group.version}:memory"
        if isinstance(group, V2Group):
            self._memory_fd = self._open(group.path, "memory.current")
            self._plan.append(_entry(group.path, "memory.current", 64))
            self._open_v2_peak(group.path)
        else:
            self._memory_fd = self._open(group.path, "memory.usage_in_bytes")
            self._plan.append(_entry(group.path, "memory.usage_in_bytes", 64))
            read_fd = self._open(group.path, "memory.max_usage_in_bytes")
            reset_fd = self._open(group.path, "memory.max_usage_in_bytes", os.O_WRONLY)
            self._peak = _v1_window_peak(read_fd, reset_fd, accounting)
            self.peak_method = "cgroup1:memory.max_usage_in_bytes restarted at each mark"
            self._peak_kind = "v1"
            self._peak_entry = _entry(group.path, "memory.max_usage_in_bytes", 64, V1_RESTART)

    def _open_v2_peak(self, directory: str) -> None:
        try:
            fd = self._open(directory, "memory.peak", os.O_RDWR)
            os.pwrite(fd, b"reset\n", 0)  # this descriptor's window starts now (Linux 6.12+)
        except OSError as exc:
            self.peak_method = (
                f"unavailable: cgroup2 memory.peak cannot be restarted per descriptor on this "
                f"kernel ({exc.strerror or exc})"
            )
            return
        self._peak = _v2_window_peak(fd)
        self.peak_method = "cgroup2:memory.peak restarted per descriptor at each mark"
        self._peak_kind = "v2"
        # the adapter's own descriptor: its first reading covers the time since it opened it
        self._peak_entry = {
            **_entry(directory, "memory.peak", 64, V2_RESTART),
            "restart_at_open": True,
        }

    def reads_plan(self) -> list[dict[str, Any]]:
        """The files a mark reads, in ``snap()``'s order, for a reader in another process:
        ``path``, ``size`` (bytes to ask for), ``restart`` (written at offset 0 after each read:
        the high-water's restart) and ``restart_at_open``. Its raw bytes come back through
        ``snapshot_of``."""
        return [dict(entry) for entry in self._plan]

    def snapshot_of(self, monotonic_ns: int, fields: list[bytes | OSError]) -> tuple[Any, ...]:
        """The snapshot ``snap()`` would have made from another reader's raw bytes (one per
        ``reads_plan`` entry, or the error its read met); ValueError when they are not that."""
        if len(fields) != len(self._plan):
            raise ValueError(f"{len(fields)} readings for {len(self._plan)} files")
        for field in fields:
            if isinstance(field, OSError):
                return monotonic_ns, _reason_of(field)
        raw = [field for field in fields if isinstance(field, bytes)]
        cpu = raw.pop(0)
        if self._usage_fd is not None:
            cpu += raw.pop(0)
        memory = None if self._memory_fd is None else raw.pop(0)
        procs = raw.pop(0)
        try:  # a reading that cannot be decoded is refused now, not when the record is built
            _decode_cpu(cpu, self.cpu_source)
            if memory is not None:
                int(memory)
        except (KeyError, IndexError) as exc:
            raise ValueError(f"not a counters file: {exc!r}") from exc
        peak: int | str = _no_peak()
        if self._peak_kind:
            peak = int(raw.pop(0))
            if self._peak_kind == "v1":  # the adapter restarted the group's high-water
                self.accounting.fold_window_peak(peak)
        return monotonic_ns, cpu, memory, procs, peak

    def snap(self) -> tuple[Any, ...]:
        """Raw bytes and the clock now; (clock, reason) when a read failed."""
        try:
            cpu = os.pread(self._cpu_fd, self._cpu_size, 0)
            if self._usage_fd is not None:
                cpu += os.pread(self._usage_fd, 64, 0)  # "user N" and "system N", then the total
            memory = None if self._memory_fd is None else os.pread(self._memory_fd, 64, 0)
            procs = os.pread(self._procs_fd, PROCS_CHUNK, 0)
            peak = self._peak()
        except OSError as exc:
            return time.monotonic_ns(), _reason_of(exc)
        return time.monotonic_ns(), cpu, memory, procs, peak

    def decode(self, raw: tuple[Any, ...]) -> Counters:
        if len(raw) == 2:
            return _unreadable(raw[0], Reason(raw[1]), self.cpu_source)
        now, cpu, memory, procs, peak = raw
        if len(procs) >= PROCS_CHUNK:  # too many pids for one chunk: count them now
            procs = b"\n" * len(self.accounting.pids())
        return Counters(
            now,
            _decode_cpu(cpu, self.cpu_source),
            self._decode_memory(memory),
            complete(procs.count(b"\n")),
            self._decode_peak(peak),
        )

    def _decode_memory(self, memory: bytes | None) -> Measurement:
        if memory is None:
            return unavailable(Reason.UNSUPPORTED, f"{self.accounting.backend}:no-memory")
        return complete(int(memory), self.memory_source)

    def _decode_peak(self, peak: int | str) -> Measurement:
        if isinstance(peak, int):
            return complete(peak, self.memory_source)
        return unavailable(Reason(peak))

    def close(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)


def _entry(directory: str, name: str, size: int, restart: str | None = None) -> dict[str, Any]:
    return {"path": os.path.join(directory, name), "size": size, "restart": restart}


def _no_peak() -> str:
    return Reason.UNSUPPORTED.value


def _v1_window_peak(read_fd: int, reset_fd: int, accounting: CgroupAccounting) -> Callable[[], int]:
    def window_peak() -> int:
        peak = int(os.pread(read_fd, 64, 0))
        os.pwrite(reset_fd, b"0", 0)  # the group's high-water restarts at the current usage
        accounting.fold_window_peak(peak)  # ...so the lifetime peak is kept on the accounting
        return peak

    return window_peak


def _v2_window_peak(fd: int) -> Callable[[], int]:
    def window_peak() -> int:
        peak = int(os.pread(fd, 64, 0))
        os.pwrite(fd, b"reset\n", 0)  # this descriptor's high-water only
        return peak

    return window_peak


def _decode_cpu(raw: bytes, source: str) -> CpuReading:
    lines = raw.splitlines()
    if lines[0].startswith(b"user "):  # cgroup1: cpuacct.stat (user, system), then cpuacct.usage
        user, system = v1_split_ns(lines[:-1])
        total = int(lines[-1])
    else:  # cgroup2 cpu.stat, in microseconds
        total, user, system = _v2_cpu_ns(lines)
    return CpuReading(complete(total, source), complete(user, source), complete(system, source))


_V2_HEAD: Final = (b"usage_usec", b"user_usec", b"system_usec")


def _v2_cpu_ns(lines: list[bytes]) -> tuple[int, int, int]:
    """cgroup2 cpu.stat's usage, user and system in ns. The kernel writes those three first,
    in this order: read them where they are, and look for them by name only otherwise."""
    head = [line.split() for line in lines[:3]]
    if [pair[0] for pair in head if pair] == list(_V2_HEAD):
        return int(head[0][1]) * 1000, int(head[1][1]) * 1000, int(head[2][1]) * 1000
    values = dict(line.split() for line in lines if line)
    total, user, system = (int(values[k]) * 1000 for k in _V2_HEAD)
    return total, user, system


def _unreadable(monotonic_ns: int, reason: Reason, source: str) -> Counters:
    gone = unavailable(reason, source)
    return Counters(monotonic_ns, CpuReading(gone, gone, gone), gone, gone, gone)


def _reason_of(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return Reason.PERMISSION_DENIED.value
    return Reason.ACCOUNTING_UNAVAILABLE.value
