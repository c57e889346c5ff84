"""A sampler beside a running subject: cheap counters every tick, PSS when something moved.

By default (``pss_policy="changes"``) a tick takes a PSS scan only when the member set changed,
the tree's memory rose by ``pss_rise_bytes``, or ``pss_max_interval_ms`` passed (see
``scan_trigger``). ``pss_reuse=True`` (off by default) lets the scanner walk only members whose
stat signals moved: on a host where other browsers run, its error against a full scan reached
MiBs (benchmarks/pss_scan.py), which is not negligible, so it is opt-in.
``pss_policy="fixed"`` with ``pss_reuse=False`` is the former behaviour (a full scan every
``pss_every`` ticks). The baseline and end scans always walk every member.

Its own trouble never reaches the subject: an exception inside the sampler ends sampling,
writes ``sampler_fault`` and leaves what was gathered so far, marked for what it is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from metewand.measure.accounting import CpuReading, MemoryReading, TreeAccounting
from metewand.measure.forms import Measurement, QualityFlag, Reason, complete, partial, unavailable
from metewand.measure.scan_trigger import ScanTrigger

if TYPE_CHECKING:  # loaded only by a sampler that scans (measure's repeated runs do not)
    from metewand.measure.pss import PssScan, PssScanner

# a measurement is immutable: these two are shared, not made anew for every summary
MISSING_NOT_STARTED = unavailable(Reason.NOT_STARTED, "sampler")
MISSING_BY_FAULT = unavailable(Reason.SAMPLER_FAULT, "sampler")
FaultHook = Callable[[int], None]  # called with the tick index; raising simulates a sampler fault


class SamplerSummary(NamedTuple):  # not a dataclass: see measure.accounting
    pss_baseline: Measurement
    pss_peak: Measurement
    pss_end: Measurement
    process_count_baseline: Measurement
    process_count_peak: Measurement
    process_count_end: Measurement
    cgroup_memory_current: Measurement
    cgroup_memory_peak: Measurement
    cpu: CpuReading | None
    tick_count: int
    pss_sample_count: int
    sampler_cpu_ns: int
    interval_ms: int
    pss_every: int
    quality_flags: list[QualityFlag]
    fault: str | None
    samples: list[dict[str, Any]] = []  # noqa: RUF012 - always given (Sampler.summary)
    pss_policy: str = "fixed"
    pss_triggers: dict[str, int] = {}  # noqa: RUF012 - scans taken, by trigger; always given
    pss_walked_processes: int = 0  # smaps_rollup page walks over all scans
    pss_reused_processes: int = 0  # member reads answered from unchanged signals instead

    def to_json(self) -> dict[str, Any]:
        forms = {
            "pss_baseline_bytes": self.pss_baseline,
            "pss_peak_bytes": self.pss_peak,
            "pss_end_bytes": self.pss_end,
            "process_count_baseline": self.process_count_baseline,
            "process_count_peak": self.process_count_peak,
            "process_count_end": self.process_count_end,
            "cgroup_memory_current_bytes": self.cgroup_memory_current,
            "cgroup_memory_peak_bytes": self.cgroup_memory_peak,
        }
        out: dict[str, Any] = {k: v.to_json_with_source() for k, v in forms.items()}
        out.update(
            tick_count=self.tick_count,
            pss_sample_count=self.pss_sample_count,
            sampler_cpu_ns=self.sampler_cpu_ns,
            interval_ms=self.interval_ms,
            pss_every=self.pss_every,
            quality_flags=[f.value for f in self.quality_flags],
            fault=self.fault,
            pss_policy=self.pss_policy,
            pss_triggers=dict(self.pss_triggers),
            pss_walked_processes=self.pss_walked_processes,
            pss_reused_processes=self.pss_reused_processes,
        )
        return out


class Sampler:
    def __init__(
        self,
        accounting: TreeAccounting,
        interval_ms: int = 100,
        pss_every: int = 10,
        scanner: PssScanner | None = None,
        fault_hook: FaultHook | None = None,
        *,
        pss_policy: str = "changes",
        pss_reuse: bool = False,
        pss_rise_bytes: int = 4 << 20,
        pss_max_interval_ms: int | None = None,
        pss: bool = True,
    ) -> None:
        """``pss_every``: under ``changes``, the longest gap between PSS scans in ticks (unless
        ``pss_max_interval_ms`` is given); under ``fixed``, the exact gap. ``pss_rise_bytes``: the
        rise of the tree's memory counter since the last scan that triggers a scan. ``pss``:
        False takes no PSS scan at all (counters only; the PSS figures are then unavailable
        and no PSS quality flag is raised): ``measure``'s repeated runs record no PSS."""
        if interval_ms <= 0 or pss_every <= 0:
            raise ValueError("interval_ms and pss_every must be positive")
        self.accounting = accounting
        self.interval_ms = interval_ms
        self.pss_every = pss_every
        self.pss_reuse = pss_reuse
        self.pss = pss
        max_interval_ms = pss_max_interval_ms or pss_every * interval_ms
        self.trigger = ScanTrigger(
            pss_policy, pss_every, max_interval_ms * 1_000_000, pss_rise_bytes
        )
        self._own_scanner = scanner is None and pss
        if scanner is None and pss:
            from metewand.measure.pss import PssScanner

            scanner = PssScanner()
        self.scanner = scanner  # None only without PSS
        self.fault_hook = fault_hook
        self.samples: list[dict[str, Any]] = []
        self._pss: list[PssScan] = []
        self._counts: list[int] = []
        self._last_cpu: CpuReading | None = None
        self._last_memory: MemoryReading | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0
        self._ticks = 0
        self._cpu_ns = 0  # sampler-thread CPU + caller-side work + reader-pool threads
        self._pool_cpu_start = 0
        self.fault: str | None = None

    # -- recording --------------------------------------------------------------------------
    def _record(self, kind: str, pss: str | bool) -> None:
        """One sample. ``pss``: a trigger name (scan now), True (ask the trigger), False (none)."""
        cpu = self.accounting.cpu()
        memory = self.accounting.memory()
        pids = self.accounting.pids()
        now = time.monotonic_ns()
        sample: dict[str, Any] = {
            "kind": kind,
            "t_ns": now - self._t0,
            "cpu_time_ns": cpu.total.to_json(),
            "memory_current_bytes": memory.current.to_json(),
            "process_count": len(pids),
        }
        members, level = frozenset(pids), memory.current.value
        trigger = self.trigger.due(self._ticks, now, members, level) if pss is True else pss
        if not self.pss:
            trigger = None
        scan = None
        if trigger:
            # The end scan walks every member: the end value is exact, not carried over.
            scan = self._scan(pids, reuse=self.pss_reuse and kind != "end")
            self.trigger.scanned(trigger, now, members, level)
            sample["pss_bytes"] = scan.measurement().to_json()
            sample["pss_process_count"] = scan.process_count
            sample["pss_trigger"] = trigger
            sample["pss_reused"] = scan.reused_count
        with self._lock:
            self._last_cpu, self._last_memory = cpu, memory
            self._counts.append(len(pids))
            if scan is not None:
                self._pss.append(scan)
            self.samples.append(sample)

    def _scan(self, first: list[int], reuse: bool) -> PssScan:
        listings = [first]  # the listing just read; a retry after an exit lists afresh

        def lister() -> list[int]:
            return listings.pop() if listings else self.accounting.pids()

        assert self.scanner is not None  # a scan is due only with PSS on
        return self.scanner.scan(lister, reuse=reuse)

    def _guarded(self, action: Callable[[], None]) -> None:
        if self.fault is not None:
            return
        try:
            action()
        except Exception as exc:  # the observer must never take the subject down
            self.fault = f"{type(exc).__name__}: {exc}"

    def _caller_side(self, kind: str, pss: str | bool) -> None:
        start = time.thread_time_ns()
        self._guarded(lambda: self._record(kind, pss))
        with self._lock:
            self._cpu_ns += time.thread_time_ns() - start

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, ticking: bool = True) -> None:
        """Take the baseline scan now, then sample in a background thread. Without
        ``ticking`` the thread is left to ``start_ticking``: a subject that exits before the
        first tick is due (``true`` takes 0.4 ms) needs no thread, whose start costs ~0.1-0.5 ms
        a run."""
        self._t0 = time.monotonic_ns()
        self._pool_cpu_start = self._pool_cpu()
        self._caller_side("baseline", pss="baseline")
        if ticking:
            self.start_ticking()

    def start_ticking(self) -> None:
        """Start the ticks (once); the first is due ``interval_ms`` after ``start`` however
        late this is called."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="metewand-sampler", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        start = time.thread_time_ns()
        interval = self.interval_ms / 1000
        first = max(0.0, (self._t0 - time.monotonic_ns()) / 1e9 + interval)
        if self._stopping.wait(first) or self.fault is not None:
            with self._lock:
                self._cpu_ns += time.thread_time_ns() - start
            return
        self._ticks += 1
        self._guarded(self._one_tick)
        while not self._stopping.wait(interval) and self.fault is None:
            self._ticks += 1
            self._guarded(self._one_tick)
        with self._lock:
            self._cpu_ns += time.thread_time_ns() - start

    def _one_tick(self) -> None:
        if self.fault_hook is not None:
            self.fault_hook(self._ticks)
        self._record("tick", pss=True)

    def stop(self, end_scan: bool = True) -> SamplerSummary:
        """Stop sampling. ``end_scan`` takes a final PSS scan now (while the tree still lives);
        without it, the end is the last scan taken during sampling."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        if not self._t0:  # never started: nothing was sampled, nothing to stop
            self._close_scanner()
            return self._summary()
        if end_scan:
            self._caller_side("end", pss="end")
        self._cpu_ns += self._pool_cpu() - self._pool_cpu_start
        self._close_scanner()
        return self._summary()

    def _pool_cpu(self) -> int:
        return self.scanner.pool_threads_cpu_ns() if self.scanner is not None else 0

    def _close_scanner(self) -> None:
        if self._own_scanner and self.scanner is not None:
            self.scanner.close()

    # -- summary ----------------------------------------------------------------------------
    def _summary(self) -> SamplerSummary:
        flags: list[QualityFlag] = []
        # A scan that found no members (the tree had already exited) says nothing about the
        # peak or the end; a scan that found members it could not read does.
        pss = [s.measurement() for s in self._pss if s.process_count or s.unreadable_pids]
        for scan in self._pss:
            if not (scan.process_count or scan.unreadable_pids):
                continue  # an empty scan (before launch, after exit) flags nothing
            flags.extend(f for f in scan.quality_flags if f not in flags)
        if len(pss) <= 2 and self.pss:
            flags.append(QualityFlag.BASELINE_END_ONLY)
        if self.fault is not None:
            flags.append(QualityFlag.SAMPLER_FAULT)
        if self._counts and max(self._counts) == 0:
            flags.append(QualityFlag.PEAK_MISSED_BY_SAMPLER)
        memory = self._last_memory
        gone = unavailable(Reason.NOT_STARTED, "sampler")
        return SamplerSummary(
            pss_baseline=pss[0] if pss else self._missing(),
            pss_peak=self._peak(pss),
            pss_end=pss[-1] if pss and self.fault is None else self._missing(),
            process_count_baseline=self._count_form(self._counts[:1]),
            process_count_peak=self._count_form(self._counts, peak=True),
            process_count_end=self._count_form(self._counts[-1:]),
            cgroup_memory_current=memory.current if memory else gone,
            cgroup_memory_peak=memory.peak if memory else gone,
            cpu=self._last_cpu,
            tick_count=self._ticks,
            pss_sample_count=len(pss),
            sampler_cpu_ns=self._cpu_ns,
            interval_ms=self.interval_ms,
            pss_every=self.pss_every,
            quality_flags=flags,
            fault=self.fault,
            samples=list(self.samples),
            pss_policy=self.trigger.policy,
            pss_triggers=dict(self.trigger.counts),
            pss_walked_processes=sum(s.walked_count for s in self._pss),
            pss_reused_processes=sum(s.reused_count for s in self._pss),
        )

    def _missing(self) -> Measurement:
        return MISSING_BY_FAULT if self.fault is not None else MISSING_NOT_STARTED

    def _peak(self, pss: list[Measurement]) -> Measurement:
        if not pss:
            return self._missing()
        bad = next((m for m in pss if m.value is None), None)
        if bad is not None:  # an unreadable scan might have held the peak
            return bad
        peak = max(m.value for m in pss if m.value is not None)
        if self.fault is not None:
            return partial(peak, Reason.INTERRUPTED, pss[0].source)
        return complete(peak, pss[0].source)

    def _count_form(self, counts: list[int], peak: bool = False) -> Measurement:
        if not counts:
            return self._missing()
        value = max(counts) if peak else counts[0]
        if peak and value == 0:  # the subject ran, so a peak of 0 means the sampler missed it
            return unavailable(Reason.ACCOUNTING_UNAVAILABLE, "sampler")
        if self.fault is not None and peak:
            return partial(value, Reason.INTERRUPTED, "sampler")
        return complete(value, f"{self.accounting.backend}:members")
