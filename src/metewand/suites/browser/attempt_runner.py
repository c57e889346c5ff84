"""Run one planned attempt on a worker's engine: make sure the engine lives, give the attempt
its artifact dir and traffic counters, run it (``attempt.run_task_attempt``), build its row.

``RunHooks`` is the seam for resource profiling: it can put the engine into an accounting group
at launch (``preexec_for``) and observe each attempt (``attempt_started``, ``attempt_work_done``
once the task's work is done and before its page is closed, ``attempt_finished`` after cleanup);
measurement trouble there never changes a functional status.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metewand import canonical
from metewand.measure.accounting import TreeAccounting
from metewand.measure.quiet import CpuNs, QuietOutcome, wait_quiet
from metewand.runtime import rundir
from metewand.runtime.owned import OwnedJournal
from metewand.runtime.resource_record import peer_resources_record
from metewand.runtime.shared_run import SharedRunView
from metewand.runtime.store import RunStore, utc_now
from metewand.suites.browser.adapter_attempt import (
    NO_FIXTURE_REQUEST_NOTE,
    AdapterAttempt,
    engine_endpoint,
    is_adapter_task,
    run_adapter_attempt,
)
from metewand.suites.browser.adapter_server import AdapterRunner
from metewand.suites.browser.adapter_slot import SlotAdapters
from metewand.suites.browser.attempt import AttemptOutcome, attempt_seed, run_task_attempt
from metewand.suites.browser.classify import Classification
from metewand.suites.browser.driver_registry import FoundDriver
from metewand.suites.browser.drivers import grader_session
from metewand.suites.browser.engine_pool import EnginePool
from metewand.suites.browser.engine_process import EngineLaunchError, EngineProcess, PreexecFn
from metewand.suites.browser.fixtures import FixtureServer
from metewand.suites.browser.phase_marks import AttemptPhases
from metewand.suites.browser.rows import PlannedAttempt, base_row, not_run_row, outcome_row

if TYPE_CHECKING:
    from metewand.suites.browser.run_plan import Plan

ENGINE_LOG_TAIL_FILE = rundir.ATTEMPT_ENGINE_LOG_TAIL
# The server-side graders' full records (evidence with the expected answer), never served.
GRADER_EVIDENCE_FILE = rundir.ATTEMPT_GRADER_EVIDENCE


class RunHooks:
    """No-op hooks (the functional run); the resource profiler overrides them."""

    def preexec_for(self, worker: int, engine: str) -> PreexecFn | None:
        return None

    def attempt_started(self, planned: PlannedAttempt, process: EngineProcess, worker: int) -> Any:
        return None

    def attempt_work_done(self, token: Any) -> None:
        """End of the collection window. Called exactly once per attempt: before the page is
        closed when the task's work completed, else after the attempt returned. Never raises."""
        return None

    def attempt_finished(self, token: Any, artifact_dir: Path) -> dict[str, Any] | None:
        return None

    def tree_cpu(self, worker: int, engine: str, process: EngineProcess) -> CpuNs | None:
        """A reader of the engine tree's CPU time in ns, for the settle wait; None: no group."""
        return None

    def engine_group(
        self, worker: int, engine: str, process: EngineProcess
    ) -> TreeAccounting | None:
        """The engine's accounting group, for the attempt's phase marks; None: no group."""
        return None


_NO_OBSERVER = RunHooks()


class _CollectionWindow:
    """One attempt's collection window; ``close`` ends it (and the hooks' sampling) once."""

    def __init__(self, hooks: RunHooks, start: float) -> None:
        self.hooks = hooks
        self.start = start
        self.token: Any = None
        self.end: float | None = None

    def close(self) -> None:
        if self.end is not None:
            return
        try:
            self.hooks.attempt_work_done(self.token)
        finally:  # the window ends even if a hook broke its promise not to raise
            self.end = time.perf_counter()

    @property
    def wall_ms(self) -> float:
        assert self.end is not None
        return (self.end - self.start) * 1000


