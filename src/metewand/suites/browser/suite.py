"""The browser suite as the runtime sees it (``runtime.suite``): rounds, engine slots, rows.

A unit is one round: one task-attempt on every selected engine, in the balanced order of the
plan (``runtime.schedule``), minus the engines whose row the run already holds (a round cut by
a kill runs only the rest on resume). A slot is an engine pool and a fixture server living on an
event loop thread of their own, so the executor stays synchronous while the attempts, CDP and
the server are asyncio; its engines are launched on first use and reused by every round the slot
runs, and its teardown report lands in the manifest (``teardown["worker-N"]``). A local run's
slot runs its rounds on that loop thread from one attempt to the next (``run_units``), its
rows handed to the run store from there.

An engine that was not found gives its ``not_run`` row without a launch. The resource profiler's
accounting groups see every launch (``launch_group``) and its observers every attempt
(``attempt_registry``); its cold starts run in ``prepare``, before any slot opens, on a run that
has no row yet.

On Dask (``from_ref``) a worker rebuilds the suite from the run's config and runs rounds only:
the engine identities its slot hashes (per host: every worker hashes its own binaries) and its
slot's teardown report are kept as facts (``take_facts``) that travel back with the round's
rows, and the client's suite writes them into the manifest (``merge_facts``: the first identity
of each engine under ``engines``, every host's under ``engines_by_host``). A worker's engine logs
go to ``engine_logs/dask-<worker name>``.

A profiled run on Dask profiles on every host: each worker's suite has its own
``ResourceProfiler`` (its engines' accounting groups, under the worker's own cgroup; its host
telemetry with the run's gate thresholds, counting those groups' members as the benchmark's),
runs its own cold starts when its slot opens, before its first round (unless its place has
them from an earlier session: ``cold_start_places``), and sends them back as facts; the client
appends them to ``cold_start.jsonl`` with their placement. Interleaved calibration's twins are
in their round, so on its host and engine process. ``admit`` refuses, when a worker registers,
a host whose engine binaries do not hash to the run's pins (``engine_pins``: the client's
binaries, hashed when the run started).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from metewand.measure.clock import utc_now
from metewand.measure.host import HostTelemetry
from metewand.runtime import rundir
from metewand.runtime.host_name import worker_place
from metewand.runtime.shared_run import SharedRunView
from metewand.runtime.store import RunStore
from metewand.runtime.suite import NextUnit, Row, SuiteRef, Unit, UnitEvents
from metewand.suites.browser import classify, event_loop, peer_manifest
from metewand.suites.browser.attempt_registry import AttemptRegistry
from metewand.suites.browser.attempt_runner import AttemptRunner
from metewand.suites.browser.binary_identity import binary_sha256
from metewand.suites.browser.engine_pool import EnginePool
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.engines import Missing, resolve
from metewand.suites.browser.fixtures import FixtureServer
from metewand.suites.browser.leftovers import kill_leftovers
from metewand.suites.browser.observers.base import EngineGroups
from metewand.suites.browser.profiler import ResourceProfiler
from metewand.suites.browser.rows import PlannedAttempt, base_row, not_run_row
from metewand.suites.browser.run_config import RunConfig
from metewand.suites.browser.run_plan import Plan, PlanError, build_plan, corpus_digest

T = TypeVar("T")


class BrowserSlot:
    """An engine pool and a fixture server, served by one event loop on its own thread."""

    def __init__(self, suite: BrowserSuite, index: int, label: str) -> None:
        self.suite = suite
        self.index = index
        self.label = label  # its teardown report's key and its engine logs' directory
        self._task: asyncio.Task[Any] | None = None
        self._stopping = False
        self.loop = event_loop.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name=f"mw-slot-loop-{index}", daemon=True
        )
        self._thread.start()
        plan, store = suite.plan, suite.store
        self.pool = EnginePool(
            plan.available,
            store.run_dir,
            store.run_id,
            index,
            suite.on_launch,
            suite.groups.launch_group,
            log_name=label,
        )
        self.server = FixtureServer(plan.corpus.fixtures_dir, harness_only_graders=True)
        self.runner: AttemptRunner | None = None
        try:
            base_url = self._call(self.server.start(), cancellable=False)
        except BaseException:
            self._stop_loop()
            raise
        self.runner = AttemptRunner(
            plan,
            store,
            self.pool,
            self.server,
            base_url,
            suite.groups,
            suite.identity_of,
            suite.registry,
        )

    def run_on_loop(self, attempts: Coroutine[Any, Any, None]) -> None:
        """Run ``attempts`` (one or many) on this slot's loop, from the calling thread; an
        interrupt cancels the attempt in flight (no row, no artifacts) and refuses the next."""
        self._call(attempts)

    async def attempt(self, planned: PlannedAttempt) -> Row:
        """One attempt, on this slot's loop."""
        assert self.runner is not None
        return await self.runner.run(planned)

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
                self._call(self.runner.close(), cancellable=False)
            reports = self._call(self.pool.stop_all(), cancellable=False)
            self.suite.slot_closed(self.label, reports)
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
        self,
        plan: Plan,
        store: RunStore | SharedRunView,
        profiler: ResourceProfiler | None,
        registry: AttemptRegistry | None = None,
        *,
        worker_side: bool = False,
        cold_starts_here: bool = True,
    ) -> None:
        """``profiler``: the accounting groups and cold starts of the engines this process
        launches (None: no groups, a functional Dask worker); ``registry``: the attempts'
        drivers and observers (default: all). ``cold_starts_here``: the cold starts are this
        suite's to run (False: a Dask client, whose workers run their own; a worker whose place
        has them already)."""
        self.plan, self.store, self.profiler = plan, store, profiler
        self.groups: EngineGroups = profiler if profiler is not None else EngineGroups()
        self.registry = registry or AttemptRegistry()
        # a Dask worker's suite writes nothing in the manifest: its facts go back as data
        self.worker_side = worker_side
        self.cold_starts_here = cold_starts_here
        self.cycles = False  # units of whole rotation cycles (``rounds``); the runner sets it
        self.teardown_reports: dict[str, Any] = {}
        self._slots: list[BrowserSlot] = []
        self._lock = threading.Lock()  # slots open, and identities land, one at a time
        self._facts: list[dict[str, Any]] = []
        data = {} if worker_side else store.manifest["data"]
        self._identities: dict[str, Any] = dict(data.get("engines", {}))
        self._by_host: dict[str, Any] = dict(data.get("engines_by_host", {}))
        self._peer_engines: dict[str, Any] = (
            {} if worker_side else dict(store.manifest.get("engines") or {})
        )
        self._by_key = {planned.key: planned for planned in plan.attempts}

    # -- the protocol -----------------------------------------------------------------------

    def units(self) -> list[Unit]:
        return rounds(self.plan, self.store.finished_keys(), self.cycles)

    def prepare(self) -> None:
        """Cold-start samples of every engine, once per run, before any warm attempt (on Dask,
        each worker's before its first round: ``open_slot``)."""
        if self.profiler is None or not self.cold_starts_here or self.worker_side:
            return
        if not self.store.finished_keys():
            event_loop.run(self.profiler.cold_starts(self.plan.available))

    def open_slot(self, slot_id: str) -> BrowserSlot:
        if self.worker_side:  # not under the lock: an interrupt must not wait for them
            self._worker_cold_starts(_dir_label(slot_id))
        with self._lock:
            index = len(self._slots)
            label = _dir_label(slot_id) if self.worker_side else f"worker-{index}"
            slot = BrowserSlot(self, index, label)
            self._slots.append(slot)
        return slot

    def _worker_cold_starts(self, label: str) -> None:
        """A Dask worker's first slot: this host's cold starts, before its first warm attempt,
        each record a fact for the client's ``cold_start.jsonl``."""
        if not (self.cold_starts_here and self.profiler is not None):
            return
        self.cold_starts_here = False  # once per worker process, whatever happens

        def keep(record: dict[str, Any]) -> None:
            with self._lock:
                self._facts.append({"kind": "cold_start", "record": record})

        event_loop.run(self.profiler.cold_starts(self.plan.available, keep, f"{label}/cold_start"))

    def worker_telemetry(self, root_pid: int) -> HostTelemetry | None:
        """A profiled worker's host telemetry: the run's thresholds, its engine groups' members
        counted as the benchmark's (``runtime.suite.worker_telemetry``); None: the default."""
        if self.profiler is None or not self.worker_side:
            return None
        return self.profiler.host_telemetry(root_pid, to_file=False)

    def run_unit(self, slot: Any, unit: Unit, events: UnitEvents | None = None) -> list[Row]:
        assert isinstance(slot, BrowserSlot)
        rows: list[Row] = []
        if slot.stopping:
            return rows
        units = iter([unit])
        slot.run_on_loop(self._attempts(slot, lambda: next(units, None), events, rows))
        return rows

    def run_units(self, slot: Any, next_unit: NextUnit, events: UnitEvents) -> None:
        """Every unit ``next_unit`` gives, on the slot's loop thread from one attempt to the
        next (``runtime.suite``): each row goes to ``events`` from that thread."""
        assert isinstance(slot, BrowserSlot)
        if not slot.stopping:
            slot.run_on_loop(self._attempts(slot, next_unit, events, None))

    async def _attempts(
        self,
        slot: BrowserSlot,
        next_unit: NextUnit,
        events: UnitEvents | None,
        rows: list[Row] | None,
    ) -> None:
        while not slot.stopping and (unit := next_unit()) is not None:
            for key in unit.keys:
                if slot.stopping:
                    return
                planned = self._by_key[key]
                if events is not None:
                    events.attempt_started(planned.label)
                row = self._not_run(planned) or await slot.attempt(planned)
                if rows is not None:
                    rows.append(row)
                if events is not None:
                    events.attempt_finished(row)

    def interrupt(self) -> None:
        with self._lock:
            slots = list(self._slots)
        for slot in slots:
            slot.interrupt()

    def teardown(self) -> None:
        assert isinstance(self.store, RunStore), "a worker-side suite has no end of run"
        self.store.update_manifest({"teardown": self.teardown_reports})
        kill_leftovers(self.store.run_dir, self.store.run_id)
        if self.profiler is not None:
            self.profiler.close()

    def finish(self, completed: bool) -> None:
        """The peer's completion fields and the run's resource provenance, from the rows."""
        assert isinstance(self.store, RunStore), "a worker-side suite has no end of run"
        finish_manifest(self.store, "completed" if completed else "interrupted")

    # -- facts a worker-side suite sends back (runtime.suite.take_facts) ----------------------

    def take_facts(self) -> list[dict[str, Any]]:
        with self._lock:
            facts, self._facts = self._facts, []
        return facts

    def merge_facts(self, facts: list[dict[str, Any]], placement: dict[str, Any]) -> None:
        """The client's side: a worker's engine identities and teardown reports, into the
        manifest (teardown reports through what ``teardown`` writes)."""
        for fact in facts:
            if fact.get("kind") == "engine_identity":
                with self._lock:
                    self._merge_identity(
                        str(fact["engine"]), fact["identity"], str(placement["host"])
                    )
            elif fact.get("kind") == "teardown":
                with self._lock:
                    self.teardown_reports[str(fact["slot"])] = fact["reports"]
            elif fact.get("kind") == "cold_start":  # one line each, whole, beside the client's
                record = {**fact["record"], "placement": _cold_start_placement(placement)}
                rundir.append_line(self.store.run_dir / rundir.COLD_START, record)

    def _merge_identity(self, engine: str, identity: dict[str, Any], host: str) -> None:
        """Under the lock: ``host``'s identity of ``engine``; the run's first one also under
        ``engines`` (the run's engine pins, as a local run records them)."""
        assert isinstance(self.store, RunStore)
        self._by_host.setdefault(host, {})[engine] = {"found": True, **identity}
        self.store.update_manifest({"engines_by_host": self._by_host})
        if "binary_sha256" not in self._identities.get(engine, {}):
            self._record_identity(engine, identity)

    def slot_closed(self, label: str, reports: dict[str, Any]) -> None:
        with self._lock:
            if self.worker_side:
                self._facts.append({"kind": "teardown", "slot": label, "reports": reports})
                if self.profiler is not None:  # a worker's groups go with its slot's engines
                    self.profiler.close()
            else:
                self.teardown_reports[label] = reports

    # -- engines ----------------------------------------------------------------------------

    def identity_of(self, engine: str) -> dict[str, Any]:
        """The identity of ``engine`` as hashed on this host (what this host's rows name)."""
        with self._lock:
            return dict(self._known_here(engine))

    def _known_here(self, engine: str) -> dict[str, Any]:
        """A run with per-host identities (it had a Dask session) trusts only this host's: a
        local session on another host than the workers' hashes its own binaries again."""
        if self.worker_side or not self._by_host:
            return dict(self._identities.get(engine, {}))
        return dict(self._by_host.get(socket.gethostname(), {}).get(engine, {}))

    async def on_launch(self, engine: str, process: EngineProcess) -> None:
        """An engine's identity (binary hash, version) goes to the manifest at its first launch
        on this host (on a Dask worker: to the facts the client writes)."""
        if "binary_sha256" in self._known_here(engine):
            return
        identity = (await process.identity()).to_json()
        with self._lock:
            if self.worker_side:
                self._identities[engine] = {"found": True, **identity}
                self._facts.append(
                    {"kind": "engine_identity", "engine": engine, "identity": identity}
                )
            elif self._by_host:
                self._merge_identity(engine, identity, socket.gethostname())
            else:
                self._record_identity(engine, identity)

    def _record_identity(self, engine: str, identity: dict[str, Any]) -> None:
        """Under the lock, on the client: the engine's identity into the manifest."""
        assert isinstance(self.store, RunStore)
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


