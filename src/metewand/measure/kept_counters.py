"""The cheap counters of a cgroup subject, read through file descriptors kept open.

``phases.counters_of`` opens, reads and closes each cgroup file per mark: ~13 µs a file from
Python. A kept descriptor re-read with ``pread`` at offset 0 costs ~1-1.5 µs (cgroup files are
generated afresh at offset 0 on every read), so a mark of cpu.stat + memory + cgroup.procs drops
from ~50 to ~10 µs; that matters where marks are many and attempts short (a browser step).

``KeptCounters(accounting)`` gives the same ``phases.Counters`` as ``counters_of`` for the cgroup
backends (same forms: a refused read is unavailable ``permission_denied``, any other failure
``accounting_unavailable``); the /proc backend has no files to keep, so it reads through
``counters_of``. ``close()`` releases the descriptors (before the group is removed).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable

from metewand.measure.accounting import CgroupAccounting, CpuReading, TreeAccounting
from metewand.measure.forms import Measurement, Reason, complete, unavailable
from metewand.measure.phases import Counters, counters_of

CHUNK = 65536  # cgroup.procs of a large tree can be longer than one page


class _Kept:
    """One cgroup file, opened once; ``text()`` re-reads it from the start."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def text(self) -> str:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDONLY)
        parts = [os.pread(self.fd, CHUNK, 0)]
        while len(parts[-1]) == CHUNK:
            parts.append(os.pread(self.fd, CHUNK, CHUNK * len(parts)))
        return b"".join(parts).decode("ascii")

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


def _failed(exc: OSError, source: str | None) -> Measurement:
    reason = Reason.PERMISSION_DENIED if isinstance(exc, PermissionError) else None
    return unavailable(reason or Reason.ACCOUNTING_UNAVAILABLE, source)


class KeptCounters:
    """A ``phases`` reader of ``accounting``'s cheap counters over kept descriptors."""

    def __init__(self, accounting: TreeAccounting) -> None:
        self._fallback: Callable[[], Counters] | None = None
        self._files: list[_Kept] = []
        if not isinstance(accounting, CgroupAccounting):
            self._fallback = counters_of(accounting)
            return
        cpu = accounting.cpu_group
        self._cpu_source = f"cgroup{cpu.version}:{'cpu.stat' if cpu.version == 2 else 'cpuacct'}"
        names = ("cpu.stat",) if cpu.version == 2 else CPUACCT_FILES
        self._cpu = [self._keep(cpu.path, name) for name in names]
        self._procs = self._keep(cpu.path, "cgroup.procs")
        memory = accounting.memory_group
        self._memory: _Kept | None = None
        self._memory_missing = unavailable(
            Reason.UNSUPPORTED, f"{accounting.backend}:no-memory-controller"
        )
        if memory is not None:
            name = "memory.current" if memory.version == 2 else "memory.usage_in_bytes"
            self._memory = self._keep(memory.path, name)
            self._memory_source = f"cgroup{memory.version}:memory"

    def _keep(self, directory: str, name: str) -> _Kept:
        kept = _Kept(os.path.join(directory, name))
        self._files.append(kept)
        return kept

    def __call__(self) -> Counters:
        if self._fallback is not None:
            return self._fallback()
        return Counters(time.monotonic_ns(), self._cpu_reading(), self._memory_current(),
                        self._process_count())  # fmt: skip

    def _cpu_reading(self) -> CpuReading:
        try:
            if len(self._cpu) == 1:  # cgroup2 cpu.stat, in microseconds
                values = dict(line.split() for line in self._cpu[0].text().splitlines() if line)
                ns = [int(values[k]) * 1000 for k in ("usage_usec", "user_usec", "system_usec")]
            else:  # cgroup1 cpuacct.usage, .usage_user, .usage_sys, in nanoseconds
                ns = [int(kept.text().strip()) for kept in self._cpu]
        except (OSError, KeyError, ValueError) as exc:
            error = exc if isinstance(exc, OSError) else OSError(str(exc))
            gone = _failed(error, self._cpu_source)
            return CpuReading(gone, gone, gone)
        return CpuReading(*(complete(v, self._cpu_source) for v in ns))

    def _memory_current(self) -> Measurement:
        if self._memory is None:
            return self._memory_missing
        try:
            return complete(int(self._memory.text().strip()), self._memory_source)
        except OSError as exc:
            return _failed(exc, self._memory_source)
        except ValueError:
            return unavailable(Reason.ACCOUNTING_UNAVAILABLE, self._memory_source)

    def _process_count(self) -> Measurement:
        try:
            return complete(len(self._procs.text().split()))
        except OSError as exc:
            return _failed(exc, None)

    def close(self) -> None:
        for kept in self._files:
            kept.close()


CPUACCT_FILES = ("cpuacct.usage", "cpuacct.usage_user", "cpuacct.usage_sys")
