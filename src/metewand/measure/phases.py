"""Phases inside one measured subject: wall, CPU and memory between marks (``metewand_phases/1``).

A *mark* is a moment at which the subject's cheap counters are read: CPU usage/user/system of
its accounting group (``cpu.stat`` or ``cpuacct``), the group's current memory and its process
count. No PSS scan happens at a mark, so a mark costs a few file reads (see
``benchmarks/measure_marks.py``). A mark with a name begins the phase of that name (and ends the
one before); a mark without a name (``None``) ends the current phase without starting another.
Stretches no phase covers — before the first mark, after an unnamed one — are "between marks".

Nothing here knows about suites or the CLI: a caller gives a ``read`` function (usually
``counters_of(accounting)``), calls ``begin()``, ``mark(name)`` from any thread, and ``finish()``,
then ``record()`` gives the JSON record. Each figure carries its form: ``complete`` on the cgroup
backends, ``partial`` (``process_only``) from the /proc fallback, ``unavailable`` with a reason
when a counter could not be read. Memory rise is signed (a phase may free memory).

A clock made with ``PhaseClock.of_probe(probe, source)`` (``measure.mark_probe.probe_of``) takes
its marks cheaply: descriptors kept open, raw bytes read, decoded only when the record is built;
it also gives each phase's memory high-water where the kernel can restart it at a mark
(``memory_peak_bytes``; how, or why not, in the record's ``memory_peak_method``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from metewand.measure.accounting import CpuReading, TreeAccounting
from metewand.measure.forms import Measurement, Reason, Status, unavailable

PHASES_SCHEMA = "metewand_phases/1"
# Phases' CPU "adds up" when the CPU between marks is at most this share of the total.
ADDS_UP_FRACTION = 0.01
MAX_NAME_CHARS = 200
# counters_of reads no high-water: a phase's memory peak needs a probe that restarts it at marks
NO_WINDOW_PEAK = unavailable(Reason.UNSUPPORTED)
PLAIN_READER_PEAK_METHOD = "unavailable: the counters reader does not restart the high-water"


class Counters(NamedTuple):
    """One reading of the cheap counters of a subject's group (a NamedTuple: a record decodes
    ~25 of these, and a frozen dataclass's ``__init__`` costs ~3x a tuple's)."""

    monotonic_ns: int
    cpu: CpuReading
    memory_current: Measurement
    process_count: Measurement
    # the memory high-water since the previous reading, where the kernel could restart it
    memory_peak: Measurement = NO_WINDOW_PEAK


def counters_of(accounting: TreeAccounting) -> Callable[[], Counters]:
    """The reader of ``accounting``'s cheap counters (no PSS)."""

    def read() -> Counters:
        cpu = accounting.cpu()
        memory = accounting.memory_current()
        try:
            pids = accounting.pids()
        except PermissionError:
            count = Measurement(Status.UNAVAILABLE, reason=Reason.PERMISSION_DENIED)
        except OSError:
            count = Measurement(Status.UNAVAILABLE, reason=Reason.ACCOUNTING_UNAVAILABLE)
        else:
            count = _counted(len(pids), accounting.backend)
        return Counters(time.monotonic_ns(), cpu, memory, count)

    return read


def _counted(count: int, backend: str) -> Measurement:
    if backend == "proc":  # a tree walk from the root: processes reparented away are missed
        return Measurement(Status.PARTIAL, count, Reason.PROCESS_ONLY)
    return Measurement(Status.COMPLETE, count)


@dataclass(frozen=True, slots=True)
class _Mark:
    name: str | None
    counters: Counters


def _same(raw: Any) -> Any:
    return raw


