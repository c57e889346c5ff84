"""One driver-path attempt: the task's steps through its driver's adapter process, then graded.

A task whose ``driver.kind`` is a registered driver path (``driver_registry.BY_TASK_KIND``) is
not driven by metewand's own CDP client: ``run_adapter`` starts the path's adapter (one process
per attempt, in its own accounting group) with the ``abb_scenario_adapter/1`` payload, and the
attempt is graded from what came back:

- the adapter's check rows (``observations.checks``, the contract's grading surface; for the
  ``script_reported`` grader they are the whole verdict), after making sure every check the task
  declares in ``driver.checks`` was reported (an adapter that drops one is not trusted);
- then, for a ``server_side`` grader, the saved ``answer`` posted to the fixture server's
  grader, whose checks are appended (both must pass).

No harness CDP connection is open while the adapter runs (an engine may serve one client at a
time, and the page is the adapter's to open and close), except on an engine that serves many
clients at once (Chrome), where the slot keeps an idle one for clearing the engine's state after
each attempt (``state_clear.KeptClears``). Whatever happens, the result is one
``AttemptResult`` whose driver fields (``row_fields``) say which path ran, its version, how the
adapter ended and what the adapter's own process tree cost (harness scope, apart from the
engine's). ``AdapterDriver`` is the attempt runner's ``AttemptDriver`` for every task a driver
path claims: its adapter served by the slot (long-lived) or started for the attempt.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from metewand import canonical
from metewand.runtime import rundir
from metewand.suites.browser import adapter_targets, classify, state_clear
from metewand.suites.browser.adapter_grade import grade_adapter_run, graded_view
from metewand.suites.browser.adapter_payload import (
    AttemptIds,
    EngineEndpoint,
    build_payload,
)
from metewand.suites.browser.adapter_row import ADAPTER_ISOLATION, adapter_isolation, driver_block
from metewand.suites.browser.adapter_server import (
    AdapterRunner,
    PerAttemptAdapter,
)
from metewand.suites.browser.adapters import DEADLINE_MARGIN_S, AdapterRun
from metewand.suites.browser.attempt_driver import (
    AttemptResult,
    DriverContext,
    jsonable,
    write_artifacts,
)
from metewand.suites.browser.checks import CheckResult
from metewand.suites.browser.classify import Classification
from metewand.suites.browser.driver_registry import (
    DriverMissing,
    DriverPath,
    FoundDriver,
    load_binding,
    path_for_driver,
    resolve_driver,
)
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.phase_marks import AttemptPhases, Mark, begin_marks
from metewand.suites.browser.probes import NO_GRADER_ACCESS, GraderAccess
from metewand.suites.browser.run_config import DEFAULT_DRIVER_ISOLATION
from metewand.suites.browser.tasks import Task

if TYPE_CHECKING:
    from metewand.suites.browser.rows import PlannedAttempt

ADAPTER_STDERR_FILE: Final = "adapter_stderr.log"
ADAPTER_RESULT_FILE: Final = "adapter_result.json"
TRACE_FILE: Final = rundir.ATTEMPT_CDP_LOG  # the adapter's own per-op trace, when it wrote one
CATALOG_FILE: Final = Path("config") / "browser_driver_bindings.json"
# adapter endings after which it was killed, its pages possibly still open in the engine
BROKEN_OUTCOMES: Final = frozenset({"adapter_crash", "adapter_hang", "adapter_garbage"})

EngineHealth = Callable[..., Awaitable[str]]  # (suspect, answered_ns=None) -> health
RunnerFor = Callable[[FoundDriver], Awaitable[tuple[AdapterRunner, str]]]


def is_adapter_task(task: Task) -> bool:
    return path_for_driver(task.driver) is not None


def driver_path_of(task: Task) -> DriverPath | None:
    return path_for_driver(task.driver)


class AdapterDriver:
    """A driver path's adapter drives the task; its pages are its own (``isolation`` does not
    reach it), so the observers' collection window ends after it, with the grade."""

    def handles(self, task: Task) -> bool:
        return is_adapter_task(task)

    def phase_granularity(self, task: Task) -> str:
        return "adapter_run"  # ``driver_ops`` once the adapter marks its ops (op_marks)

    async def run(
        self, planned: PlannedAttempt, engine: EngineProcess, ctx: DriverContext
    ) -> AttemptResult:
        ids = AdapterAttempt(
            ctx.run_id,
            planned.attempt,
            ctx.seed,
            ctx.fixture_base_url,
            ctx.grader,
            ctx.score_mode,
            ctx.driver_isolation,
            engine.engine.spec.state_per_connection,
            engine.engine.spec.serves_many_clients,
        )
        endpoint = await engine_endpoint(planned.engine, engine)
        adapters = ctx.adapters
        runner_for: RunnerFor | None = None
        if adapters is not None:

            async def runner_for(found: FoundDriver) -> tuple[AdapterRunner, str]:
                return await adapters.runner(found, planned.engine, engine.generation, engine.pid)

        return await run_adapter_attempt(
            planned.task,
            endpoint,
            ctx.out_dir,
            ids,
            engine.health,
            runner_for,
            ctx.phases,
            ctx.resolve_driver or resolve_driver,
            ctx.known_targets,
            ctx.state_clears,
        )


