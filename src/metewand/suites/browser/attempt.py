"""One task attempt on one engine through the harness's own CDP client: fresh page, driver,
grade, cleanup, artifacts.

``run_task_attempt`` is self-contained: give it a task, a CDP endpoint (the browser WebSocket
URL, connected fresh for the attempt as the corpus's own harness does, or an open
``CdpClient``), the fixture server's base URL and an artifact directory. It never raises for
anything the engine or the task does; every outcome is an ``AttemptResult``. ``CdpStepsDriver``
is the same as the attempt runner's ``AttemptDriver`` for every task no driver path claims
(``raw_cdp`` steps and the probes).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from metewand.runtime import rundir
from metewand.suites.browser import classify
from metewand.suites.browser.attempt_driver import (
    AttemptResult,
    BeforeCleanup,
    DriverContext,
    attempt_seed,
    write_artifacts,
)
from metewand.suites.browser.cdp import (
    CdpClient,
    CdpLogRecorder,
    PageTarget,
    close_target,
    new_page_target,
)
from metewand.suites.browser.drivers import DRIVERS, AttemptContext, DriverVerdict
from metewand.suites.browser.errors import DriverUnavailable
from metewand.suites.browser.phase_marks import AttemptPhases, Mark, begin_marks
from metewand.suites.browser.probes import NO_GRADER_ACCESS, GraderAccess
from metewand.suites.browser.tasks import Task

if TYPE_CHECKING:
    from metewand.suites.browser.engine_process import EngineProcess
    from metewand.suites.browser.rows import PlannedAttempt

CDP_LOG_FILE: Final = rundir.ATTEMPT_CDP_LOG
CLEANUP_TIMEOUT_S: Final = 3.0
# Beyond the per-command timeout, a whole attempt is bounded by the task's hard-kill budget.
DEFAULT_HARD_KILL_MS: Final = 30000

# Asked after the attempt, with "the engine looks suspect" (and, when the harness's own client
# saw it, when the endpoint last answered): ok / exited / unresponsive.
EngineHealth = Callable[..., Awaitable[str]]


class CdpStepsDriver:
    """The harness's own CDP client drives the task (its steps, or its probe's CDP work)."""

    def handles(self, task: Task) -> bool:
        return True  # whatever no driver path claims

    def phase_granularity(self, task: Task) -> str:
        return "steps" if task.driver_kind == "raw_cdp" else "probe"

    async def run(
        self, planned: PlannedAttempt, engine: EngineProcess, ctx: DriverContext
    ) -> AttemptResult:
        assert engine.ws_url is not None
        return await run_task_attempt(
            planned.task,
            engine.ws_url,
            planned.engine,
            ctx.fixture_base_url,
            ctx.out_dir,
            ctx.isolation,
            run_id=ctx.run_id,
            attempt=planned.attempt,
            seed=ctx.seed,
            engine_health=engine.health,
            before_cleanup=ctx.work_done,
            grader=ctx.grader,
            phases=ctx.phases,
        )


@dataclass
class _Counters:
    wait_s: float
    commands: int
    errors: int

    @classmethod
    def of(cls, client: CdpClient) -> _Counters:
        t = client.timing
        return cls(t.browser_wait_s, t.commands, t.errors)


async def run_task_attempt(
    task: Task,
    cdp: str | CdpClient,
    engine_name: str,
    fixture_base_url: str,
    artifact_dir: Path | str,
    isolation: str = "shared",
    *,
    run_id: str = "run",
    attempt: int = 0,
    seed: str | None = None,
    engine_alive: Callable[[], bool] | None = None,
    engine_health: EngineHealth | None = None,
    log_recorder: CdpLogRecorder | None = None,
    before_cleanup: BeforeCleanup | None = None,
    grader: GraderAccess = NO_GRADER_ACCESS,
    phases: AttemptPhases | None = None,
) -> AttemptResult:
    """Run one attempt and write ``cdp.jsonl`` and ``grader.json`` into ``artifact_dir``.

    ``cdp``: a browser WebSocket URL (a fresh connection is opened and closed here) or an open
    client (then pass ``log_recorder`` if the
    client was connected with one). ``engine_alive``
    is asked after the attempt: a dead engine turns the outcome into ``crash``; ``engine_health``
    (preferred) also catches an engine alive but no longer answering on its CDP endpoint, so the
    crash is charged to the attempt that caused it.
    ``before_cleanup`` (sync or async) runs after the driver and grader returned and before the
    page is closed; it is not reached when the driver raises or times out. Its own failure is a
    note, never a change of the outcome, and its wall is not part of ``duration_ms`` (it is the
    caller's time, e.g. the resource observer's end scan, not the task's).
    ``phases``: the attempt's phase marks (begun here, finished once the page is closed); the
    hook's wall is left between marks, as it is left out of ``duration_ms``.
    """
    out_dir = Path(artifact_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    recorder = log_recorder if log_recorder is not None else CdpLogRecorder()
    first_record = len(recorder.records)
    notes: list[str] = []
    client: CdpClient | None = cdp if isinstance(cdp, CdpClient) else None
    before: _Counters | None = None
    verdict: DriverVerdict | None = None
    hook = _TimedHook(before_cleanup)
    mark = begin_marks(phases)
    try:
        if client is None:
            client = await _connect(cdp, recorder, task, mark)
        before = _Counters.of(client)
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for returned a result that came in
        # with a cancel (Ctrl-C) and dropped the cancel
        async with asyncio.timeout(_hard_kill_s(task)):
            verdict = await _drive(
                task,
                client,
                isolation,
                engine_name,
                fixture_base_url,
                out_dir,
                run_id,
                attempt,
                seed,
                notes,
                hook,
                grader,
                mark,
            )
        outcome = verdict.classification
    except Exception as exc:  # every failure becomes a classified outcome
        outcome = classify.classify_exception(exc)
    except BaseException:  # cancelled (SIGTERM, Ctrl-C): close the socket opened here, then stop
        if client is not None and not isinstance(cdp, CdpClient):
            await asyncio.shield(client.close())
        raise
    after, outcome, health_s = await _end_attempt(
        outcome, client, not isinstance(cdp, CdpClient), notes, phases, engine_health, engine_alive
    )
    duration_ms = int((time.monotonic() - started - hook.wall_s - health_s) * 1000)
    result = _attempt_result(outcome, verdict, duration_ms, before, after, isolation, notes)
    return _write(out_dir, result, verdict, recorder.jsonl(first_record))


async def _connect(
    cdp: str | CdpClient,
    recorder: CdpLogRecorder,
    task: Task,
    mark: Mark,
) -> CdpClient:
    """The attempt's fresh connection to ``cdp`` (a URL), its frames logged to ``recorder``."""
    assert isinstance(cdp, str)
    mark("connect")
    return await CdpClient.connect(cdp, log=recorder, timeout=task.task_ms / 1000)


def _write(
    out_dir: Path, result: AttemptResult, verdict: DriverVerdict | None, cdp_log: bytes
) -> AttemptResult:
    """The attempt's artifacts (result, the grader's observations, the CDP log) in ``out_dir``."""
    observations = verdict.observations if verdict is not None else None
    return write_artifacts(out_dir, result, observations, [(CDP_LOG_FILE, cdp_log)])


def _hard_kill_s(task: Task) -> float:
    """The task's hard bound on its driver and grader, past which the attempt is cut."""
    return int(task.data["timeouts"].get("hard_kill_ms", DEFAULT_HARD_KILL_MS)) / 1000


async def _end_attempt(
    outcome: classify.Classification,
    client: CdpClient | None,
    opened_here: bool,
    notes: list[str],
    phases: AttemptPhases | None,
    engine_health: EngineHealth | None,
    engine_alive: Callable[[], bool] | None,
) -> tuple[_Counters | None, classify.Classification, float]:
    """After the driver: the CDP counters, the connection closed if it was opened here, the phase
    marks finished, then the engine asked whether it survived. Returns the counters, the outcome
    as the engine's health makes it, and the seconds the health check took."""
    after = _Counters.of(client) if client is not None else None
    # Suspect engine: it dropped our connection (we have not closed it yet) or the cleanup met
    # trouble (e.g. "No target with given id": the page went away with a closing browser).
    suspect = client is None or not client.is_connected or bool(notes)
    if client is not None and opened_here:
        if phases is not None:
            phases.mark("disconnect")
        await client.close()
    if phases is not None:
        phases.finish()  # before the health check: the harness's question, not the task's
    health_started = time.monotonic()
    # the page's closing reply is proof the endpoint served this attempt to its end
    answered = client.last_reply_ns if client is not None and not suspect else None
    outcome = await _engine_checked(outcome, suspect, engine_health, engine_alive, answered)
    return after, outcome, time.monotonic() - health_started  # the harness's, not the task's


async def _engine_checked(
    outcome: classify.Classification,
    suspect: bool,
    engine_health: EngineHealth | None,
    engine_alive: Callable[[], bool] | None,
    answered_ns: int | None = None,
) -> classify.Classification:
    """The outcome after asking whether the engine survived the attempt (a dead or unanswering
    engine is charged to the attempt that caused it)."""
    if engine_health is not None:
        health = await (
            engine_health(suspect, answered_ns)
            if answered_ns is not None
            else engine_health(suspect)
        )
        return classify.promote_engine_trouble(outcome, health)
    if engine_alive is not None:
        return classify.promote_dead_engine(outcome, engine_alive())
    return outcome


def _attempt_result(
    outcome: classify.Classification,
    verdict: DriverVerdict | None,
    duration_ms: int,
    before: _Counters | None,
    after: _Counters | None,
    isolation: str,
    notes: list[str],
) -> AttemptResult:
    return AttemptResult.of(
        outcome,
        checks=tuple(c.to_json() for c in verdict.checks) if verdict is not None else (),
        duration_ms=duration_ms,
        cdp_wait_ms=(after.wait_s - before.wait_s) * 1000 if after and before else 0.0,
        cdp_commands=(after.commands - before.commands) if after and before else 0,
        cdp_errors=(after.errors - before.errors) if after and before else 0,
        answer=verdict.answer if verdict is not None else None,
        isolation=isolation,
        notes=tuple(notes),
    )


async def _drive(
    task: Task,
    client: CdpClient,
    isolation: str,
    engine: str,
    base_url: str,
    out_dir: Path,
    run_id: str,
    attempt: int,
    seed: str | None,
    notes: list[str],
    hook: _TimedHook,
    grader: GraderAccess,
    mark: Mark,
) -> DriverVerdict:
    driver = DRIVERS.get(task.driver_kind)
    if driver is None:
        raise DriverUnavailable(f"no metewand driver for driver kind {task.driver_kind!r}")
    mark("page_create")
    page: PageTarget = await new_page_target(client, isolation, timeout=task.task_ms / 1000)
    ctx = AttemptContext(
        task,
        client,
        page.session_id,
        engine,
        base_url,
        str(out_dir),
        run_id,
        attempt,
        seed if seed is not None else attempt_seed(None, task.task_id, attempt),
        notes,
        grader,
        mark,
    )
    try:
        verdict = await driver(ctx)
        mark(None)  # the hook (the observer's end scan) is not the task's: between marks
        await hook.call(notes)
        return verdict
    finally:
        mark("page_close")
        # Shielded so a hard-kill cancellation still closes the page (and its context).
        notes += await asyncio.shield(_close_page(client, page))


class _TimedHook:
    """``before_cleanup`` with the wall it took, which the task's duration leaves out."""

    def __init__(self, callback: BeforeCleanup | None) -> None:
        self.callback = callback
        self.wall_s = 0.0

    async def call(self, notes: list[str]) -> None:
        if self.callback is None:
            return
        start = time.monotonic()
        try:
            result = self.callback()
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # a hook (e.g. the resource observer) never decides the outcome
            notes.append(f"before_cleanup failed: {type(exc).__name__}: {exc}")
        finally:
            self.wall_s = time.monotonic() - start


async def _close_page(client: CdpClient, page: PageTarget) -> list[str]:
    if not client.is_connected:
        return ["page not closed: connection lost"]
    return await close_target(client, page, timeout=CLEANUP_TIMEOUT_S)


__all__ = [
    "AttemptResult",
    "BeforeCleanup",
    "CdpStepsDriver",
    "attempt_seed",
    "run_task_attempt",
]
