"""Run one planned attempt on a worker's engine: make sure the engine lives, give the attempt
its artifact dir, let its driver run it among its observers, build its row once.

The runner knows no driver and no observer by name (``attempt_registry`` lists them). One
attempt: the engine's run context; the observers begin; the grader session opens; the first
driver that takes the task runs it; the server-side graders' evidence is kept; the observers
close their collection window (unless the driver did before the page closed), stop and render
their blocks; the engine's log tail is kept when it died; ``outcome.json``; then
``rows.attempt_row`` builds the whole row, which is returned as built (nothing patches it).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metewand import canonical
from metewand.measure.clock import utc_now
from metewand.runtime import rundir
from metewand.runtime.owned import OwnedJournal
from metewand.runtime.shared_run import SharedRunView
from metewand.runtime.store import RunStore
from metewand.suites.browser.adapter_slot import SlotAdapters
from metewand.suites.browser.adapter_targets import KnownTargets
from metewand.suites.browser.attempt_driver import (
    AttemptDriver,
    AttemptResult,
    DriverContext,
    attempt_seed,
)
from metewand.suites.browser.attempt_registry import AttemptRegistry
from metewand.suites.browser.classify import Classification
from metewand.suites.browser.driver_registry import resolve_driver
from metewand.suites.browser.drivers import grader_session
from metewand.suites.browser.engine_pool import EnginePool
from metewand.suites.browser.engine_process import EngineLaunchError, EngineProcess
from metewand.suites.browser.fixtures import FixtureServer
from metewand.suites.browser.fixtures.endpoints.harness import grade_in_process
from metewand.suites.browser.observers.base import EngineGroups, Observers, ObserverSetup
from metewand.suites.browser.probes import GraderAccess, grader_client
from metewand.suites.browser.rows import PlannedAttempt, attempt_row, base_row, not_run_row
from metewand.suites.browser.state_clear import KeptClears

if TYPE_CHECKING:
    import aiohttp

    from metewand.suites.browser.run_plan import Plan

ENGINE_LOG_TAIL_FILE = rundir.ATTEMPT_ENGINE_LOG_TAIL
# The server-side graders' full records (evidence with the expected answer), never served.
GRADER_EVIDENCE_FILE = rundir.ATTEMPT_GRADER_EVIDENCE


class AttemptRunner:
    def __init__(
        self,
        plan: Plan,
        store: RunStore | SharedRunView,
        pool: EnginePool,
        server: FixtureServer,
        base_url: str,
        groups: EngineGroups | None,
        identity_of: Callable[[str], dict[str, Any]] | None = None,
        registry: AttemptRegistry | None = None,
    ) -> None:
        """``identity_of``: an engine's recorded identity (default: the run manifest's; a Dask
        worker's suite gives the identity of its own host's binary). ``groups``: the engines'
        accounting groups (the resource profiler's; None: none). ``registry``: the drivers and
        observers (default: ``attempt_registry``'s)."""
        self.plan = plan
        self.store = store
        self.identity_of = identity_of or self._manifest_identity
        self.pool = pool
        self.server = server
        self.base_url = base_url
        self.groups = groups or EngineGroups()
        self.registry = registry or AttemptRegistry()
        # the slot's adapters (long-lived ones live until their engine is replaced or the slot
        # closes); their served stderr beside the slot's engine logs; each adapter process and
        # group in owned.jsonl, so a killed runner's stuck adapter is swept by --resume
        self.adapters = SlotAdapters(
            plan.config.adapter_mode,
            pool.log_dir,  # a Dask worker's pool names its own (they share the run directory)
            OwnedJournal(store.run_dir),
            store.run_dir / rundir.STAGING,  # where artifact dirs are staged: one file system
        )
        self._previous_task: dict[str, str] = {}  # engine -> task id of its last attempt here
        # engine -> (launch id, its recorded identity): looked up once per launched process
        self._identities: dict[str, tuple[str | None, dict[str, Any]]] = {}
        # the slot's HTTP session (made in its loop; close()): the graders' connection, kept open
        # across attempts
        self._http: aiohttp.ClientSession | None = None
        # each driver path's adapter, looked up once for the slot's run (as its provenance was)
        self._resolve_driver = functools.cache(resolve_driver)
        # each engine's targets, carried from one clean adapter attempt to the next
        self._known_targets = KnownTargets()
        # each engine process's kept connection for clearing its state after an adapter attempt
        self._state_clears = KeptClears()

    async def close(self) -> None:
        """End the slot's served adapters (before the engines they drive) and the slot's HTTP
        session (the graders' kept connection)."""
        try:
            await self.adapters.close_all()
            await self._state_clears.close()
        finally:
            http, self._http = self._http, None
            if http is not None:
                await http.close()

    async def run(self, planned: PlannedAttempt) -> dict[str, Any]:
        config = self.plan.config
        if self._http is None:
            self._http = grader_client()
        base = base_row(self.store.run_id, planned, config.isolation, config.seed)
        try:
            process = await self.pool.ready(planned.engine)
        except EngineLaunchError as exc:
            verdict = Classification(
                "crash", "infra", "engine_process", f"engine_launch_failed: {exc}"
            )
            return not_run_row(base, verdict, utc_now(), self.pool.facts(planned.engine))
        return await self._attempt(planned, base, process)

    async def _attempt(
        self, planned: PlannedAttempt, base: dict[str, Any], process: EngineProcess
    ) -> dict[str, Any]:
        assert process.ws_url is not None
        facts = self.pool.facts(planned.engine)
        context = self._run_context(planned, process)
        driver = self.registry.driver_for(planned.task)
        with self.store.artifact_dir(planned.key) as out_dir:
            setup = self._setup(planned, process, driver, out_dir)
            observers = Observers.made(self.registry.observers, setup)
            observers.begin()
            started_at = utc_now()
            ctx = self._driver_context(planned, out_dir, observers)
            session = grader_session(
                self.store.run_id, planned.task.task_id, planned.engine, planned.attempt, ctx.seed
            )
            self.server.context.grades.open(session)
            result = await driver.run(planned, process, ctx)
            finished_at = utc_now()
            result = self._with_grader_evidence(result, session, out_dir)
            observers.work_done()  # not reached before cleanup (failure, timeout, an adapter)
            observed = await observers.end(result)
            result = self._with_engine_log_tail(result, process, out_dir)
            (out_dir / rundir.ATTEMPT_OUTCOME).write_bytes(canonical.dumps(result.to_json()))
        return attempt_row(
            base,
            result,
            observed,
            started_at=started_at,
            finished_at=finished_at,
            engine_process=facts,
            engine_provenance=self._provenance(planned.engine, process),
            run_context=context,
        )

    def _setup(
        self, planned: PlannedAttempt, process: EngineProcess, driver: AttemptDriver, out_dir: Path
    ) -> ObserverSetup:
        return ObserverSetup(
            planned=planned,
            process=process,
            worker=self.pool.worker,
            config=self.plan.config,
            groups=self.groups,
            traffic=self.server.traffic,
            driver=driver,
            out_dir=out_dir,
        )

    def _driver_context(
        self, planned: PlannedAttempt, out_dir: Path, observers: Observers
    ) -> DriverContext:
        config = self.plan.config
        return DriverContext(
            run_id=self.store.run_id,
            seed=attempt_seed(config.seed, planned.task.task_id, planned.attempt),
            fixture_base_url=self.base_url,
            grader=GraderAccess(
                self.server.context.grader_token,
                self._http,
                functools.partial(grade_in_process, self.server.context),
            ),
            isolation=config.isolation,
            out_dir=out_dir,
            phases=observers.marks,
            work_done=observers.work_done,
            adapters=self.adapters,
            resolve_driver=self._resolve_driver,
            score_mode=config.score_mode,
            known_targets=self._known_targets,
            state_clears=self._state_clears,
            driver_isolation=config.driver_isolation,
        )

    def _with_grader_evidence(
        self, result: AttemptResult, session: str, out_dir: Path
    ) -> AttemptResult:
        records, dropped = self.server.context.grades.take(session)
        if not records and not dropped:
            return result
        document = {"session": session, "records": records, "records_not_kept": dropped}
        (out_dir / GRADER_EVIDENCE_FILE).write_bytes(canonical.dumps(document))
        return result.with_artifacts(GRADER_EVIDENCE_FILE)

    @staticmethod
    def _with_engine_log_tail(
        result: AttemptResult, process: EngineProcess, out_dir: Path
    ) -> AttemptResult:
        """A dead engine's last words, beside the attempt that met its death."""
        if process.is_alive():
            return result
        (out_dir / ENGINE_LOG_TAIL_FILE).write_text(process.stderr_tail())
        return result.with_artifacts(ENGINE_LOG_TAIL_FILE)

    def _run_context(self, planned: PlannedAttempt, process: EngineProcess) -> dict[str, Any]:
        """The peer's ``run_context``: which engine process ran the attempt, after which task."""
        context = {
            "browser_generation": process.generation,
            "browser_pid": process.pid,
            "prev_task_id": self._previous_task.get(planned.engine),
            "started_monotonic_ms": int(time.monotonic() * 1000),
            "worker_slot": self.pool.worker + 1,  # the peer numbers its workers from 1
        }
        self._previous_task[planned.engine] = planned.task.task_id
        return context

    def _provenance(self, engine: str, process: EngineProcess) -> dict[str, Any]:
        """The peer's ``engine_provenance``: binary, its sha256 (hashed once at launch and kept
        in the manifest), the endpoint and the command line the attempt ran against."""
        identity = self._identity(engine, process)
        port = getattr(process, "port", None)
        return {
            "engine": engine,
            "binary": str(process.engine.binary),
            "binary_sha256": identity.get("binary_sha256"),
            "pid": process.pid,
            "browser_ws": process.ws_url,
            "http_endpoint": f"http://127.0.0.1:{port}" if port else None,
            "http_identity": dict(getattr(process, "json_version", {}) or {}),
            "launch_command": _without_private_dirs(process),
        }

    def _identity(self, engine: str, process: EngineProcess) -> dict[str, Any]:
        """The engine's recorded identity, asked again only when a new process was launched
        (the manifest is on disk: reading it for every attempt cost more than the attempt's
        own row)."""
        launch = getattr(process, "launch_id", None)
        known = self._identities.get(engine)
        if known is None or known[0] != launch or launch is None:
            known = (launch, self.identity_of(engine))
            self._identities[engine] = known
        return known[1]

    def _manifest_identity(self, engine: str) -> dict[str, Any]:
        return dict(self.store.manifest["data"].get("engines", {}).get(engine, {}))


def _without_private_dirs(process: Any) -> list[str]:
    """The engine's argv with its private temporary root (profile, TMPDIR) named, not its host
    path: a row carries no absolute path of the host's temporary files."""
    argv = [str(a) for a in (getattr(process, "argv", []) or [])]
    for root in getattr(process, "private_dirs", []) or []:
        argv = [a.replace(root, "<private-dir>") for a in argv]
    return argv