@dataclass(frozen=True)
class AdapterAttempt:
    """One attempt's identity and surroundings (what ``run_task_attempt`` gets as keywords)."""

    run_id: str
    attempt: int
    seed: str
    fixture_base_url: str
    grader: GraderAccess = NO_GRADER_ACCESS
    # "peer-compatible": an L1 server-graded row is the server's verdict alone (the peer's
    # historical grading); "independent" (default): every declared check must pass as well
    score_mode: str = "independent"
    isolation: str = DEFAULT_DRIVER_ISOLATION  # --driver-isolation
    # the engine starts each CDP connection with no state (EngineSpec.state_per_connection)
    state_per_connection: bool = False
    # the engine serves many CDP clients at once (EngineSpec.serves_many_clients)
    serves_many_clients: bool = False

    @property
    def page_place(self) -> str:
        """Where the adapter is asked to open its pages: ``cleared`` asks for the default
        context, and the harness clears it after the attempt."""
        return "shared" if self.isolation == "cleared" else self.isolation

    def session(self, task_id: str, engine: str) -> str:
        return f"{self.run_id}-{task_id}-{engine}-{self.attempt}-{self.seed}"


async def engine_endpoint(name: str, process: EngineProcess) -> EngineEndpoint:
    """What the adapter's binding gate compares against: the engine's HTTP identity (read at
    launch) and its live ``Browser.getVersion`` product (read once per engine generation)."""
    assert process.ws_url is not None and process.port is not None
    version = await process.cdp_version()
    identity = process.json_version
    return EngineEndpoint(
        name,
        process.ws_url,
        process.port,
        str(identity.get("Browser", "")),
        str(identity.get("User-Agent", "")),
        str(version.get("product", "")),
    )


@functools.lru_cache(maxsize=128)
def _binding(catalog: str, engine: str, key: str) -> str | None:
    """The catalog's binding as JSON text (cached: the catalog is read once per pair)."""
    try:
        found = load_binding(Path(catalog), engine, key)
    except (OSError, ValueError, KeyError):
        return None
    return json.dumps(found) if found is not None else None


def binding_for(task: Task, engine: str, key: str) -> dict[str, Any] | None:
    text = _binding(str(task.root / CATALOG_FILE), engine, key)
    return json.loads(text) if text is not None else None


async def run_adapter_attempt(
    task: Task,
    endpoint: EngineEndpoint,
    out_dir: Path,
    ids: AdapterAttempt,
    engine_health: EngineHealth | None = None,
    runner_for: RunnerFor | None = None,
    phases: AttemptPhases | None = None,
    resolve: Callable[[str], FoundDriver | DriverMissing] = resolve_driver,
    known_targets: adapter_targets.KnownTargets | None = None,
    clears: state_clear.KeptClears | None = None,
) -> AttemptResult:
    """The attempt's result, the row's driver fields in its ``row_fields``; never raises for
    anything the adapter, the engine or the grader does. ``runner_for`` gives the slot's runner
    for the driver (a long-lived one) and its mode; without it the adapter runs per attempt.
    ``phases``: the page snapshot, the adapter's run (split into its driver ops where the
    adapter marks them over its mark channel, ``op_marks``), the cleanup of pages it left, the
    grade. ``resolve``: where the driver path's adapter is found (the run's, resolved once).
    ``known_targets``: the slot's list of the engine's targets, carried from a clean attempt
    (None: listed before every attempt). ``clears``: the slot's kept connections for clearing
    the engine's state after the attempt (None: a connection of its own for each clear)."""
    mark = begin_marks(phases)
    path = path_for_driver(task.driver)
    assert path is not None, "run_adapter_attempt is for adapter tasks only"
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    found = resolve(path.key)
    binding = binding_for(task, endpoint.name, path.catalog_key)
    drove = _Drove()
    checks: list[CheckResult] = []
    answer: Any = None
    if isinstance(found, DriverMissing):
        verdict = classify.driver_unavailable(path.key, found.detail)
    elif binding is None:
        verdict = classify.binding_missing(endpoint.name, path.key)
    else:
        payload = _payload(task, path, endpoint, ids, out_dir, binding)
        slot = _SlotState(runner_for, known_targets, clears)
        drove = await _drive(path, found, payload, endpoint, ids, out_dir, phases, mark, slot)
        assert drove.run is not None
        mark("grade")
        verdict, checks, answer = await grade_adapter_run(task, drove.run, endpoint.name, ids)
    if phases is not None:
        phases.finish()
    duration_ms = int((time.monotonic() - started) * 1000)
    run = drove.run
    if run is not None and engine_health is not None:
        verdict = await _engine_checked(verdict, engine_health, run, drove.ended_ns)
    metrics = _metrics(run)
    isolation = drove.isolation()
    result = AttemptResult.of(
        verdict,
        checks=tuple(c.to_json() for c in checks),
        duration_ms=duration_ms,
        cdp_wait_ms=None,
        cdp_commands=metrics.get("cdp_call_count"),
        cdp_errors=metrics.get("cdp_error_count"),
        answer=answer,
        isolation=isolation,
        row_fields={
            "isolation": isolation,  # over the base row's (--isolation, for raw CDP tasks)
            **driver_block(
                path, found, run, drove.runner, drove.mode, drove.cleanup, ids.isolation
            ),
            "state_clear": drove.cleared.to_json() if drove.cleared is not None else None,
            # checks the adapter reported that the task does not declare: shown, never graded
            "adapter_undeclared_checks": graded_view(task.data, run)[1] if run is not None else [],
        },
    )
    return write_artifacts(out_dir, result, _observations(run), _adapter_files(out_dir, run))


