"""Pure readers of /proc: the pid list, per-process stat, status and environment, children
lists, and the tree walk.

Every reader raises ``ProcessGone`` when the process vanished between listing and reading, so
callers can tell a transient exit from a permission problem (``PermissionError`` passes through).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from functools import lru_cache
from typing import NamedTuple

from metewand.errors import MetewandError

PROC = "/proc"


PF_EXITING = 0x4  # include/linux/sched.h: set at the start of do_exit, before the mm goes
PF_KTHREAD = 0x00200000  # include/linux/sched.h: a kernel thread


class ProcessGone(MetewandError, LookupError):
    """The process exited (or was reaped) before its file could be read."""


class ProcStat(NamedTuple):  # not a dataclass: see measure.accounting
    pid: int
    state: str
    ppid: int
    utime_ticks: int
    stime_ticks: int
    cutime_ticks: int  # CPU of children this process has waited for
    cstime_ticks: int
    starttime_ticks: int
    # Cheap change signals for PSS reuse: any fault, map or unmap moves one of these.
    minflt: int = 0
    majflt: int = 0
    vsize_bytes: int = 0
    rss_pages: int = 0
    flags: int = 0  # the kernel's task flags (PF_*), e.g. PF_EXITING
    pgrp: int = 0
    session: int = 0  # the session leader's pid: what an engine's helpers keep after reparenting
    comm: str = ""  # the kernel's 15-byte command name (never the command line)

    @property
    def exiting(self) -> bool:
        return bool(self.flags & PF_EXITING)

    @property
    def kernel_thread(self) -> bool:
        return bool(self.flags & PF_KTHREAD)

    @property
    def own_ticks(self) -> int:
        """CPU of the process itself (all its threads, living and ended), in clock ticks."""
        return self.utime_ticks + self.stime_ticks

    @property
    def total_ticks(self) -> int:
        """Own CPU plus that of the children it has waited for (they land here when reaped)."""
        return self.own_ticks + self.cutime_ticks + self.cstime_ticks


class ProcStatus(NamedTuple):
    pid: int
    state: str
    vm_hwm_bytes: int | None  # absent for zombies and kernel threads (no address space)
    vm_rss_bytes: int | None


@lru_cache(maxsize=1)
def clock_ticks() -> int:
    """The kernel's USER_HZ: the unit of the tick fields in /proc/PID/stat."""
    return int(os.sysconf("SC_CLK_TCK"))


def ticks_to_ns(ticks: int) -> int:
    return ticks * 1_000_000_000 // clock_ticks()


def _read_bytes(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError) as exc:
        raise ProcessGone(path) from exc
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    except ProcessLookupError as exc:
        raise ProcessGone(path) from exc
    finally:
        os.close(fd)


def parse_stat(pid: int, text: bytes) -> ProcStat:
    # The command name may hold spaces and parentheses: split after the last ')'.
    close = text.rindex(b")")
    rest = text[close + 2 :].split()
    return ProcStat(
        pid=pid,
        state=rest[0].decode("ascii"),
        ppid=int(rest[1]),
        utime_ticks=int(rest[11]),
        stime_ticks=int(rest[12]),
        cutime_ticks=int(rest[13]),
        cstime_ticks=int(rest[14]),
        starttime_ticks=int(rest[19]),
        minflt=int(rest[7]),
        majflt=int(rest[9]),
        vsize_bytes=int(rest[20]),
        rss_pages=int(rest[21]),
        flags=int(rest[6]),
        pgrp=int(rest[2]),
        session=int(rest[3]),
        comm=text[text.index(b"(") + 1 : close].decode("utf-8", "replace"),
    )


def read_stat(pid: int) -> ProcStat:
    return parse_stat(pid, _read_bytes(f"{PROC}/{pid}/stat"))


def iter_pids(proc: str = PROC) -> Iterator[int]:
    """Every process id listed in /proc right now (each may be gone by the time it is read)."""
    for entry in os.scandir(proc):
        if entry.name.isdigit():
            yield int(entry.name)