class AttemptRunner:
    def __init__(
        self, plan: Plan, store: RunStore | SharedRunView, pool: EnginePool, server: FixtureServer,
        base_url: str, hooks: RunHooks | None,
        identity_of: Callable[[str], dict[str, Any]] | None = None,
    ) -> None:  # fmt: skip
        """``identity_of``: an engine's recorded identity (default: the run manifest's; a Dask
        worker's suite gives the identity of its own host's binary)."""
        self.plan = plan
        self.store = store
        self.identity_of = identity_of or self._manifest_identity
        self.pool = pool
        self.server = server
        self.base_url = base_url
        self.hooks = hooks or RunHooks()
        # the slot's adapters (long-lived ones live until their engine is replaced or the slot
        # closes); their served stderr beside the slot's engine logs; each adapter process and
        # group in owned.jsonl, so a killed runner's stuck adapter is swept by --resume
        self.adapters = SlotAdapters(
            plan.config.adapter_mode,
            pool.log_dir,  # a Dask worker's pool names its own (they share the run directory)
            OwnedJournal(store.run_dir),
        )
        self._previous_task: dict[str, str] = {}  # engine -> task id of its last attempt here

    async def run(self, planned: PlannedAttempt) -> dict[str, Any]:
        config = self.plan.config
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
        config = self.plan.config
        key = planned.key
        assert process.ws_url is not None
        facts = self.pool.facts(planned.engine)
        with self.store.artifact_dir(key) as out_dir:
            self.server.traffic.begin_attempt(key)
            # The collection window: the same code path in a baseline (no scans) and a profiled
            # run, so their difference is the observer's cost (baseline/end scans included).
            # It ends when the task's work is done, before the page is closed: the end scan
            # then walks a live, idle renderer, not one whose address space is being torn down.
            context = self._run_context(planned, process)
            # An interleaved calibration's unprofiled twin: the same window, no sampler in it
            # (what a baseline run does); its settle wait still reads the engine's group.
            observer = self.hooks if planned.observed else _NO_OBSERVER
            window = _CollectionWindow(observer, time.perf_counter())
            window.token = observer.attempt_started(planned, process, self.pool.worker)
            started_at = utc_now()
            seed = attempt_seed(config.seed, planned.task.task_id, planned.attempt)
            session = grader_session(
                self.store.run_id, planned.task.task_id, planned.engine, planned.attempt, seed
            )
            self.server.context.grades.open(session)
            driver_block: dict[str, Any] | None = None
            phases = self._phases(planned, process)
            if is_adapter_task(planned.task):
                outcome, driver_block = await self._adapter_attempt(
                    planned, process, out_dir, seed, phases
                )
            else:
                outcome = await run_task_attempt(
                    planned.task, process.ws_url, planned.engine, self.base_url, out_dir,
                    config.isolation, run_id=self.store.run_id, attempt=planned.attempt,
                    seed=seed, engine_health=process.health, before_cleanup=window.close,
                    grader_token=self.server.context.grader_token, phases=phases,
                )  # fmt: skip
            finished_at = utc_now()
            if self._write_grader_evidence(session, out_dir):
                outcome.artifacts.append(GRADER_EVIDENCE_FILE)
            window.close()  # not reached before cleanup (failure, timeout, crash): end it now
            settle = await self._settle(process, planned.engine)
            resource = observer.attempt_finished(window.token, out_dir)
            span_ms = (time.perf_counter() - window.start) * 1000
            window_ms = window.wall_ms
            traffic = await self.server.traffic.end_attempt_settled(key)
            if not process.is_alive():
                tail = process.stderr_tail()
                (out_dir / ENGINE_LOG_TAIL_FILE).write_text(tail)
                outcome.artifacts.append(ENGINE_LOG_TAIL_FILE)
            (out_dir / rundir.ATTEMPT_OUTCOME).write_bytes(canonical.dumps(outcome.to_json()))
            files = [*outcome.artifacts, rundir.ATTEMPT_OUTCOME]
            if resource is not None and (out_dir / rundir.ATTEMPT_RESOURCE_SAMPLES).exists():
                files.append(rundir.ATTEMPT_RESOURCE_SAMPLES)
        artifacts = [f"{rundir.ARTIFACTS}/{key}/{name}" for name in files]
        row = outcome_row(base, outcome, started_at, finished_at, facts, artifacts)
        if driver_block is not None:
            row.update(driver_block)
        row["engine_provenance"] = self._provenance(planned.engine, process)
        row["run_context"] = context
        row["traffic"] = traffic.to_json()
        passed = driver_block is not None and row["status"] == "pass"
        if passed and traffic.available and traffic.app.requests == 0:
            row["notes"] = [*row["notes"], NO_FIXTURE_REQUEST_NOTE]  # the page was never loaded
        if phases is not None:  # metewand_browser_attempt_phases/1, beside the peer's fields
            row["phases"] = phases.to_json()
        if config.resource.profile != "off":
            row["collection_wall_ms"] = round(window_ms, 3)
            # the whole attempt as the run pays for it: window, cleanup, settle, CPU reading
            row["attempt_span_ms"] = round(span_ms, 3)
        if settle is not None:
            row["settle"] = settle.to_json()
        if resource is not None:
            resource["duration_ms"] = outcome.duration_ms
            resource["fixture_traffic"] = row["traffic"]
            # harness_scope (this process: driver, grader, fixture server) is kept apart
            row["harness_scope"] = resource.pop("harness_scope", None)
            # ours (measurement forms) beside the peer's layout (plain numbers + unavailable)
            row["resource_forms"] = resource
            row["resource"] = peer_resources_record(resource)
        return row

    def _phases(self, planned: PlannedAttempt, process: EngineProcess) -> AttemptPhases | None:
        """The attempt's phase marks (None: --no-phase-marks, or an interleaved calibration's
        unprofiled twin, which runs with no observer at all: it is the unobserved side of the
        pair, so the pair's difference holds the marks' cost as well as the sampler's). An
        engine without a group gets its harness marks and an engine record that says why."""
        if not self.plan.config.phase_marks or not planned.observed:
            return None
        granularity = "steps" if planned.task.driver_kind == "raw_cdp" else "probe"
        if is_adapter_task(planned.task):
            granularity = "adapter_run"
        group = self.hooks.engine_group(self.pool.worker, planned.engine, process)
        return AttemptPhases(group, granularity, concurrent=self.plan.config.jobs > 1)

    async def _adapter_attempt(
        self, planned: PlannedAttempt, process: EngineProcess, out_dir: Path, seed: str,
        phases: AttemptPhases | None,
    ) -> tuple[AttemptOutcome, dict[str, Any]]:  # fmt: skip
        """A driver-path task: its adapter drives the engine (see ``adapter_attempt``)."""
        ids = AdapterAttempt(
            self.store.run_id, planned.attempt, seed, self.base_url,
            self.server.context.grader_token,
        )  # fmt: skip
        endpoint = await engine_endpoint(planned.engine, process)

        async def runner_for(found: FoundDriver) -> tuple[AdapterRunner, str]:
            return await self.adapters.runner(
                found, planned.engine, process.generation, process.pid
            )

        return await run_adapter_attempt(
            planned.task, endpoint, out_dir, ids, process.health, runner_for, phases
        )

    def _write_grader_evidence(self, session: str, out_dir: Path) -> bool:
        records, dropped = self.server.context.grades.take(session)
        if not records and not dropped:
            return False
        document = {"session": session, "records": records, "records_not_kept": dropped}
        (out_dir / GRADER_EVIDENCE_FILE).write_bytes(canonical.dumps(document))
        return True

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
        identity = self.identity_of(engine)
        port = getattr(process, "port", None)
        return {
            "engine": engine,
            "binary": str(process.engine.binary),
            "binary_sha256": identity.get("binary_sha256"),
            "pid": process.pid,
            "browser_ws": process.ws_url,
            "http_endpoint": f"http://127.0.0.1:{port}" if port else None,
            "http_identity": dict(getattr(process, "json_version", {}) or {}),
            "launch_command": list(getattr(process, "argv", []) or []),
        }

    def _manifest_identity(self, engine: str) -> dict[str, Any]:
        return dict(self.store.manifest["data"].get("engines", {}).get(engine, {}))

    async def _settle(self, process: EngineProcess, engine: str) -> QuietOutcome | None:
        """Resource profiles: let the engine finish what closing the page set off (a renderer
        exit, a spare renderer forked) before the attempt's CPU is read and the next attempt
        starts. Outside the collection window, the same in baseline and profiled runs."""
        limit_ms = self.plan.config.resource.settle_limit_ms
        if self.plan.config.resource.profile == "off" or limit_ms <= 0 or process.pid is None:
            return None
        cpu_ns = self.hooks.tree_cpu(self.pool.worker, engine, process)
        return await wait_quiet(process.pid, limit_ms / 1000, cpu_ns=cpu_ns)