@dataclass(frozen=True)
class _SlotState:
    """What the slot carries from one adapter attempt to the next."""

    runner_for: RunnerFor | None
    known_targets: adapter_targets.KnownTargets | None
    clears: state_clear.KeptClears | None


@dataclass
class _Drove:
    """What driving the adapter left: its run (None: none started), the runner and its mode,
    the pages closed after it, the engine's state cleared after it, when it ended."""

    run: AdapterRun | None = None
    runner: AdapterRunner | None = None
    mode: str | None = None
    cleanup: adapter_targets.TargetCleanup | None = None
    cleared: state_clear.StateClear | None = None
    ended_ns: int = 0
    said: str = ADAPTER_ISOLATION  # where the adapter says its pages were

    def isolation(self) -> str:
        """Where the attempt's pages were: the adapter's word, ``cleared`` once a default
        context it used was cleared after it."""
        done = self.cleared is not None and self.cleared.cleared
        return "cleared" if self.said == "shared" and done else self.said


async def _drive(
    path: DriverPath,
    found: FoundDriver,
    payload: dict[str, Any],
    endpoint: EngineEndpoint,
    ids: AdapterAttempt,
    out_dir: Path,
    phases: AttemptPhases | None,
    mark: Mark,
    slot: _SlotState,
) -> _Drove:
    """The adapter's run, with the engine's targets listed before it, the pages a broken one
    left closed after it, and the engine's state cleared after it."""
    drove = _Drove()
    drove.runner, drove.mode = await _runner(path, found, slot.runner_for)
    targets = slot.known_targets
    if targets is None:
        targets = adapter_targets.KnownTargets()
    before, age = await _targets_before(targets, endpoint, mark)
    mark("adapter_run")
    # with marks, the adapter's own marks (op_marks) split its run into its driver ops
    run = drove.run = await drove.runner.run(
        payload,
        payload["task_timeout_ms"] / 1000 + DEADLINE_MARGIN_S,
        out_dir / ADAPTER_STDERR_FILE,
        phases.sink() if phases is not None else None,
    )
    drove.ended_ns = time.monotonic_ns()
    if phases is not None and run.op_marks is not None:
        phases.took_driver_marks(run.op_marks)
    drove.cleanup = await _targets_after(targets, endpoint, run, (before, age), mark)
    drove.said = adapter_isolation(run)
    drove.cleared = await _state_after(drove.said, ids, endpoint, mark, slot.clears)
    return drove


async def _targets_before(
    targets: adapter_targets.KnownTargets, endpoint: EngineEndpoint, mark: Mark
) -> tuple[adapter_targets.TargetSnapshot, int]:
    """The engine's targets before the adapter (a phase of its own only when listed now) and
    how many attempts old the list is."""
    if not targets.carries(endpoint.name, endpoint.browser_ws):
        mark("target_snapshot")
    return await targets.before(endpoint.name, endpoint.browser_ws)