def read_all_stats(proc: str = PROC) -> dict[int, ProcStat]:
    """``/proc/PID/stat`` of every process visible now; processes that exit (or refuse) while
    the list is read are left out."""
    found: dict[int, ProcStat] = {}
    for pid in iter_pids(proc):
        try:
            found[pid] = parse_stat(pid, _read_bytes(f"{proc}/{pid}/stat"))
        except (ProcessGone, PermissionError, ValueError):
            continue
    return found


class CpuStat(NamedTuple):
    """What a CPU scan of every process needs from ``/proc/PID/stat`` (``read_all_cpu``): a
    tuple, since a scan makes one per process on the host, every host sample."""

    ppid: int
    session: int
    starttime_ticks: int
    own_ticks: int  # utime + stime: the process itself (all its threads, living and ended)
    total_ticks: int  # own + the children it has waited for
    flags: int
    raw_comm: bytes

    @property
    def comm(self) -> str:
        return self.raw_comm.decode("utf-8", "replace")

    @property
    def kernel_thread(self) -> bool:
        return bool(self.flags & PF_KTHREAD)


def read_all_cpu(proc: str = PROC) -> dict[int, CpuStat]:
    """``read_all_stats`` for a CPU scan: the same files, one read each (a stat line is well
    under a page), only the fields the scan uses converted; each file opened and closed here
    (``StatFiles`` keeps them open from one scan to the next)."""
    return StatFiles(proc, limit=0).read_all_cpu()


class StatFiles:
    """``read_all_cpu`` with each process's ``stat`` kept open from one scan to the next.

    Host telemetry scans every process on the host at each sample. A kept descriptor is read
    again without an open and a close, and a line that reads as at the last scan (an idle
    process's) keeps its figures without a parse: a scan of 78 processes here took 0.20 ms of
    thread CPU against 0.38 back to back, and 0.88 against 1.07 ms after half a second asleep,
    as the sampler's thread scans (``benchmarks/foreign_cpu_cost.py``). A kept descriptor is
    bound to its process, not to the pid: once that process is gone its read fails (ESRCH,
    whichever process has the pid now), and it is closed and the pid's file opened afresh. A
    descriptor whose pid left the listing is closed after the scan. At most ``limit`` are kept
    (the rest are opened per scan), a small share of the file limit. Not thread-safe: one
    scanner at a time, ``close()`` once it has stopped.
    """

    def __init__(self, proc: str = PROC, limit: int | None = None) -> None:
        self.proc = proc
        self.limit = kept_stat_limit() if limit is None else limit
        self._fds: dict[str, int] = {}
        # each kept process's last line and its figures
        self._parsed: dict[str, tuple[bytes, CpuStat]] = {}

    def read_all_cpu(self) -> dict[int, CpuStat]:
        found: dict[int, CpuStat] = {}
        left, self._fds = self._fds, {}
        parsed, self._parsed = self._parsed, {}
        try:
            for entry in os.scandir(self.proc):
                name = entry.name
                if name.isdigit():
                    text = self._read(name, left.pop(name, None))
                    if text is not None:
                        self._add(found, name, text, parsed.get(name))
        finally:
            for fd in left.values():  # their pids are gone from the listing
                os.close(fd)
        return found

    def _add(
        self,
        found: dict[int, CpuStat],
        name: str,
        text: bytes,
        before: tuple[bytes, CpuStat] | None,
    ) -> None:
        """An idle process's line reads the same as at the last scan: its figures too."""
        if before is not None and before[0] == text:
            found[int(name)] = before[1]
        else:
            _add_cpu(found, name, text)
        if name in self._fds and int(name) in found:
            self._parsed[name] = (text, found[int(name)])

    def _read(self, name: str, kept: int | None) -> bytes | None:
        text = None if kept is None else _pread_stat(kept)
        if text is not None:
            assert kept is not None
            self._fds[name] = kept
            return text
        if kept is not None:  # kept for a process that is gone: the pid's file afresh
            os.close(kept)
        fd = _open_stat(self.proc, name)
        if fd is None:
            return None
        text = _pread_stat(fd)
        if text is not None and len(self._fds) < self.limit:
            self._fds[name] = fd
        else:
            os.close(fd)
        return text

    @property
    def kept(self) -> int:
        return len(self._fds)

    def close(self) -> None:
        fds, self._fds, self._parsed = self._fds, {}, {}
        for fd in fds.values():
            os.close(fd)


