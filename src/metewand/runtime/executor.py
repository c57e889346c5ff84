"""Executors: what runs a suite's units (see ``runtime.suite``) and hands their rows back.

The interface is one method, so a distributed executor (Dask, #14 step 2) is a drop-in::

    class Executor(Protocol):
        def run(self, suite: Suite, units: Sequence[Unit], sink: UnitEvents) -> None: ...

``run`` returns once every unit ran; ``sink`` hears each attempt's start and each row as soon as
it exists (the run appends the row to its store and advances its progress there), always from
one thread at a time. It raises what stopped the run:

- ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM turned into one by the run): ``suite.interrupt()`` is
  called, no new unit starts, the units in flight end promptly, every slot is closed, and the
  interrupt propagates;
- an exception a unit raised (a harness bug): the other slots are stopped the same way and that
  exception propagates.

``LocalExecutor`` opens at most ``jobs`` slots, each on its own thread, and each slot takes the
next unit of the shared queue when its last one is done: units start in plan order, and a slot
(an engine pool, a fixture server) is opened once and reused by every unit it runs.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from typing import Protocol

from metewand.runtime.heap import freeze_startup_heap
from metewand.runtime.interrupts import ignoring_interrupts
from metewand.runtime.suite import Row, Slot, Suite, Unit, UnitEvents, run_slot_units

# How often the waiting main thread looks at its slots. It is woken at once when a slot ends or
# one fails (``_wait``), and a signal's handler runs inside the wait (interruptible on POSIX),
# so this only bounds how late an unforeseen end is seen; each look costs the harness CPU
# (ten a second were ~0.3 ms of CPU per browser attempt, measured).
_WAIT_S = 2.0


class Executor(Protocol):
    def run(self, suite: Suite, units: Sequence[Unit], sink: UnitEvents) -> None: ...


class _SerialSink:
    """Hands the slots' events to the sink one at a time."""

    def __init__(self, sink: UnitEvents) -> None:
        self._sink = sink
        self._lock = threading.Lock()

    def attempt_started(self, label: str) -> None:
        with self._lock:
            self._sink.attempt_started(label)

    def attempt_finished(self, row: Row) -> None:
        with self._lock:
            self._sink.attempt_finished(row)


class LocalExecutor:
    """At most ``jobs`` slots on this machine, one thread each."""

    def __init__(self, jobs: int = 1) -> None:
        if jobs < 1:
            raise ValueError("jobs must be >= 1")
        self.jobs = jobs

    def run(self, suite: Suite, units: Sequence[Unit], sink: UnitEvents) -> None:
        if not units:
            return
        queue = deque(units)
        queue_lock = threading.Lock()
        stopping = threading.Event()
        ended = threading.Event()  # a slot thread ended: the main thread looks again
        finished: list[int] = []  # one entry per ended slot thread (appended before ``ended``)
        failures: list[BaseException] = []
        events = _SerialSink(sink)

        def next_unit() -> Unit | None:
            with queue_lock:
                return None if stopping.is_set() or not queue else queue.popleft()

        def slot_thread(index: int) -> None:
            slot: Slot | None = None
            try:
                slot = suite.open_slot(str(index))
                run_slot_units(suite, slot, next_unit, events)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                if not stopping.is_set():
                    failures.append(exc)
                    stopping.set()
            finally:
                if slot is not None:
                    try:
                        slot.close()
                    except BaseException as exc:  # noqa: BLE001 - a broken close is a failure
                        failures.append(exc)
                finished.append(index)
                ended.set()

        threads = [
            threading.Thread(target=slot_thread, args=(n,), name=f"mw-slot-{n}", daemon=True)
            for n in range(min(self.jobs, len(units)))
        ]
        freeze_startup_heap()  # before the slots start: their attempts then pay no walk of it
        for thread in threads:
            thread.start()
        try:
            _wait(threads, stopping, ended, finished)
        except BaseException:
            stopping.set()
            _stop(suite, threads)
            raise
        if failures:
            _stop(suite, threads)
            raise failures[0]


def _wait(
    threads: list[threading.Thread],
    stopping: threading.Event,
    ended: threading.Event,
    finished: list[int],
) -> None:
    """Until every slot thread ended, or one failed (``stopping``); wakes for signals."""
    while not stopping.is_set():
        if len(finished) == len(threads) or not any(t.is_alive() for t in threads):
            return
        ended.wait(_WAIT_S)
        ended.clear()


def _stop(suite: Suite, threads: list[threading.Thread]) -> None:
    """Tell the suite to stop, then wait for every slot thread (also if telling it failed)."""
    with ignoring_interrupts():
        try:
            suite.interrupt()
        finally:
            for thread in threads:
                thread.join()