async def _targets_after(
    targets: adapter_targets.KnownTargets,
    endpoint: EngineEndpoint,
    run: AdapterRun,
    listed: tuple[adapter_targets.TargetSnapshot, int],
    mark: Mark,
) -> adapter_targets.TargetCleanup | None:
    """The pages a broken adapter left, closed; the list carried on when it ended clean."""
    before, age = listed
    cleanup = None
    if run.outcome in BROKEN_OUTCOMES:
        # killed before it could close its pages: they must not run on into the next task
        mark("target_cleanup")
        cleanup = await adapter_targets.close_new_pages(endpoint.browser_ws, before, age)
    targets.after(endpoint.name, endpoint.browser_ws, before, age, _answered_ok(run))
    return cleanup


async def _state_after(
    said: str,
    ids: AdapterAttempt,
    endpoint: EngineEndpoint,
    mark: Mark,
    clears: state_clear.KeptClears | None,
) -> state_clear.StateClear | None:
    """The engine's cookies and the fixture origins' storage cleared after an attempt whose
    pages may have been in the default context, unless the run asked for that to be shared
    (state_clear). ``said``: where the adapter says its pages were; one that used a context of
    its own left nothing behind."""
    if ids.isolation == "shared" or said == "context":
        return None
    if ids.state_per_connection:
        return state_clear.per_connection(endpoint.name)
    mark("state_clear")
    origins = state_clear.fixture_origins(ids.fixture_base_url)
    if clears is not None and ids.serves_many_clients:
        return await clears.clear(endpoint.browser_ws, origins)
    return await state_clear.clear_state(endpoint.browser_ws, origins)


async def _engine_checked(
    verdict: Classification, engine_health: EngineHealth, run: AdapterRun, ended_ns: int
) -> Classification:
    """The verdict once the engine's health after the adapter is known (an adapter may have
    taken the engine down with it: that is charged to this attempt)."""
    return classify.promote_engine_trouble(
        verdict, await _engine_after(engine_health, run, ended_ns)
    )


async def _engine_after(engine_health: EngineHealth, run: AdapterRun, ended_ns: int) -> str:
    """The engine's health after the adapter. A result that says ``ok`` is the adapter's word
    that every op it ran, its page's close the last, was answered by the engine just now: that
    is the evidence the raw-CDP path takes from its closing reply, so the endpoint is not asked
    again (a /json/version request: on Chrome most of the wall between two attempts,
    benchmarks/README.md "after four cuts"); the process must still be alive. Any other ending
    asks the endpoint, and one without a result waits out the suspect's grace."""
    if _answered_ok(run):
        return await engine_health(False, ended_ns)
    return await engine_health(run.outcome != "result")


def _answered_ok(run: AdapterRun) -> bool:
    """The adapter's result says ok: every op it ran, its pages' close the last, was answered."""
    return run.outcome == "result" and (run.result or {}).get("ok") is True


def _payload(
    task: Task,
    path: DriverPath,
    endpoint: EngineEndpoint,
    ids: AdapterAttempt,
    out_dir: Path,
    binding: dict[str, Any],
) -> dict[str, Any]:
    """What the adapter is sent for this attempt (the task bound to this engine and attempt)."""
    return build_payload(
        task.data,
        path.key,
        endpoint,
        ids.fixture_base_url,
        AttemptIds(ids.run_id, ids.attempt, ids.seed, str(out_dir), ids.page_place),
        binding,
    )


async def _runner(
    path: DriverPath, found: FoundDriver, runner_for: RunnerFor | None
) -> tuple[AdapterRunner, str]:
    """The runner that serves this attempt and its mode: the slot's (a long-lived adapter) when
    there is one, else a process of the adapter for this attempt alone."""
    if runner_for is not None:
        return await runner_for(found)
    return PerAttemptAdapter(found.command, f"adapter-{path.key}"), "per_attempt"


def _metrics(run: AdapterRun | None) -> dict[str, int]:
    """The adapter's own counters (plain integers only; a missing one stays missing)."""
    metrics = (run.result or {}).get("metrics") if run is not None else None
    if not isinstance(metrics, Mapping):
        return {}
    return {k: v for k, v in metrics.items() if isinstance(v, int) and not isinstance(v, bool)}


def _observations(run: AdapterRun | None) -> Any:
    return (run.result or {}).get("observations") if run is not None else None


def _adapter_files(out_dir: Path, run: AdapterRun | None) -> list[tuple[str, bytes | None]]:
    """The adapter's files: its stderr and its per-op trace (written by the adapter, listed
    here) and its result line, as the harness parsed it."""
    if run is None:
        return []
    files: list[tuple[str, bytes | None]] = [(ADAPTER_STDERR_FILE, None)]
    if run.result is not None:
        files.append((ADAPTER_RESULT_FILE, canonical.dumps(jsonable(run.result))))
    if (out_dir / TRACE_FILE).is_file():
        files.append((TRACE_FILE, None))
    return files
