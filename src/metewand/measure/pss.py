"""PSS of a process tree: sum of ``Pss:`` from /proc/PID/smaps_rollup, read in parallel.

Cost notes (why it is written this way): the kernel builds the whole rollup (a page-table walk)
on the first read, whatever the buffer size, so the Python side should add as little as possible:
one ``os.open``/``os.read`` of a small buffer per process, no text decoding, only the ``Pss:`` line
parsed. The walk releases the GIL, so a few threads overlap the walks of different processes; the
calling thread reads one share itself instead of waiting idle.

Reuse (``reuse_unchanged``): the page walk (~1.6 ms for a Chromium process) is the whole cost, and
a process's PSS only moves when pages are mapped, faulted, unmapped or shared differently. So a
member whose /proc/PID/stat change signals (start time, minor and major faults, vsize, RSS) are
identical to those read just before its last walk keeps its last PSS, as long as the member set
is the same as at the last scan (a fork or an exit changes sharing), no process started or exited
anywhere on the host since (another browser mapping the same binary moves every member's share of
it), and the value is younger than ``reuse_max_age_s`` (an outside process faulting in more of a
shared file is invisible here). When a walked member's shared pages moved by more than
``reuse_shared_tolerance_bytes`` (accumulated), the reused members are walked as well.
One stat read (~10 us) replaces the walk. The benchmark reports the error against full scans.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from metewand.measure import procfs
from metewand.measure.forms import Measurement, QualityFlag, Reason, complete, unavailable

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

SOURCE = "proc:smaps_rollup"
_READ_SIZE = 1024  # one read holds Pss (3rd line) and Shared_Clean/Shared_Dirty (8th, 9th)


class Outcome(Enum):
    OK = "ok"
    ZOMBIE = "zombie"  # confirmed state Z: counted, with no address space
    GONE = "gone"  # vanished between listing and reading
    DENIED = "denied"
    UNCONFIRMED = "unconfirmed"  # read failed and the state could not be confirmed


@dataclass(frozen=True, slots=True)
class PssScan:
    total_bytes: int | None  # None when any member could not be read (never 0 for "unknown")
    process_count: int
    zombie_count: int
    retried: bool
    unreadable_pids: tuple[int, ...]
    unavailable_reason: Reason | None
    reader_cpu_ns: int  # CPU of all reading work, on whichever thread it ran
    pool_cpu_ns: int  # the part of reader_cpu_ns spent on pool threads
    wall_ns: int
    per_pid_bytes: dict[int, int] = field(default_factory=dict)
    walked_count: int = 0  # smaps_rollup page walks done by this scan
    reused_count: int = 0  # members that kept their last PSS (signals unchanged)

    def measurement(self) -> Measurement:
        if self.total_bytes is None:
            return unavailable(self.unavailable_reason or Reason.ACCOUNTING_UNAVAILABLE, SOURCE)
        return complete(self.total_bytes, SOURCE)

    @property
    def quality_flags(self) -> list[QualityFlag]:
        flags = []
        if self.retried:
            flags.append(QualityFlag.PSS_SCAN_RETRIED)
        if self.zombie_count:
            flags.append(QualityFlag.PSS_ZERO_ADDRESS_SPACE_PROCESS)
        if self.total_bytes is None:
            flags.append(QualityFlag.PSS_UNAVAILABLE)
        return flags


# Worth reading again: the member left, or its address space is gone while it is not yet a
# zombie (between exit_mm and exit_notify: a closed tab's renderer at the end scan).
_TRANSIENT = (Outcome.GONE, Outcome.UNCONFIRMED)
_EXIT_SETTLE_S = 0.002


def _parse_pss_bytes(data: bytes) -> int | None:
    at = data.find(b"\nPss:")
    if at < 0:
        return None
    return int(data[at + 5 : data.index(b"kB", at)]) * 1024


def _parse_shared_bytes(data: bytes) -> int:
    """Shared_Clean + Shared_Dirty: pages this process maps that another mapping also holds."""
    total = 0
    for key in (b"\nShared_Clean:", b"\nShared_Dirty:"):
        at = data.find(key)
        if at >= 0:
            total += int(data[at + len(key) : data.index(b"kB", at)]) * 1024
    return total


def _confirm_exit(pid: int) -> Outcome:
    """After a failed read: a zombie (still listed, no address space) or gone."""
    try:
        stat = procfs.read_stat(pid)
    except procfs.ProcessGone:
        return Outcome.GONE
    except PermissionError:
        return Outcome.DENIED
    # An exiting process (PF_EXITING) whose rollup is empty has released its address space
    # just as a zombie has: counted, with 0 live PSS. Anything else is retried, then unavailable.
    return Outcome.ZOMBIE if stat.state in ("Z", "X") or stat.exiting else Outcome.UNCONFIRMED


def read_rollup(pid: int) -> tuple[Outcome, int, int]:
    """(outcome, PSS bytes, shared bytes) of one process; 0 unless the outcome is OK.

    One open and one read: the kernel walks the page tables once, whatever the buffer size."""
    try:
        fd = os.open(b"/proc/%d/smaps_rollup" % pid, os.O_RDONLY | os.O_CLOEXEC)
    except PermissionError:
        return Outcome.DENIED, 0, 0
    except (FileNotFoundError, ProcessLookupError):
        return _confirm_exit(pid), 0, 0
    try:
        data = os.read(fd, _READ_SIZE)
    except PermissionError:
        return Outcome.DENIED, 0, 0
    except (ProcessLookupError, FileNotFoundError):
        return _confirm_exit(pid), 0, 0
    finally:
        os.close(fd)
    value = _parse_pss_bytes(data)
    if value is None:  # empty rollup: no address space (zombie or exiting)
        return _confirm_exit(pid), 0, 0
    return Outcome.OK, value, _parse_shared_bytes(data)


def read_pss(pid: int) -> tuple[Outcome, int]:
    """(outcome, PSS bytes) of one process; bytes are 0 unless the outcome is OK."""
    outcome, value, _ = read_rollup(pid)
    return outcome, value


Result = tuple[int, Outcome, int, int]  # pid, outcome, PSS bytes, shared bytes


def _read_chunk(pids: Sequence[int]) -> tuple[list[Result], int]:
    start = time.thread_time_ns()
    results = [(pid, *read_rollup(pid)) for pid in pids]
    return results, time.thread_time_ns() - start


class _PidQueue:
    """A pid list that several reader threads drain together, one pid at a time."""

    def __init__(self, pids: Sequence[int]) -> None:
        self._pids = iter(pids)
        self._lock = threading.Lock()

    def _next(self) -> int | None:
        with self._lock:
            return next(self._pids, None)

    def drain(self) -> tuple[list[Result], int]:
        start = time.thread_time_ns()
        results = []
        while (pid := self._next()) is not None:
            results.append((pid, *read_rollup(pid)))
        return results, time.thread_time_ns() - start


Signature = tuple[int, int, int, int, int]  # starttime, minflt, majflt, vsize, rss pages


@dataclass(frozen=True, slots=True)
class _Memo:
    signature: Signature
    value: int
    shared_bytes: int
    walked_ns: int  # monotonic time of the scan that walked it


def _host_pids() -> frozenset[int]:
    return frozenset(int(name) for name in os.listdir("/proc") if name.isdigit())


def _workers_default() -> int:
    # The cores this process may run on, not the machine's: extra threads would only queue.
    return min(4, len(os.sched_getaffinity(0)))


class PssScanner:
    """Holds the reader threads across scans (starting threads per scan would cost more), and,
    with ``reuse_unchanged``, the last PSS of every member with the signals read before its walk.
    """

    def __init__(
        self,
        workers: int | None = None,
        parallel_min: int = 4,
        max_retries: int = 3,
        *,
        reuse_unchanged: bool = False,
        reuse_max_age_s: float = 10.0,
        reuse_shared_tolerance_bytes: int = 1 << 20,
        reuse_requires_quiet_host: bool = True,
    ):
        self.workers = max(1, workers if workers is not None else _workers_default())
        self.parallel_min = parallel_min
        self.max_retries = max_retries
        self.reuse_unchanged = reuse_unchanged
        self.reuse_max_age_ns = int(reuse_max_age_s * 1e9)
        self.reuse_shared_tolerance_bytes = reuse_shared_tolerance_bytes
        self.reuse_requires_quiet_host = reuse_requires_quiet_host
        self._pool: ThreadPoolExecutor | None = None
        self._pool_clocks: list[int] = []
        self._memo: dict[int, _Memo] = {}
        self._members: frozenset[int] | None = None
        self._outside: frozenset[int] | None = None  # the host's other processes at the last scan
        # Estimated PSS error carried by reused values: sharing moves since everything was walked.
        self._carried_error_bytes = 0

    def _register_pool_thread(self) -> None:
        self._pool_clocks.append(time.pthread_getcpuclockid(threading.get_ident()))

    def pool_threads_cpu_ns(self) -> int:
        """Whole CPU of the reader threads so far (reading plus queue and wake-up overhead)."""
        total = 0
        for clock in list(self._pool_clocks):
            try:
                total += time.clock_gettime_ns(clock)
            except OSError:  # the thread ended (pool shut down); its CPU is no longer visible
                continue
        return total

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            # loaded with the first pool: concurrent.futures pulls in logging (~10 ms), which
            # measure's repeated runs (no PSS) never need
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(
                self.workers - 1,
                thread_name_prefix="metewand-pss",
                initializer=self._register_pool_thread,
            )
        return self._pool

    def _read_all(self, pids: Sequence[int]) -> tuple[list[Result], int, int]:
        """(results, reader_cpu_ns, pool_cpu_ns) for ``pids``."""
        if self.workers == 1 or len(pids) < self.parallel_min:
            results, cpu = _read_chunk(pids)
            return results, cpu, 0
        # Readers pull the next pid as they free up: walk costs differ several-fold between
        # processes (a browser's page tables against a utility's), so a fixed split would leave
        # one reader idle while another still walks the big ones. The list starts at the root.
        queue = _PidQueue(pids)
        futures = [self._executor().submit(queue.drain) for _ in range(self.workers - 1)]
        results, own_cpu = queue.drain()
        pool_cpu = 0
        for future in futures:
            more, cpu = future.result()
            results.extend(more)
            pool_cpu += cpu
        return results, own_cpu + pool_cpu, pool_cpu

    def _unchanged(
        self, listed: list[int], now_ns: int
    ) -> tuple[dict[int, tuple[Outcome, int]], dict[int, Signature], set[int]]:
        """(outcomes known without a walk, signatures read, members reused) for ``listed``."""
        known: dict[int, tuple[Outcome, int]] = {}
        signatures: dict[int, Signature] = {}
        members = frozenset(listed)
        outside = _host_pids() - members if self.reuse_requires_quiet_host else frozenset()
        # A process starting or exiting anywhere on the host changes how shared file pages
        # (libraries, a browser binary) are split, which no member's own signals show.
        same_members = self._members == members and self._outside == outside
        self._outside = outside
        reused: set[int] = set()
        for pid in listed:
            try:
                st = procfs.read_stat(pid)
            except (procfs.ProcessGone, PermissionError):
                continue  # the walk finds out what happened and reports it
            if st.state in ("Z", "X"):  # stat already says: no address space, no walk needed
                known[pid] = (Outcome.ZOMBIE, 0)
                continue
            sig = (st.starttime_ticks, st.minflt, st.majflt, st.vsize_bytes, st.rss_pages)
            signatures[pid] = sig
            memo = self._memo.get(pid)
            if (
                same_members
                and memo is not None
                and memo.signature == sig
                and now_ns - memo.walked_ns < self.reuse_max_age_ns
            ):
                known[pid] = (Outcome.OK, memo.value)
                reused.add(pid)
        return known, signatures, reused

    def scan(
        self,
        pids: Sequence[int] | Callable[[], Sequence[int]],
        *,
        reuse: bool | None = None,
    ) -> PssScan:
        """Scan a pid list, or a lister that is called again after a member vanished.

        ``reuse`` overrides ``reuse_unchanged`` for this scan; ``reuse=False`` walks every member.
        """
        started = time.monotonic_ns()
        use_memo = self.reuse_unchanged if reuse is None else reuse
        lister: Callable[[], Sequence[int]] | None = pids if callable(pids) else None
        listed = list(pids()) if callable(pids) else list(pids)
        outcomes: dict[int, tuple[Outcome, int]] = {}
        signatures: dict[int, Signature] = {}
        reused: set[int] = set()
        cpu = pool_cpu = walked = 0
        if use_memo:
            cpu_start = time.thread_time_ns()
            outcomes, signatures, reused = self._unchanged(listed, started)
            cpu += time.thread_time_ns() - cpu_start
        shared: dict[int, int] = {}
        retried, attempt = False, 0
        while True:
            todo = [p for p in listed if p not in outcomes or outcomes[p][0] in _TRANSIENT]
            results, more_cpu, more_pool = self._read_all(todo)
            cpu, pool_cpu, walked = cpu + more_cpu, pool_cpu + more_pool, walked + len(todo)
            outcomes.update((pid, (outcome, value)) for pid, outcome, value, _ in results)
            shared.update((pid, share) for pid, _, _, share in results)
            if reused and self._sharing_moved(results):
                # A walked member now shares different pages, which moves the PSS of members
                # it shares with although their own signals did not: walk those too.
                outcomes = {p: v for p, v in outcomes.items() if p not in reused}
                reused = set()
                continue
            gone = [p for p in listed if outcomes[p][0] is Outcome.GONE]
            exiting = [p for p in listed if outcomes[p][0] is Outcome.UNCONFIRMED]
            if not (gone or exiting) or attempt == self.max_retries:
                break
            retried, attempt = True, attempt + 1
            if exiting:  # give an exiting member (mm released, not yet a zombie) time to finish
                time.sleep(_EXIT_SETTLE_S)
            if reused:  # a member left: sharing changed, so reused values are walked again
                outcomes = {p: v for p, v in outcomes.items() if p not in reused}
                reused = set()
            # Re-list: the vanished member drops out, a newly forked one is read next round.
            listed = list(lister()) if lister else [p for p in listed if p not in gone]
        if use_memo:
            self._remember(listed, outcomes, signatures, shared, started, reused)
        scan = _summarise(listed, outcomes, retried, cpu, pool_cpu, time.monotonic_ns() - started)
        return dataclasses.replace(scan, walked_count=walked, reused_count=len(reused))

    def _sharing_moved(self, results: list[Result]) -> bool:
        """Did the walked members' shared pages move enough to matter for the reused ones?

        When a member maps (or copy-on-write breaks) a page k others hold, their PSS moves by
        page/(k+1) <= page/2 in all; so half the walked members' change of shared bytes estimates
        the error of keeping the others' values. A reused value stays stale until it is walked,
        so the estimate accumulates over scans; at the tolerance, the reused members are walked
        too and it starts again from 0.
        """
        moved = 0
        for pid, outcome, _, share in results:
            memo = self._memo.get(pid)
            if outcome is not Outcome.OK or memo is None:
                return True  # an exit or an unknown member: sharing may have changed anyhow
            moved += abs(memo.shared_bytes - share)
        self._carried_error_bytes += moved // 2
        return self._carried_error_bytes >= self.reuse_shared_tolerance_bytes

    def _remember(
        self,
        listed: list[int],
        outcomes: dict[int, tuple[Outcome, int]],
        signatures: dict[int, Signature],
        shared: dict[int, int],
        started: int,
        reused: set[int],
    ) -> None:
        memo: dict[int, _Memo] = {}
        if not reused:  # every member was walked in this scan: nothing stale is carried
            self._carried_error_bytes = 0
        for pid in listed:
            outcome, value = outcomes.get(pid, (Outcome.GONE, 0))
            if outcome is not Outcome.OK or pid not in signatures:
                continue
            if pid in reused:
                memo[pid] = self._memo[pid]  # keeps the age of the walk it came from
            elif pid in shared:
                memo[pid] = _Memo(signatures[pid], value, shared[pid], started)
        self._memo = memo
        self._members = frozenset(listed)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
            self._pool_clocks = []

    def __enter__(self) -> PssScanner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _summarise(
    listed: list[int],
    outcomes: dict[int, tuple[Outcome, int]],
    retried: bool,
    cpu: int,
    pool_cpu: int,
    wall: int,
) -> PssScan:
    members = {p: outcomes[p] for p in listed if p in outcomes}
    bad = tuple(p for p, (o, _) in members.items() if o in (Outcome.DENIED, Outcome.UNCONFIRMED))
    still_gone = [p for p, (o, _) in members.items() if o is Outcome.GONE]
    reason = None
    if any(members[p][0] is Outcome.DENIED for p in bad):
        reason = Reason.PERMISSION_DENIED
    elif bad or still_gone:
        reason = Reason.ACCOUNTING_UNAVAILABLE
    counted = {p: v for p, (o, v) in members.items() if o in (Outcome.OK, Outcome.ZOMBIE)}
    zombies = sum(1 for o, _ in members.values() if o is Outcome.ZOMBIE)
    if not members:  # nothing to scan is not a measured 0: the subject was not seen
        reason = Reason.ACCOUNTING_UNAVAILABLE
    total = None if reason else sum(counted.values())
    return PssScan(
        total_bytes=total,
        process_count=len(counted),
        zombie_count=zombies,
        retried=retried,
        unreadable_pids=bad + tuple(still_gone),
        unavailable_reason=reason,
        reader_cpu_ns=cpu,
        pool_cpu_ns=pool_cpu,
        wall_ns=wall,
        per_pid_bytes=counted,
    )


def scan_pss(
    pids: Sequence[int] | Callable[[], Sequence[int]], workers: int | None = None
) -> PssScan:
    """One-off scan (the sampler keeps a ``PssScanner`` instead, to reuse its threads)."""
    with PssScanner(workers=workers) as scanner:
        return scanner.scan(pids)