class PhaseClock:
    """Collects marks (thread-safe) between ``begin()`` and ``finish()``.

    ``read`` gives decoded ``Counters`` at once; a clock made by ``of_probe`` keeps each mark's
    raw snapshot and decodes them all in ``record()``, so a mark costs only its reads.
    """

    def __init__(
        self, read: Callable[[], Counters], source: str, mark_limit: int | None = None
    ) -> None:
        self.read = read
        self.source = source  # how the marks arrived, e.g. "mark_fifo"
        # at most this many marks are kept (each holds a snapshot); later ones are only counted
        self.mark_limit = mark_limit
        self.dropped_marks = 0
        self._snap: Callable[[], Any] = read
        self._decode: Callable[[Any], Counters] = _same
        self.peak_method = PLAIN_READER_PEAK_METHOD
        self._lock = threading.Lock()
        self._start: Any = None  # raw snapshots until record()
        self._end: Any = None
        self._origin_ns: int | None = None
        self._end_ns: int | None = None
        self._marks: list[tuple[str | None, Any]] = []
        self.late_marks = 0  # marks that arrived after the subject had ended

    @classmethod
    def of_probe(cls, probe: Any, source: str, mark_limit: int | None = None) -> PhaseClock:
        """A clock on a ``measure.mark_probe`` probe: ``snap()`` at marks, ``decode()`` later."""
        clock = cls(lambda: probe.decode(probe.snap()), source, mark_limit)
        clock._snap, clock._decode = probe.snap, probe.decode
        clock.peak_method = probe.peak_method
        return clock

    def begin(self) -> None:
        self._start = self._snap()

    def mark(self, name: str | None) -> None:
        """A boundary now. After ``finish()`` (a mark read late) it lands at the end. Past
        ``mark_limit`` a mark is counted (``dropped_marks``), not read: the last kept phase then
        runs on to the end."""
        if self.mark_limit is not None and len(self._marks) >= self.mark_limit:
            with self._lock:
                self.dropped_marks += 1
            return
        raw = self._snap() if self._end is None else None
        if name is not None and len(name) > MAX_NAME_CHARS:
            name = name[:MAX_NAME_CHARS]
        with self._lock:
            if raw is None or self._end is not None:
                assert self._end is not None
                raw = self._end
                self.late_marks += 1
            self._marks.append((name, raw))

    def mark_snapshot(self, name: str | None, raw: Any) -> None:
        """A boundary another reader took (``mark_probe.CgroupProbe.snapshot_of``): its
        snapshot carries its own moment, so it is never late. Marks must come in time order."""
        if self.mark_limit is not None and len(self._marks) >= self.mark_limit:
            with self._lock:
                self.dropped_marks += 1
            return
        if name is not None and len(name) > MAX_NAME_CHARS:
            name = name[:MAX_NAME_CHARS]
        with self._lock:
            self._marks.append((name, raw))

    def finish(self, origin_ns: int | None = None, end_ns: int | None = None) -> None:
        """The end reading. ``origin_ns``/``end_ns``: the subject's own start and exit moments,
        when known more tightly than the begin and finish readings (wall of the first and last
        stretch)."""
        assert self._start is not None, "finish() before begin()"
        end = self._snap()
        with self._lock:
            self._origin_ns, self._end_ns = origin_ns, end_ns
            self._end = end

    def record(self) -> dict[str, Any]:
        """The ``metewand_phases/1`` record of the marks collected so far."""
        assert self._start is not None and self._end is not None, "record() before finish()"
        with self._lock:
            raw_marks = list(self._marks)
        decoded: dict[int, Counters] = {}

        def counters(raw: Any) -> Counters:  # a late mark shares the end's snapshot
            if id(raw) not in decoded:
                decoded[id(raw)] = self._decode(raw)
            return decoded[id(raw)]

        start, end = counters(self._start), counters(self._end)
        marks = [_Mark(name, counters(raw)) for name, raw in raw_marks]
        if self._origin_ns is not None:
            start = _at(start, self._origin_ns)
        if self._end_ns is not None:
            end = _at(end, self._end_ns)
            late = decoded[id(self._end)]
            marks = [_Mark(m.name, end) if m.counters is late else m for m in marks]
        record = build_record(start, marks, end, self.source, self.late_marks)
        record["memory_peak_method"] = self.peak_method
        if self.mark_limit is not None:
            record.update(mark_limit=self.mark_limit, dropped_marks=self.dropped_marks)
        return record


def _at(counters: Counters, monotonic_ns: int) -> Counters:
    return counters._replace(monotonic_ns=monotonic_ns)


def build_record(
    start: Counters, marks: list[_Mark], end: Counters, source: str, late_marks: int = 0
) -> dict[str, Any]:
    bounds = [_Mark(None, start), *marks, _Mark(None, end)]
    phases = []
    between = _Totals()
    for index, (left, right) in enumerate(zip(bounds, bounds[1:], strict=False)):
        right_counters = _not_before(right.counters, left.counters)
        span = _span(left.counters, right_counters, start.monotonic_ns)
        if left.name is None or index == 0:
            between.add(span)
            continue
        phases.append({"name": left.name, **span})
    total = _span(start, end, start.monotonic_ns)
    total["memory_peak_bytes"] = _highest([m.counters.memory_peak for m in bounds[1:]])
    return {
        "schema": PHASES_SCHEMA,
        "source": source,
        "mark_count": len(marks),
        "late_marks": late_marks,
        "phases": phases,
        "between_marks": between.to_json(),
        "total": total,
        "cpu_adds_up": _adds_up(phases, total),
        "adds_up_fraction": ADDS_UP_FRACTION,
    }


