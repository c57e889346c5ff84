"""The seam between the attempt runner and what drives one attempt, and the one shape every
attempt ends in.

An ``AttemptDriver`` runs one planned attempt on a live engine and returns an ``AttemptResult``;
it never raises for anything the engine, the task, an adapter or the grader does (a cancelled
attempt is the only exception that leaves it). Two drivers exist (``attempt_registry``): the
harness's own CDP steps (``attempt.CdpStepsDriver``) and a driver path's adapter, per attempt or
served (``adapter_attempt.AdapterDriver``). The engine is given whole: each driver derives its
endpoint from it (a CDP driver connects to the browser WebSocket; an adapter driver hands the
adapter the identity gate's ``EngineEndpoint``, which costs a CDP round trip the CDP driver does
not pay).

``write_artifacts`` is the one way a driver writes its files: its own (a CDP log, an adapter's
result) and ``grader.json``, the grader's record of the verdict.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from metewand import canonical
from metewand.runtime import rundir
from metewand.suites.browser.classify import Classification
from metewand.suites.browser.phase_marks import AttemptPhases
from metewand.suites.browser.probes import NO_GRADER_ACCESS, GraderAccess
from metewand.suites.browser.run_config import DEFAULT_DRIVER_ISOLATION

if TYPE_CHECKING:
    from metewand.suites.browser.adapter_server import AdapterRunner
    from metewand.suites.browser.adapter_targets import KnownTargets
    from metewand.suites.browser.driver_registry import DriverMissing, FoundDriver
    from metewand.suites.browser.engine_process import EngineProcess
    from metewand.suites.browser.rows import PlannedAttempt
    from metewand.suites.browser.state_clear import KeptClears
    from metewand.suites.browser.tasks import Task

GRADER_FILE: Final = rundir.ATTEMPT_GRADER

# Called once the task's work is done (steps run, answer graded) and before the page is closed.
BeforeCleanup = Callable[[], Awaitable[None] | None]


def attempt_seed(base_seed: str | int | None, task_id: str, attempt: int) -> str:
    """Per-attempt seed: stable for a given base seed, task and attempt index."""
    text = f"{base_seed}:{task_id}:{attempt}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True, kw_only=True)
class AttemptResult:
    """How one attempt ended, whichever driver ran it (``outcome.json``, and the row's verdict,
    checks, CDP counters, answer and notes)."""

    status: str
    failure_class: str | None
    origin: str | None
    reason: str
    secondary_status: str | None
    checks: tuple[Mapping[str, str], ...]
    duration_ms: int
    # time spent waiting on the browser (command replies + event waits); None when the harness
    # did not hold the connection (a driver path's adapter did), not 0
    cdp_wait_ms: float | None
    cdp_commands: int | None  # None: not counted (an adapter that reports no counters)
    cdp_errors: int | None
    answer: Any
    isolation: str
    artifacts: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    # the driver's own row fields (a driver path's: which path, its version, how its adapter
    # ended, its cost); they may restate the base row's ``isolation`` and ``driver_path``
    row_fields: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, verdict: Classification, **fields: Any) -> AttemptResult:
        """A result with ``verdict``'s status, failure class, origin, reason and secondary
        status; every other field by keyword."""
        return cls(
            status=verdict.status,
            failure_class=verdict.failure_class,
            origin=verdict.origin,
            reason=verdict.reason,
            secondary_status=verdict.secondary_status,
            **fields,
        )

    def with_artifacts(self, *names: str) -> AttemptResult:
        return replace(self, artifacts=(*self.artifacts, *names))

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "failure_class": self.failure_class,
            "origin": self.origin,
            "reason": self.reason,
            "secondary_status": self.secondary_status,
            "checks": list(self.checks),
            "duration_ms": self.duration_ms,
            "cdp_wait_ms": None if self.cdp_wait_ms is None else round(self.cdp_wait_ms, 3),
            "cdp_commands": self.cdp_commands,
            "cdp_errors": self.cdp_errors,
            "answer": jsonable(self.answer),
            "isolation": self.isolation,
            "artifacts": list(self.artifacts),
            "notes": list(self.notes),
        }


class AdapterRunners(Protocol):
    """The slot's adapter runners (``adapter_slot.SlotAdapters``): the runner a driver path's
    attempt uses on this engine process, and the mode it runs in."""

    async def runner(
        self, found: FoundDriver, engine: str, generation: int, engine_pid: int | None
    ) -> tuple[AdapterRunner, str]: ...


@dataclass(frozen=True, kw_only=True)
class DriverContext:
    """What a driver is given beside the planned attempt and the engine."""

    run_id: str
    seed: str
    fixture_base_url: str
    # the graders' token and the run's connection to them, kept open across attempts
    grader: GraderAccess = NO_GRADER_ACCESS
    isolation: str  # --isolation (raw CDP tasks)
    out_dir: Path
    phases: AttemptPhases | None = None  # the attempt's phase marks (None: not marked)
    # the observers' collection window ends here when the driver can say so before it closes
    # the page (the CDP driver does; an adapter closes its own pages, so the window ends after)
    work_done: BeforeCleanup | None = None
    adapters: AdapterRunners | None = None  # None: a driver path's adapter runs per attempt
    # the run's adapter lookup, each path resolved once (a lookup reads package manifests or
    # distribution metadata: 0.2-0.7 ms of harness CPU); None: ``resolve_driver`` each attempt
    resolve_driver: Callable[[str], FoundDriver | DriverMissing] | None = None
    score_mode: str = (
        "independent"  # --score-mode (peer-compatible grades L1 server rows by the answer)
    )
    # the slot's list of each engine's targets, carried from a clean adapter attempt to the next
    # (None: listed before every adapter attempt)
    known_targets: KnownTargets | None = None
    # the slot's kept connections for clearing an engine's state after an adapter attempt
    state_clears: KeptClears | None = None
    driver_isolation: str = DEFAULT_DRIVER_ISOLATION  # --driver-isolation


class AttemptDriver(Protocol):
    def handles(self, task: Task) -> bool:
        """Whether this driver runs ``task`` (the registry asks the drivers in order)."""
        ...

    def phase_granularity(self, task: Task) -> str:
        """What this driver's phase marks can see of ``task`` (``phase_marks``)."""
        ...

    async def run(
        self, planned: PlannedAttempt, engine: EngineProcess, ctx: DriverContext
    ) -> AttemptResult: ...


def jsonable(value: Any) -> Any:
    """``value`` when it is canonical JSON, else kept as text (e.g. an integer beyond 2^53 from
    a page or an adapter)."""
    try:
        canonical.dumps(value)
        return value
    except canonical.CanonicalJSONError:
        return {"unparsed": json.dumps(value, default=str)}


def write_artifacts(
    out_dir: Path,
    result: AttemptResult,
    observations: Any,
    files: Sequence[tuple[str, bytes | None]] = (),
) -> AttemptResult:
    """Write the driver's ``files`` (bytes; None: a file the driver's own process wrote, only
    listed) and ``grader.json``; the result listing them, in that order."""
    for name, data in files:
        if data is not None:
            (out_dir / name).write_bytes(data)
    record = {
        "ok": result.status == "pass",
        "status": result.status,
        "failure_class": result.failure_class,
        "reason": result.reason,
        "checks": list(result.checks),
        "answer": jsonable(result.answer),
        "observations": jsonable(observations),
    }
    (out_dir / GRADER_FILE).write_bytes(canonical.dumps(record))
    return result.with_artifacts(*(name for name, _ in files), GRADER_FILE)
