"""The local executor (runtime/executor.py) over a suite whose attempts are real processes."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lifecycle_suite import ProcessSuite
from metewand.runtime.executor import LocalExecutor
from metewand.runtime.suite import Row


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
