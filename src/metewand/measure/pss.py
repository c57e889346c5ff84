"""PSS of a process tree: sum of ``Pss:`` from /proc/PID/smaps_rollup, read in parallel.

Cost notes (why it is written this way): the kernel builds the whole rollup (a page-table walk)
on the first read, whatever the buffer size, so the Python side should add as little as possible:
one ``os.open``/``os.read`` of a small buffer per process, no text decoding, only the ``Pss:`` line
parsed. The walk releases the GIL, so a few threads overlap the walks of different processes; the
calling thread reads one share itself instead of waiting idle.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum

from metewand.measure import procfs
from metewand.measure.forms import Measurement, QualityFlag, Reason, complete, unavailable

SOURCE = "proc:smaps_rollup"
_READ_SIZE = 512  # the Pss line is the third line of the rollup


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


def _parse_pss_bytes(data: bytes) -> int | None:
    at = data.find(b"\nPss:")
    if at < 0:
        return None
    return int(data[at + 5 : data.index(b"kB", at)]) * 1024


def _confirm_exit(pid: int) -> Outcome:
    """After a failed read: a zombie (still listed, no address space) or gone."""
    try:
        state = procfs.read_stat(pid).state
    except procfs.ProcessGone:
        return Outcome.GONE
    except PermissionError:
        return Outcome.DENIED
    return Outcome.ZOMBIE if state in ("Z", "X") else Outcome.UNCONFIRMED


def read_pss(pid: int) -> tuple[Outcome, int]:
    """(outcome, PSS bytes) of one process; bytes are 0 unless the outcome is OK."""
    try:
        fd = os.open(b"/proc/%d/smaps_rollup" % pid, os.O_RDONLY | os.O_CLOEXEC)
    except PermissionError:
        return Outcome.DENIED, 0
    except (FileNotFoundError, ProcessLookupError):
        return _confirm_exit(pid), 0
    try:
        data = os.read(fd, _READ_SIZE)
    except PermissionError:
        return Outcome.DENIED, 0
    except (ProcessLookupError, FileNotFoundError):
        return _confirm_exit(pid), 0
    finally:
        os.close(fd)
    value = _parse_pss_bytes(data)
    if value is None:  # empty rollup: no address space (zombie or exiting)
        return _confirm_exit(pid), 0
    return Outcome.OK, value


def _read_chunk(pids: Sequence[int]) -> tuple[list[tuple[int, Outcome, int]], int]:
    start = time.thread_time_ns()
    results = [(pid, *read_pss(pid)) for pid in pids]
    return results, time.thread_time_ns() - start


class PssScanner:
    """Holds the reader threads across scans (starting threads per scan would cost more)."""

    def __init__(self, workers: int | None = None, parallel_min: int = 4, max_retries: int = 3):
        self.workers = max(1, workers if workers is not None else min(4, os.cpu_count() or 1))
        self.parallel_min = parallel_min
        self.max_retries = max_retries
        self._pool: ThreadPoolExecutor | None = None

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers - 1, thread_name_prefix="metewand-pss")
        return self._pool

    def _read_all(self, pids: Sequence[int]) -> tuple[list[tuple[int, Outcome, int]], int, int]:
        """(results, reader_cpu_ns, pool_cpu_ns) for ``pids``."""
        if self.workers == 1 or len(pids) < self.parallel_min:
            results, cpu = _read_chunk(pids)
            return results, cpu, 0
        shares = [pids[i :: self.workers] for i in range(self.workers)]
        futures = [self._executor().submit(_read_chunk, share) for share in shares[1:]]
        results, own_cpu = _read_chunk(shares[0])
        pool_cpu = 0
        for future in futures:
            more, cpu = future.result()
            results.extend(more)
            pool_cpu += cpu
        return results, own_cpu + pool_cpu, pool_cpu

    def scan(self, pids: Sequence[int] | Callable[[], Sequence[int]]) -> PssScan:
        """Scan a pid list, or a lister that is called again after a member vanished."""
        started = time.monotonic_ns()
        lister: Callable[[], Sequence[int]] | None = pids if callable(pids) else None
        listed = list(pids()) if callable(pids) else list(pids)
        outcomes: dict[int, tuple[Outcome, int]] = {}
        cpu = pool_cpu = 0
        retried = False
        for attempt in range(self.max_retries + 1):
            todo = [p for p in listed if p not in outcomes or outcomes[p][0] is Outcome.GONE]
            results, more_cpu, more_pool = self._read_all(todo)
            cpu, pool_cpu = cpu + more_cpu, pool_cpu + more_pool
            outcomes.update((pid, (outcome, value)) for pid, outcome, value in results)
            gone = [p for p in listed if outcomes[p][0] is Outcome.GONE]
            if not gone or attempt == self.max_retries:
                break
            retried = True
            # Re-list: the vanished member drops out, a newly forked one is read next round.
            listed = list(lister()) if lister else [p for p in listed if p not in gone]
        return _summarise(listed, outcomes, retried, cpu, pool_cpu, time.monotonic_ns() - started)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

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
