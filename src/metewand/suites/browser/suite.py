"""The browser suite as the runtime sees it (``runtime.suite``): rounds, engine slots, rows.

A unit is one round: one task-attempt on every selected engine, in the balanced order of the
plan (``runtime.schedule``), minus the engines whose row the run already holds (a round cut by
a kill runs only the rest on resume). A slot is an engine pool and a fixture server living on an
event loop thread of their own, so the executor stays synchronous while the attempts, CDP and
the server are asyncio; its engines are launched on first use and reused by every round the slot
runs, and its teardown report lands in the manifest (``teardown["worker-N"]``).

An engine that was not found gives its ``not_run`` row without a launch. The resource profiler's
hooks see every launch (``preexec_for``) and attempt; its cold starts run in ``prepare``, before
any slot opens, on a run that has no row yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from metewand.runtime import rundir
from metewand.runtime.store import RunStore, utc_now
from metewand.runtime.suite import Row, Unit, UnitEvents
from metewand.suites.browser import classify, peer_manifest
from metewand.suites.browser.attempt_runner import AttemptRunner, RunHooks
from metewand.suites.browser.engine_pool import EnginePool
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.fixtures import FixtureServer
from metewand.suites.browser.leftovers import kill_leftovers
from metewand.suites.browser.profiler import ResourceProfiler
from metewand.suites.browser.rows import PlannedAttempt, base_row, not_run_row
from metewand.suites.browser.run_plan import Plan

T = TypeVar("T")


class BrowserSlot:
    """An engine pool and a fixture server, served by one event loop on its own thread."""

    def __init__(self, suite: BrowserSuite, index: int) -> None:
        self.suite = suite
        self.index = index
        self._task: asyncio.Task[Any] | None = None
        self._stopping = False
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name=f"mw-slot-loop-{index}", daemon=True
        )
        self._thread.start()
        plan, store = suite.plan, suite.store
        self.pool = EnginePool(
            plan.available, store.run_dir, store.run_id, index, suite.on_launch,
            suite.hooks.preexec_for,
        )  # fmt: skip
        self.server = FixtureServer(plan.corpus.fixtures_dir, harness_only_graders=True)
        self.runner: AttemptRunner | None = None
        try:
            base_url = self._call(self.server.start(), cancellable=False)
        except BaseException:
            self._stop_loop()
            raise
        self.runner = AttemptRunner(plan, store, self.pool, self.server, base_url, suite.hooks)

    def attempt(self, planned: PlannedAttempt) -> Row:
        """Run one attempt on this slot's loop; an interrupt cancels it (no row, no artifacts)."""
        assert self.runner is not None
        return self._call(self.runner.run(planned))

    @property
    def stopping(self) -> bool:
        return self._stopping

    def interrupt(self) -> None:
        """From any thread: cancel the attempt in flight and refuse the next."""
        self._stopping = True
        with contextlib.suppress(RuntimeError):  # its loop closed already: nothing in flight
            self.loop.call_soon_threadsafe(self._cancel_current)

    def close(self) -> None:
        """Stop the engines (their teardown report goes to the suite) and the server."""
        try:
            if self.runner is not None:  # served adapters end before the engines they drive
                self._call(self.runner.adapters.close_all(), cancellable=False)
            reports = self._call(self.pool.stop_all(), cancellable=False)
            self.suite.teardown_reports[f"worker-{self.index}"] = reports
            self._call(self.server.stop(), cancellable=False)
        finally:
            self._stop_loop()

    def _call(self, coro: Coroutine[Any, Any, T], cancellable: bool = True) -> T:
        future = asyncio.run_coroutine_threadsafe(self._tracked(coro, cancellable), self.loop)
        # Waits until the coroutine has really ended, also when cancelled: the attempt's
        # staging dir is gone before the slot moves on.
        return future.result()

    async def _tracked(self, coro: Coroutine[Any, Any, T], cancellable: bool) -> T:
        if cancellable:
            if self._stopping:
                coro.close()
                raise asyncio.CancelledError
            self._task = asyncio.current_task()
        try:
            return await coro
        finally:
            if cancellable:
                self._task = None

    def _cancel_current(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class BrowserSuite:
    kind = "browser"

    def __init__(
        self, plan: Plan, store: RunStore, profiler: ResourceProfiler, hooks: RunHooks
    ) -> None:
        self.plan, self.store, self.profiler, self.hooks = plan, store, profiler, hooks
        self.teardown_reports: dict[str, Any] = {}
        self._slots: list[BrowserSlot] = []
        self._lock = threading.Lock()  # slots open, and identities land, one at a time
        self._identities: dict[str, Any] = dict(store.manifest["data"].get("engines", {}))
        self._peer_engines: dict[str, Any] = dict(store.manifest.get("engines") or {})
        self._by_key = {planned.key: planned for planned in plan.attempts}

    # -- the protocol -----------------------------------------------------------------------

    def units(self) -> list[Unit]:
        return rounds(self.plan, self.store.finished_keys())

    def prepare(self) -> None:
        """Cold-start samples of every engine, once per run, before any warm attempt."""
        if isinstance(self.hooks, ResourceProfiler) and not self.store.finished_keys():
            asyncio.run(self.hooks.cold_starts(self.plan.available))

    def open_slot(self, slot_id: str) -> BrowserSlot:
        with self._lock:
            slot = BrowserSlot(self, len(self._slots))
            self._slots.append(slot)
        return slot

    def run_unit(self, slot: Any, unit: Unit, events: UnitEvents | None = None) -> list[Row]:
        assert isinstance(slot, BrowserSlot)
        rows = []
        for key in unit.keys:
            if slot.stopping:
                break
            planned = self._by_key[key]
            if events is not None:
                events.attempt_started(planned.label)
            row = self._not_run(planned) or slot.attempt(planned)
            rows.append(row)
            if events is not None:
                events.attempt_finished(row)
        return rows

    def interrupt(self) -> None:
        with self._lock:
            slots = list(self._slots)
        for slot in slots:
            slot.interrupt()

    def teardown(self) -> None:
        self.store.update_manifest({"teardown": self.teardown_reports})
        kill_leftovers(self.store.run_dir, self.store.run_id)
        self.profiler.close()

    def finish(self, completed: bool) -> None:
        """The peer's completion fields and the run's resource provenance, from the rows."""
        finish_manifest(self.store, "completed" if completed else "interrupted")

    # -- engines ----------------------------------------------------------------------------

    async def on_launch(self, engine: str, process: EngineProcess) -> None:
        """An engine's identity (binary hash, version) goes to the manifest at its first launch."""
        if "binary_sha256" in self._identities.get(engine, {}):
            return
        identity = (await process.identity()).to_json()
        with self._lock:
            self._identities[engine] = {"found": True, **identity}
            self.store.update_manifest({"engines": self._identities})
            self._peer_engines[engine] = peer_manifest.engine_fields(identity)
            self.store.update_top_level({"engines": self._peer_engines})

    def _not_run(self, planned: PlannedAttempt) -> Row | None:
        missing = self.plan.missing.get(planned.engine)
        if missing is None:
            return None
        config = self.plan.config
        base = base_row(self.store.run_id, planned, config.isolation, config.seed)
        verdict = classify.engine_binary_missing(planned.engine, missing.detail)
        return not_run_row(base, verdict, utc_now(), {})


def rounds(plan: Plan, done: set[str]) -> list[Unit]:
    """The plan's rounds in planned order, each without the engines already done."""
    by_round: dict[int, list[str]] = {}
    for planned in plan.attempts:
        if planned.key not in done:
            by_round.setdefault(planned.round, []).append(planned.key)
    return [Unit(tuple(keys), {"round": index}) for index, keys in by_round.items()]


def finish_manifest(store: RunStore, status: str) -> None:
    """The peer's completion fields and the run's resource provenance, from the rows."""
    host_summary = rundir.read_json(store.run_dir / rundir.HOST_SUMMARY)
    block = store.manifest.get("host_telemetry")
    fields = peer_manifest.finish_fields(
        store.rows(), status, utc_now(), block if isinstance(block, dict) else {}, host_summary
    )
    store.update_top_level(fields)
