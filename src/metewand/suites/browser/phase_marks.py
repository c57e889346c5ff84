"""Phase marks inside one browser attempt: where the engine's and the harness's CPU go.

Two ``measure.phases.PhaseClock``s per attempt (``metewand_browser_attempt_phases/1``, the row's
own ``phases`` field, beside the peer's row fields):

- ``engine``: the engine's accounting group (the worker x engine group the engine joined before
  exec). A mark reads only its cheap counters (cpu.stat or cpuacct, memory current, process
  count; ``measure.mark_probe``: descriptors kept open for the attempt, snapshots decoded when
  the row is built), never a PSS scan.
- ``harness``: this process (CDP client, driver, grader, fixture server; also the resource
  sampler's and host telemetry's threads when they run), read with ``getrusage``. It is the
  harness's own scope: at ``--jobs`` > 1 the process serves several attempts at once
  (``concurrent``). A driver path's adapter is a process of its own whose CPU over the whole
  adapter run is the row's ``driver_resources``; the harness sees its ops only through the marks
  it writes (``op_marks``).

``granularity`` says what the marks could see: ``steps`` (raw CDP: connect, page creation, scene
navigation, each step, grade, page close), ``probe`` (the probe's CDP work as one phase, then the
server-side grade), ``driver_ops`` (a driver path whose adapter marked its ops through
``op_marks``: the adapter's start up to its first mark as ``adapter_run``, then
``driver_connect``, ``op<i>:<op>`` per op, ``driver_close``, then the grade; ``driver_marks``
counts the lines received and refused, and says who read the counters: ``read_by: adapter``
where the adapter read the engine's group itself at each op, and then the harness's clock keeps
the adapter's run as one phase, its own CPU not being readable from there) or ``adapter_run``
(a driver path whose adapter marked
nothing: its whole run as one phase, then the grade).
The Sampler's own ``mark`` is not used: marks must work without a sampler (resource profile off
or baseline), so they read the group directly.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from metewand.measure.accounting import CpuReading, TreeAccounting
from metewand.measure.forms import Measurement, Reason, Status, complete
from metewand.measure.mark_probe import CgroupProbe, KeptProbes
from metewand.measure.phases import Counters, PhaseClock
from metewand.suites.browser.op_marks import MarkSink

SCHEMA: Final = "metewand_browser_attempt_phases/1"
SOURCE: Final = "browser_attempt"
ROLES: Final = ("engine", "harness")
HARNESS: Final = "harness"  # the harness clock's role, and its kept probe's key
HARNESS_PARTS: Final = ("cdp_client", "driver", "grader", "fixture_server", "observer_threads")
_PAGE_BYTES: Final = os.sysconf("SC_PAGE_SIZE")
_ONE_PROCESS: Final = complete(1)  # the harness is one process
SWITCH_INTERVAL_S: Final = 0.0001

Mark = Callable[[str | None], None]


def no_mark(_name: str | None) -> None:
    """The marker of an attempt without phase marks."""


class _FastSwitching:
    """While any mark reads (each slot marks on its own loop thread, several at ``--jobs`` > 1),
    the interpreter's switch interval is short; the first to enter saves it, the last to leave
    restores it (two threads saving and restoring on their own could leave it short for good)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved = 0.0

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(self._saved, SWITCH_INTERVAL_S))
            self._depth += 1

    def __exit__(self, *_exc: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                sys.setswitchinterval(self._saved)


fast_switching = _FastSwitching()


def step_phase(index: int, step: Mapping[str, Any]) -> str:
    """A step's phase name: ``step3:Runtime.evaluate``, ``step4:wait:Page.loadEventFired``,
    ``step5:sleep``. The part after the first colon is the step's kind across tasks."""
    if "method" in step:
        label = str(step["method"])
    elif "wait_for_event" in step:
        label = f"wait:{step['wait_for_event']}"
    elif "sleep_ms" in step:
        label = "sleep"
    else:
        label = "step"
    return f"step{index}:{label}"


class HarnessProbe:
    """This process's CPU (getrusage user/system) and resident memory (/proc/self/statm through
    a descriptor kept open: ~1 µs a pread instead of ~11 µs an open/read/close). ``snap()`` keeps
    the raw figures; ``decode()`` makes ``Counters`` when the record is built."""

    peak_method = "unavailable: the harness process's high-water (ru_maxrss) cannot be restarted"

    def __init__(self) -> None:
        self._statm: int | None = None
        with contextlib.suppress(OSError):
            self._statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)

    def snap(self) -> tuple[int, float, float, bytes | None]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        statm = None
        if self._statm is not None:
            with contextlib.suppress(OSError):
                statm = os.pread(self._statm, 256, 0)
        return time.monotonic_ns(), usage.ru_utime, usage.ru_stime, statm

    def decode(self, raw: tuple[int, float, float, bytes | None]) -> Counters:
        now, utime, stime, statm = raw
        user, system = int(utime * 1e9), int(stime * 1e9)
        # ``complete``: no form checks for what is known valid (a record decodes ~25 of these)
        cpu = CpuReading(complete(user + system), complete(user), complete(system))
        try:
            assert statm is not None
            memory = complete(int(statm.split()[1]) * _PAGE_BYTES)
        except (AssertionError, ValueError, IndexError):
            memory = Measurement(Status.UNAVAILABLE, reason=Reason.ACCOUNTING_UNAVAILABLE)
        return Counters(now, cpu, memory, _ONE_PROCESS)

    def close(self) -> None:
        if self._statm is not None:
            with contextlib.suppress(OSError):
                os.close(self._statm)
            self._statm = None