def _not_before(counters: Counters, floor: Counters) -> Counters:
    """A late mark read after the end reading still ends at or after its predecessor."""
    if counters.monotonic_ns >= floor.monotonic_ns:
        return counters
    return _at(counters, floor.monotonic_ns)


def _span(a: Counters, b: Counters, origin_ns: int) -> dict[str, Any]:
    # read once: with these and _COMPLETE an 11-mark record took 0.71x the old CPU, 0.76x without
    a_cpu, b_cpu = a.cpu, b.cpu
    return {
        "start_offset_ns": a.monotonic_ns - origin_ns,
        "wall_time_ns": {"status": "complete", "value": b.monotonic_ns - a.monotonic_ns},
        "cpu_time_ns": _difference(a_cpu.total, b_cpu.total),
        "cpu_user_time_ns": _difference(a_cpu.user, b_cpu.user),
        "cpu_system_time_ns": _difference(a_cpu.system, b_cpu.system),
        "memory_rise_bytes": _difference(a.memory_current, b.memory_current, signed=True),
        # the high-water of the span as read at its end (the reading restarted it at its start)
        "memory_peak_bytes": _form(b.memory_peak),
        "process_count_end": _form(b.process_count),
    }


def _form(m: Measurement) -> dict[str, Any]:
    """``m.to_json()``, the complete form without its enum look-ups (~25 per record)."""
    if m.status is _COMPLETE:
        return {"status": "complete", "value": m.value}
    return m.to_json()


_COMPLETE = Status.COMPLETE  # a module global: one look-up, not an enum attribute's two


def _difference(a: Measurement, b: Measurement, signed: bool = False) -> dict[str, Any]:
    """``b - a`` with its form: the weaker of the two readings' forms."""
    # the common case first, without the general rules below: a record holds ~100 of these
    # per clock, built between two attempts (issue 24: the harness's CPU per attempt)
    if a.status is _COMPLETE and b.status is _COMPLETE:
        value = b.value - a.value  # type: ignore[operator]  # complete forms carry a value
        if value >= 0 or signed:
            return {"status": "complete", "value": value}
    if a.value is None and a.reason is Reason.NOT_STARTED and b.value is not None:
        a = Measurement(b.status, 0, b.reason)  # read before the subject existed: nothing yet
    for m in (a, b):
        if m.value is None:
            return {"status": "unavailable", "reason": (m.reason or Reason.NOT_STARTED).value}
    assert a.value is not None and b.value is not None
    value = b.value - a.value
    if value < 0 and not signed:
        # a counter that went down: a /proc tree lost an exited member's CPU
        return {"status": "unavailable", "reason": Reason.ACCOUNTING_UNAVAILABLE.value}
    partial = a if a.status is Status.PARTIAL else b if b.status is Status.PARTIAL else None
    if partial is not None:
        assert partial.reason is not None
        return {"status": "partial", "value": value, "reason": partial.reason.value}
    return {"status": "complete", "value": value}


class _Totals:
    """The stretches between marks, summed (wall and CPU)."""

    def __init__(self) -> None:
        self.stretches = 0
        self.values: dict[str, dict[str, Any]] = {}

    def add(self, span: dict[str, Any]) -> None:
        self.stretches += 1
        for key in ("wall_time_ns", "cpu_time_ns", "cpu_user_time_ns", "cpu_system_time_ns"):
            mine, theirs = self.values.get(key), span[key]
            self.values[key] = theirs if mine is None else _sum(mine, theirs)

    def to_json(self) -> dict[str, Any]:
        return {"stretches": self.stretches, **self.values}


def _sum(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    for form in (a, b):
        if form["status"] == "unavailable":
            return form
    out = {"status": "complete", "value": a["value"] + b["value"]}
    weaker = a if a["status"] == "partial" else b
    if weaker["status"] == "partial":
        out.update(status="partial", reason=weaker["reason"])
    return out


def _highest(peaks: list[Measurement]) -> dict[str, Any]:
    """The whole span's high-water: the highest of its windows' (unavailable if any is)."""
    for peak in peaks:
        if peak.value is None:
            return peak.to_json()
    return Measurement(Status.COMPLETE, max(p.value or 0 for p in peaks)).to_json()


def _adds_up(phases: list[dict[str, Any]], total: dict[str, Any]) -> bool | None:
    """Whether the phases' CPU is the total's within ADDS_UP_FRACTION (None: not computable)."""
    cpu = total["cpu_time_ns"]
    values = [p["cpu_time_ns"].get("value") for p in phases]
    if cpu.get("value") is None or any(v is None for v in values):
        return None
    rest = cpu["value"] - sum(v for v in values if v is not None)
    return abs(rest) <= ADDS_UP_FRACTION * max(cpu["value"], 1)
