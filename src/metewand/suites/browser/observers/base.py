"""The observer protocol: what watches one browser attempt and adds a named block to its row.

An observer is made for one attempt by its factory (``ObserverFactory``: None when it has
nothing to watch in this one, e.g. phase marks off), then:

- ``begin()`` before the attempt;
- ``work_done()`` when the task's work is done: before the page is closed when the driver can
  say so (the CDP driver), else once the driver returned; it ends the collection window;
- ``await stop()`` after the attempt and its grader evidence: the end readings, nothing more;
- ``end(AttemptEnd)`` once every observer has stopped: its block, ``Observed`` (its name, the
  row fields it adds, empty when it has nothing to say, and the files it wrote).

Readings nest, blocks follow: observers begin in registry order, close their window and stop in
reverse (like context managers), then render their blocks in registry order, each seeing the
fields rendered before it (``AttemptEnd.fields``). The order is measurement: the collection
window holds the sampler's baseline and end scans; the settle wait comes before any reading of
CPU; traffic counters end after every reading; decoding what was read (phase marks) and laying
out records happen after every reading, outside every timed span.

Measurement trouble is the observer's own to turn into flags (it never changes a functional
status); an observer that raises is a harness bug, and the run stops as for any (exit 1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from metewand.measure.accounting import TreeAccounting
from metewand.measure.mark_probe import KeptProbes
from metewand.measure.quiet import CpuNs

if TYPE_CHECKING:
    from metewand.suites.browser.attempt_driver import AttemptDriver, AttemptResult
    from metewand.suites.browser.engine_process import EngineProcess
    from metewand.suites.browser.fixtures.traffic import TrafficTracker
    from metewand.suites.browser.phase_marks import AttemptPhases
    from metewand.suites.browser.rows import PlannedAttempt
    from metewand.suites.browser.run_config import RunConfig


class EngineGroups:
    """The run's engine accounting groups, as observers and the engine pool ask for them. This
    base has none (a Dask worker's suite); the resource profiler's are one per worker x engine,
    joined by the engine before exec."""

    def launch_group(self, worker: int, engine: str) -> TreeAccounting | None:
        """The group an engine's every launch joins before exec; None: none."""
        return None

    def tree_cpu(self, worker: int, engine: str, process: EngineProcess) -> CpuNs | None:
        """A reader of the engine tree's CPU time in ns, for the settle wait; None: no group."""
        return None

    def engine_group(
        self, worker: int, engine: str, process: EngineProcess
    ) -> TreeAccounting | None:
        """The engine's accounting group, for the attempt's phase marks; None: no group."""
        return None

    def mark_probes(self) -> KeptProbes | None:
        """Where phase marks keep their probes open from one attempt to the next (closed with
        the groups); None: each attempt opens and closes its own."""
        return None


@dataclass(frozen=True, kw_only=True)
class ObserverSetup:
    """What a factory may look at to make its observer for one attempt."""

    planned: PlannedAttempt
    process: EngineProcess
    worker: int
    config: RunConfig
    groups: EngineGroups
    traffic: TrafficTracker  # the slot's fixture server's counters
    driver: AttemptDriver  # the driver that runs the attempt
    out_dir: Path  # the attempt's artifact directory (staged; published with the row)


@dataclass(frozen=True)
class AttemptEnd:
    """What ``end`` is given: how the attempt ended and the row fields of the observers that
    rendered their blocks before this one."""

    result: AttemptResult
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Observed:
    """An observer's block: its name, the row fields it adds, the files it wrote."""

    name: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    artifacts: tuple[str, ...] = ()


class AttemptObserver(Protocol):
    # the phase marks the driver is to write, when this observer keeps them
    @property
    def marks(self) -> AttemptPhases | None: ...

    def begin(self) -> None: ...

    def work_done(self) -> None: ...

    async def stop(self) -> None: ...

    def end(self, ended: AttemptEnd) -> Observed: ...


class Observer:
    """Defaults for an observer with nothing to do at some of the steps."""

    marks: AttemptPhases | None = None

    def begin(self) -> None:
        return None

    def work_done(self) -> None:
        return None

    async def stop(self) -> None:
        return None


ObserverFactory = Callable[[ObserverSetup], AttemptObserver | None]


class Observers:
    """One attempt's observers, nested in registry order (what the attempt runner drives)."""

    def __init__(self, observers: Sequence[AttemptObserver]) -> None:
        self.observers = tuple(observers)
        self._window_closed = False

    @classmethod
    def made(cls, factories: Sequence[ObserverFactory], setup: ObserverSetup) -> Observers:
        return cls([o for factory in factories if (o := factory(setup)) is not None])

    @property
    def marks(self) -> AttemptPhases | None:
        return next((o.marks for o in self.observers if o.marks is not None), None)

    def begin(self) -> None:
        for observer in self.observers:
            observer.begin()

    def work_done(self) -> None:
        """End the collection window, once (innermost first). Every observer's window closes
        even when one of them broke its promise not to raise; the first error is raised."""
        if self._window_closed:
            return
        self._window_closed = True
        error: Exception | None = None
        for observer in reversed(self.observers):
            try:
                observer.work_done()
            except Exception as exc:
                error = error or exc
        if error is not None:
            raise error

    async def end(self, result: AttemptResult) -> list[Observed]:
        """Stop every observer (innermost first), then every block (in registry order)."""
        for observer in reversed(self.observers):
            await observer.stop()
        blocks: list[Observed] = []
        fields: dict[str, Any] = {}
        for observer in self.observers:
            block = observer.end(AttemptEnd(result, dict(fields)))
            blocks.append(block)
            fields.update(block.fields)
        return blocks
