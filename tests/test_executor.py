"""The local executor (runtime/executor.py) over a suite whose attempts are real processes."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lifecycle_suite import ProcessSuite
from metewand.runtime.executor import LocalExecutor
from metewand.runtime.suite import Row, UnitEvents


class Recorder:
    """A sink that remembers the order of events and which thread sent them."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.threads: set[str] = set()
        self.inside = 0
        self.overlapped = False
        self._lock = threading.Lock()

    def attempt_started(self, label: str) -> None:
        self._enter()
        self.events.append(("started", label))
        self._leave()

    def attempt_finished(self, row: Row) -> None:
        self._enter()
        self.events.append(("finished", str(row["key"])))
        self._leave()

    def _enter(self) -> None:
        with self._lock:
            self.inside += 1
            self.overlapped |= self.inside > 1
            self.threads.add(threading.current_thread().name)

    def _leave(self) -> None:
        with self._lock:
            self.inside -= 1

    def finished(self) -> list[str]:
        return [label for kind, label in self.events if kind == "finished"]


def _run(suite: ProcessSuite, jobs: int) -> Recorder:
    sink = Recorder()
    LocalExecutor(jobs).run(suite, suite.units(), sink)
    return sink


def test_jobs_slots_run_at_once_each_opened_once_and_closed() -> None:
    suite = ProcessSuite(units=6, attempts=2, sleep_s=0.2)
    sink = _run(suite, jobs=2)
    assert sorted(sink.finished()) == sorted(k for u in suite.planned for k in u.keys)
    assert suite.peak == 2  # two real processes at once, never three
    assert sorted(suite.opened) == ["0", "1"] and sorted(suite.closed) == ["0", "1"]
    assert not sink.overlapped  # the sink hears one event at a time


def test_one_slot_runs_units_in_plan_order_and_each_row_before_the_next_attempt() -> None:
    suite = ProcessSuite(units=3, attempts=2)
    sink = _run(suite, jobs=1)
    keys = [k for u in suite.planned for k in u.keys]
    expected: list[tuple[str, str]] = []
    for key in keys:
        expected += [("started", key), ("finished", key)]
    assert sink.events == expected
    assert suite.peak == 1 and suite.opened == ["0"]


def test_a_unit_runs_on_one_slot_and_slots_never_outnumber_units() -> None:
    suite = ProcessSuite(units=1, attempts=3, sleep_s=0.05)
    rows: list[dict[str, Any]] = []

    class Sink(Recorder):
        def attempt_finished(self, row: Row) -> None:
            rows.append(row)

    LocalExecutor(4).run(suite, suite.units(), Sink())
    assert suite.opened == ["0"]  # one unit: one slot, however many jobs
    assert {row["slot"] for row in rows} == {"0"}
    assert len({row["pid"] for row in rows}) == 3  # three real processes, one per attempt


class QueueSuite(ProcessSuite):
    """A suite that takes a slot's queue itself (``run_units``), as the browser suite does."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: list[tuple[str, str]] = []  # (slot id, thread) per run_units call

    def run_units(self, slot: Any, next_unit: Any, events: UnitEvents) -> None:
        self.calls.append((slot.slot_id, threading.current_thread().name))
        while (unit := next_unit()) is not None:
            self.run_unit(slot, unit, events)


def test_a_suite_with_run_units_is_handed_each_slots_queue_once() -> None:
    suite = QueueSuite(units=6, attempts=2, sleep_s=0.1)
    sink = _run(suite, jobs=2)
    assert sorted(suite.calls) == [("0", "mw-slot-0"), ("1", "mw-slot-1")]
    assert sorted(sink.finished()) == sorted(k for u in suite.planned for k in u.keys)
    assert suite.peak == 2 and not sink.overlapped


def test_a_harness_fault_stops_every_slot_and_propagates() -> None:
    suite = ProcessSuite(units=8, attempts=1, sleep_s=0.3, fail_keys=frozenset({"u1/a0"}))
    sink = Recorder()
    with pytest.raises(RuntimeError, match="injected fault in u1/a0"):
        LocalExecutor(2).run(suite, suite.units(), sink)
    assert suite.stopping.is_set()  # the other slot was told to stop
    assert sorted(suite.closed) == sorted(suite.opened) == ["0", "1"]
    assert len(sink.finished()) < 7  # the queue was dropped, not run to the end
    assert not suite.live  # no attempt process outlives the run


def test_no_units_opens_no_slot() -> None:
    suite = ProcessSuite(units=0, attempts=1)
    _run(suite, jobs=3)
    assert suite.opened == []


def test_jobs_must_be_positive() -> None:
    with pytest.raises(ValueError, match="jobs must be >= 1"):
        LocalExecutor(0)


class _Cycle:
    """A reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_the_start_up_heap_is_frozen_before_the_first_unit_and_later_garbage_still_collected() -> (
    None
):
    import gc
    import weakref

    garbage = _Cycle()
    garbage_gone = weakref.ref(garbage)
    del garbage  # start-up garbage: collected before the freeze, never frozen with the rest
    kept = _Cycle()
    seen_in_unit: list[bool] = []

    class Probe(ProcessSuite):
        def run_unit(self, slot: Any, unit: Any, events: Any = None) -> list[Row]:
            # frozen: in no generation a collection walks (get_objects lists only those)
            seen_in_unit.append(not any(o is kept for o in gc.get_objects()))
            later = _Cycle()
            later_gone.append(weakref.ref(later))
            del later
            return super().run_unit(slot, unit, events)

    later_gone: list[weakref.ref[_Cycle]] = []
    before = gc.get_freeze_count()
    try:
        _run(Probe(units=2, attempts=1), jobs=1)
        assert garbage_gone() is None
        assert gc.get_freeze_count() > before and seen_in_unit == [True, True]
        gc.collect()  # what a unit made after the freeze is collected as before
        assert [ref() for ref in later_gone] == [None, None]
    finally:
        gc.unfreeze()  # the rest of this test process collects as it did