class AttemptPhases:
    """One attempt's two clocks; ``mark`` is what the attempt's code calls at each boundary."""

    def __init__(
        self,
        engine_group: TreeAccounting | None,
        granularity: str,
        concurrent: bool,
        probes: KeptProbes | None = None,
    ) -> None:
        """``probes``: where the run keeps its probes open from one attempt to the next (closed
        with the run's groups); without it the attempt keeps its own, and ``to_json`` closes
        them."""
        self.granularity = granularity
        self.concurrent = concurrent
        self._clocks: dict[str, PhaseClock] = {}
        self._missing: dict[str, str] = {}
        self._records: dict[str, dict[str, Any]] = {}
        self._finished = False
        kept = probes if probes is not None else KeptProbes()
        self._own_probes = kept if probes is None else None  # closed with the attempt
        self.driver_marks: dict[str, Any] | None = None  # lines from the adapter (op_marks)
        self._engine_reads: EngineReads | None = None
        if engine_group is None:
            self._missing["engine"] = Reason.ACCOUNTING_UNAVAILABLE.value
        else:
            engine_probe = kept.probe(engine_group)
            self._clocks["engine"] = PhaseClock.of_probe(engine_probe, SOURCE)
            if isinstance(engine_probe, CgroupProbe):
                self._engine_reads = EngineReads(engine_probe, self._clocks["engine"])
        harness = kept.kept(HARNESS, HarnessProbe)
        self._clocks[HARNESS] = PhaseClock.of_probe(harness, SOURCE)

    def begin(self) -> None:
        for clock in self._clocks.values():
            clock.begin()

    def mark(self, name: str | None) -> None:
        """A boundary in both scopes: ``name`` begins that phase, None ends the current one."""
        if self._finished:
            return  # finished: a mark from a late callback changes nothing
        # each file read lets go of the GIL; another thread (host telemetry's /proc scan, the
        # fixture server's loop) may then hold it for the default 5 ms switch interval before
        # the mark can go on: ask for it back sooner while the mark reads
        with fast_switching:
            for clock in self._clocks.values():
                clock.mark(name)

    def sink(self) -> MarkSink:
        """Where a driver path's adapter marks go (``op_marks``): read by the adapter itself
        where the engine's group allows it."""
        return MarkSink(self.mark, self._engine_reads)

    def finish(self) -> None:
        """The end readings (snapshots only: decoding waits for ``to_json``, outside the
        attempt's timed wall)."""
        if self._finished:
            return
        self._finished = True
        for clock in self._clocks.values():
            clock.finish()

    def close(self) -> None:
        """Release the attempt's own probes' descriptors (``to_json`` does, once it has
        decoded); the run's kept probes stay open."""
        if self._own_probes is not None:
            self._own_probes.close()

    def to_json(self) -> dict[str, Any]:
        if self._finished and not self._records:
            for role, clock in self._clocks.items():
                self._records[role] = clock.record()
            self.close()
        out: dict[str, Any] = {"schema": SCHEMA, "granularity": self.granularity}
        for role in ROLES:
            if role in self._records:
                out[role] = self._records[role]
            else:
                out[role] = {
                    "status": "unavailable",
                    "reason": self._missing.get(role, Reason.NOT_STARTED.value),
                }
        out["harness_parts"] = list(HARNESS_PARTS)
        out["concurrent"] = self.concurrent
        if self.driver_marks is not None:
            out["driver_marks"] = dict(self.driver_marks)
        return out

    def took_driver_marks(self, counts: dict[str, Any]) -> None:
        """The adapter's channel was listened to: ``driver_ops`` once it marked any op."""
        self.driver_marks = counts
        if counts.get("received", 0) > 0:
            self.granularity = "driver_ops"


class EngineReads:
    """The engine clock's marks as a driver path's adapter reads them (``op_marks``, ``read_by:
    adapter``): the probe's files, read in the adapter at its op boundary. The harness clock
    gets no mark from these lines: its counters are this process's own."""

    def __init__(self, probe: CgroupProbe, clock: PhaseClock) -> None:
        self._probe = probe
        self._clock = clock

    @property
    def plan(self) -> list[dict[str, Any]]:  # made only for an attempt that offers it
        return self._probe.reads_plan()

    def take(self, name: str | None, monotonic_ns: int, fields: list[bytes | OSError]) -> None:
        self._clock.mark_snapshot(name, self._probe.snapshot_of(monotonic_ns, fields))


def begin_marks(phases: AttemptPhases | None) -> Mark:
    """An attempt's phase marks begun, and how to mark its next phase (nothing without them)."""
    if phases is None:
        return no_mark
    phases.begin()
    return phases.mark