def kept_stat_limit() -> int:
    """How many ``stat`` descriptors a ``StatFiles`` keeps: 512, or an eighth of the soft file
    limit when that is lower (the harness's engines, sockets and pipes need the rest)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 512 if soft == resource.RLIM_INFINITY else max(0, min(512, soft // 8))


def _open_stat(proc: str, name: str) -> int | None:
    try:
        return os.open(f"{proc}/{name}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None  # gone (or refused) since the listing


def _pread_stat(fd: int) -> bytes | None:
    try:
        return os.pread(fd, 4096, 0)
    except OSError:
        return None  # the process is gone


def _add_cpu(found: dict[int, CpuStat], name: str, text: bytes | None) -> None:
    if not text:
        return  # gone, or an exiting process's empty read
    try:
        close = text.rindex(b")")
        rest = text[close + 2 :].split(None, 20)
        own = int(rest[11]) + int(rest[12])
        found[int(name)] = CpuStat(
            int(rest[1]),
            int(rest[3]),
            int(rest[19]),
            own,
            own + int(rest[13]) + int(rest[14]),
            int(rest[6]),
            text[text.index(b"(") + 1 : close],
        )
    except (ValueError, IndexError):
        return


def read_environ(pid: int) -> list[bytes]:
    """The ``NAME=value`` entries of the environment ``pid`` was started with."""
    return [item for item in _read_bytes(f"{PROC}/{pid}/environ").split(b"\0") if item]


def _kib_field(line: bytes) -> int:
    return int(line.split()[1]) * 1024


def parse_status(pid: int, text: bytes) -> ProcStatus:
    state, hwm, rss = "?", None, None
    for line in text.splitlines():
        if line.startswith(b"State:"):
            state = line.split()[1].decode("ascii")
        elif line.startswith(b"VmHWM:"):
            hwm = _kib_field(line)
        elif line.startswith(b"VmRSS:"):
            rss = _kib_field(line)
    return ProcStatus(pid=pid, state=state, vm_hwm_bytes=hwm, vm_rss_bytes=rss)


def read_status(pid: int) -> ProcStatus:
    return parse_status(pid, _read_bytes(f"{PROC}/{pid}/status"))


def read_cwd(pid: int) -> str | None:
    """The working directory of a live process; None when it is gone or unreadable."""
    try:
        return os.readlink(f"{PROC}/{pid}/cwd")
    except OSError:
        return None


def children(pid: int, proc: str = PROC) -> list[int]:
    """Direct children of every thread of ``pid`` (a child belongs to the thread that forked it)."""
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return []
    out: list[int] = []
    for tid in tids:
        try:
            out.extend(int(c) for c in _read_bytes(f"{proc}/{pid}/task/{tid}/children").split())
        except ProcessGone:
            continue  # the thread ended; its children were reparented to a sibling thread
    return out


def descendants(root_pid: int, proc: str = PROC) -> list[int]:
    """``root_pid`` and every live (or zombie) descendant, tolerant of exits during the walk.

    The root is included only while /proc still shows it. ``proc`` names another /proc root
    (a copied, partial one stands in for kernels missing files).
    """
    if not os.path.exists(f"{proc}/{root_pid}"):
        return []
    seen: list[int] = [root_pid]
    known = {root_pid}
    index = 0
    while index < len(seen):
        for child in children(seen[index], proc):
            if child not in known:
                known.add(child)
                seen.append(child)
        index += 1
    return seen