def rounds(plan: Plan, done: set[str], cycles: bool = False) -> list[Unit]:
    """The plan's rounds in planned order, each without the engines already done.

    ``cycles``: a unit is a whole rotation cycle instead (E consecutive rounds for E engines:
    every engine once in every position), as a profiled Dask run needs: Dask puts units on
    hosts as they come free, and only whole cycles keep each host's own rows in the balanced
    engine order that its per-host verdict asks for."""
    by_round: dict[int, list[str]] = {}
    for planned in plan.attempts:
        if planned.key not in done:
            by_round.setdefault(planned.round, []).append(planned.key)
    if not cycles:
        return [Unit(tuple(keys), {"round": index}) for index, keys in by_round.items()]
    width = max(1, len(plan.config.engines))
    by_cycle: dict[int, list[int]] = {}
    for index in by_round:
        by_cycle.setdefault(index // width, []).append(index)
    return [
        Unit(
            tuple(k for i in indexes for k in by_round[i]), {"round": indexes[0], "rounds": indexes}
        )
        for indexes in by_cycle.values()
    ]


def cycles_per_unit(config: RunConfig, executor_kind: str) -> bool:
    """Whole rotation cycles per unit: a profiled run on Dask (``rounds``)."""
    return executor_kind == "dask" and config.resource.profile != "off"


def finish_manifest(store: RunStore, status: str) -> None:
    """The peer's completion fields and the run's resource provenance, from the rows."""
    host_summary = rundir.read_json(store.run_dir / rundir.HOST_SUMMARY)
    block = store.manifest.get("host_telemetry")
    fields = peer_manifest.finish_fields(
        store.rows(), status, utc_now(), block if isinstance(block, dict) else {}, host_summary
    )
    store.update_top_level(fields)


def _cold_start_placement(placement: dict[str, Any]) -> dict[str, Any]:
    """Where a worker's cold starts ran: its host, place and worker (not the unit's try)."""
    keep = ("executor", "host", "place", "worker", "worker_name")
    return {key: placement[key] for key in keep if key in placement}


def _dir_label(slot_id: str) -> str:
    """A Dask slot's label (``dask:<worker name>``) as a directory name: ``dask-<name>``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", slot_id.replace("dask:", "dask-", 1))


def suite_config(
    config: RunConfig,
    run_dir: Path,
    corpus_sha256: str,
    engine_pins: dict[str, str] | None = None,
    cold_start_places: list[str] | None = None,
) -> dict[str, Any]:
    """The JSON config ``from_ref`` rebuilds the suite from (paths absolute). A profiled run
    adds ``engine_pins`` (engine -> binary sha256 every host must have) and
    ``cold_start_places`` (places whose cold starts the run holds already)."""
    return {
        "config": config.to_json(),
        "run_dir": str(Path(run_dir).absolute()),
        "corpus_sha256": corpus_sha256,
        "engine_pins": dict(engine_pins or {}),
        "cold_start_places": sorted(cold_start_places or []),
    }


def engine_pins(plan: Plan) -> dict[str, str]:
    """The sha256 of every found engine's binary here (a profiled Dask run's pins)."""
    return {name: binary_sha256(engine.binary) for name, engine in plan.available.items()}


def admit(ref: SuiteRef) -> str | None:
    """Why this host cannot run the run's rounds, or None (a worker's registration asks):
    a profiled run's engines must be here and hash to the run's pins, so every host's figures
    are of the same binaries (a functional run takes each host's own, named in its rows)."""
    pins = ref.config.get("engine_pins") or {}
    if not pins:
        return None
    config = RunConfig.from_json(ref.config["config"])
    problems = []
    for name, pin in sorted(pins.items()):
        found = resolve(name, config.engine_paths.get(name))
        if isinstance(found, Missing):
            problems.append(
                f"engine {name} not found on this host ({found.detail}); the run pins sha256 {pin}"
            )
            continue
        digest = binary_sha256(found.binary)
        if digest != pin:
            problems.append(
                f"engine {name} binary {found.binary} has sha256 {digest}, not the "
                f"run's pin {pin} (a profiled comparison runs the same binaries "
                "on every host)"
            )
    return "; ".join(problems) or None


def from_ref(ref: SuiteRef) -> BrowserSuite:
    """The worker-side suite (``--executor dask``): it only runs rounds. Rows and manifest facts
    go back as data (the client writes them); artifacts are published into the run directory
    whole through ``SharedRunView`` (the run directory must be on this host or a shared
    filesystem). The worker plans the run from the same config; a corpus that differs from the
    client's (another checkout, an edited task) is refused, since its keys would not match."""
    config = RunConfig.from_json(ref.config["config"])
    view = SharedRunView(Path(ref.config["run_dir"]))  # StoreError when the run is not there
    plan = build_plan(config)
    found = corpus_digest(plan.corpus.root)["sha256"]
    if found != ref.config["corpus_sha256"]:
        raise PlanError(
            [
                f"{plan.corpus.root}: corpus sha256 {found} on this worker differs from "
                f"the client's {ref.config['corpus_sha256']}"
            ]
        )
    profiler = None
    if config.resource.profile != "off" or config.phase_marks:  # as a local run: groups
        profiler = ResourceProfiler(config, view.run_dir, view.run_id)
    done = worker_place() in (ref.config.get("cold_start_places") or [])
    return BrowserSuite(plan, view, profiler, worker_side=True, cold_starts_here=not done)
