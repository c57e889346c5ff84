"""The seam between a suite and whatever executes its attempts (issue #14).

A suite is three things to the runtime:

- ``units()``: the planned work, in execution order, minus what the run store already holds. A
  *unit* is the smallest piece of work that must run on one host without anything beside it:
  a browser round (one task-attempt on every engine, in the balanced order) or a compute
  repetition group (one case's implementations for one repetition). Pairing lives inside a unit,
  so every ratio compares attempts that ran on the same host, one after the other.
- ``prepare()``: once per run, before any slot opens, where the run is (the browser suite's
  cold-start samples).
- ``open_slot(slot)``: what a unit needs to run (an engine pool and a fixture server, a reused
  implementation worker), opened once per slot and reused by many units; closed when the
  executor is done with the slot.
- ``run_unit(slot, unit, events)``: run the unit's attempts in order on that slot and return their
  rows; ``events`` (when given) hears each attempt start and each row as soon as it exists, so a
  local executor appends it to the run store before the next attempt starts (a ``kill -9`` then
  loses at most the attempt in flight).
  A suite may also have ``run_units(slot, next_unit, events)``: run units on the slot until
  ``next_unit()`` returns None (``run_slot_units`` calls it when it is there, else
  ``run_unit`` per unit). The browser suite has it, so that its slot's attempts follow one
  another on the slot's event loop thread: no hand-over between two threads around each
  attempt, whose wake-ups were the longest waits between attempts on a busy 2-core host.
- ``interrupt()``: called from another thread when the run must stop: kill what is live and make
  every ``run_unit`` in flight return promptly (an attempt cut short leaves no row).
- ``teardown()`` once the executor is done (whether or not the run completed): stop what the suite
  started outside its slots (leftover engines, accounting groups, scratch dirs); then
  ``finish(completed)`` records the run's end-of-run facts (manifest fields from the rows).

An executor (local threads, or Dask) only moves ``Unit``s and rows, so both are plain JSON-able
data. A suite whose slots record run facts in the manifest (engine identities, teardown reports,
materialized datasets) does so on the client only: on another process or host (Dask) the run's
manifest has one writer, the client. There the suite collects those facts as data instead, the
executor takes them after each unit and when the slot closes (``take_facts()``), and hands them,
with where they were made, to the client's suite (``merge_facts(facts, placement)``), which
writes them. Both are optional: a suite without them has no such facts. A suite is named by a ``SuiteRef`` (its kind and its JSON config) so that
another process or host can rebuild it: the registry maps kinds to import paths, which keeps
``runtime`` free of imports from ``suites`` (the layer rule points down only).

Two more optional parts serve a distributed executor. A kind may register an *admission* check
(``admit(ref) -> reason | None``, run on a worker when it registers, before any unit: a browser
profiled run refuses a host whose engine binaries differ from the run's pins), and a suite may
make the host telemetry of its worker's slot (``worker_telemetry(root_pid)``: the browser
profiler's, which counts its engine groups' members as the benchmark's and keeps the gate's
thresholds of the run); without it the executor samples the host with the defaults.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from metewand.measure.host import HostTelemetry

Row = dict[str, Any]


@dataclass(frozen=True)
class Unit:
    """A serialisable piece of paired work: the row keys it will produce and its payload."""

    keys: tuple[str, ...]
    payload: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"keys": list(self.keys), "payload": self.payload}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Unit:
        return cls(tuple(data["keys"]), dict(data.get("payload") or {}))


@dataclass(frozen=True)
class SuiteRef:
    """Enough to rebuild a suite anywhere: its kind and its JSON-able configuration."""

    kind: str
    config: dict[str, Any]


class Slot(Protocol):
    """What one unit at a time runs on; opened and closed by the suite."""

    def close(self) -> None: ...


class UnitEvents(Protocol):
    """The one row sink: what hears each attempt's start and each row as soon as it exists. A
    suite's ``run_unit`` calls it on the slot's thread (``run_units`` on the thread it runs
    the attempts on); an executor's ``run`` is given one (the run lifecycle's, which appends
    each row to the store) and calls it one event at a time, whichever slot or host the row
    came from."""

    def attempt_started(self, label: str) -> None: ...

    def attempt_finished(self, row: Row) -> None: ...


class Suite(Protocol):
    kind: str

    def units(self) -> Iterable[Unit]: ...

    def prepare(self) -> None: ...

    def open_slot(self, slot_id: str) -> Slot: ...

    def run_unit(self, slot: Slot, unit: Unit, events: UnitEvents | None = None) -> list[Row]: ...

    def interrupt(self) -> None: ...

    def teardown(self) -> None: ...

    def finish(self, completed: bool) -> None: ...


NextUnit = Callable[[], "Unit | None"]  # the shared queue's next unit, None when done or stopping


def run_slot_units(suite: Suite, slot: Slot, next_unit: NextUnit, events: UnitEvents) -> None:
    """Run units on ``slot`` until ``next_unit()`` has none: the suite's own ``run_units`` when
    it has one (the browser suite runs a slot's attempts one after another on the slot's event
    loop thread, with no hand-over between threads around each), else ``run_unit`` per unit."""
    run_units = getattr(suite, "run_units", None)
    if run_units is not None:
        run_units(slot, next_unit, events)
        return
    while (unit := next_unit()) is not None:
        suite.run_unit(slot, unit, events)


def take_facts(suite: Suite) -> list[dict[str, Any]]:
    """The manifest facts a worker-side suite collected since the last call (JSON-able)."""
    take = getattr(suite, "take_facts", None)
    return list(take()) if take is not None else []


def worker_telemetry(suite: Suite, root_pid: int) -> HostTelemetry | None:
    """The suite's host telemetry for a worker's slot (not started), or None: the default."""
    make = getattr(suite, "worker_telemetry", None)
    return make(root_pid) if make is not None else None


def merge_facts(suite: Suite, facts: list[dict[str, Any]], placement: dict[str, Any]) -> None:
    """Give a worker's facts to the client's suite (the one writer of the run's manifest)."""
    merge = getattr(suite, "merge_facts", None)
    if merge is not None and facts:
        merge(facts, placement)


# kind -> "module:callable" taking a SuiteRef and returning a Suite. Suites register
# themselves by import path (``metewand.suites``' table), so runtime names none of them.
_FACTORIES: dict[str, str] = {}
# kind -> "module:callable" taking a SuiteRef and returning why this host cannot run it, or None
_ADMISSIONS: dict[str, str] = {}


def register(kind: str, factory_path: str, admission_path: str | None = None) -> None:
    _FACTORIES[kind] = factory_path
    if admission_path is not None:
        _ADMISSIONS[kind] = admission_path


def _imported(path: str) -> Any:
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def admit(ref: SuiteRef, admission_path: str | None = None) -> str | None:
    """Why this host cannot run ``ref``'s units (a worker's registration asks), or None.

    ``admission_path``: the client's registry entry (it travels with the worker plugin); else
    this process's."""
    path = admission_path or _ADMISSIONS.get(ref.kind)
    if path is None:
        return None
    reason: str | None = _imported(path)(ref)
    return reason


def build(ref: SuiteRef) -> Suite:
    """The suite a ref names, imported on first use (also on a remote worker)."""
    try:
        path = _FACTORIES[ref.kind]
    except KeyError:
        raise KeyError(f"no suite registered for kind {ref.kind!r}") from None
    suite: Suite = _imported(path)(ref)
    return suite
