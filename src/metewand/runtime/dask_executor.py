"""``--executor dask``: run a suite's units on a Dask cluster and stream their rows back.

The client side. ``DaskExecutor`` connects to a running scheduler (``--scheduler tcp://H:P``) or
starts a ``LocalCluster`` of N single-threaded worker *processes* (``--dask-local N``), registers
the run's ``SlotPlugin`` on every worker (see ``dask_worker``), and then submits whole units:
paired work never leaves its host. Each unit asks for one ``metewand-host`` (so a host never
runs two units at once) and for the run's source-gate resource (so a refused worker never gets
one). ``stream`` yields, in completion order, ``UnitDone`` for each finished unit and ``LostTry`` for
each try a dying worker took with it (Dask has placed that unit again by then); the caller writes
both to the run's store as they come, so a client killed at any moment loses only unfinished units.

``run(suite, units, sink)`` is the run lifecycle's executor protocol on top of ``stream``: each
row goes to the sink (the run's store and progress, labelled with its host and worker) when its
unit finishes; Ctrl-C cancels what has not started and calls ``interrupt()`` on every worker's
suite.

Dask's own retry on worker loss is what moves a unit elsewhere (``distributed.scheduler.allowed-
failures`` times, then the unit fails with ``KilledWorker``); this module only makes the loss
visible: every try reports its start, and a start whose try never returned is a lost try.
"""

from __future__ import annotations

import contextlib
import itertools
import pickle
import secrets
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
import dask
from distributed import Client, LocalCluster, as_completed
from distributed.protocol import pickle as dask_pickle

from metewand.errors import EnvironmentMissing
from metewand.runtime import dask_scheduler_side as scheduler_side
from metewand.runtime.dask_worker import (
    HOST_RESOURCE,
    REGISTRATION_TOPIC,
    TRY_TOPIC,
    SlotPlugin,
    close_slot_task,
    expected_identity,
    gate_resource,
    host_summary_task,
    interrupt_task,
    plugin_name,
    quiet_heartbeat_loss,
    run_unit_task,
    slot_owners,
)
from metewand.runtime.suite import Row, Suite, SuiteRef, Unit, UnitEvents, merge_facts

# the scheduler runs these as code it is sent: it needs no metewand of its own
cloudpickle.register_pickle_by_value(scheduler_side)

# A Dask worker runs beside measured attempts, so its own housekeeping must stay near zero: no
# statistical profiler (a 10 ms sampling thread), slower event-loop health ticks and memory checks.
# The same settings as environment variables for ``dask worker``: docs/DASK.md.
QUIET_WORKER_CONFIG: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.system-monitor.disk": False,
    "distributed.admin.system-monitor.gil.enabled": False,
}
REGISTRATION_WAIT_S = 30.0
# With no accepted worker left (all died, or all left), units would wait for ever: the run stops
# with the reason after this long, and can be resumed once workers are back.
NO_WORKER_GRACE_S = 60.0


def quiet_worker_env() -> dict[str, str]:
    """``QUIET_WORKER_CONFIG`` as the environment variables ``dask worker`` reads."""
    return {
        "DASK_" + key.upper().replace(".", "__").replace("-", "_"): str(value)
        for key, value in QUIET_WORKER_CONFIG.items()
    }


class _Watchdog:
    """Stops a stream whose cluster has no accepted worker left for ``no_worker_grace_s``."""

    def __init__(self, executor: DaskExecutor, futures: list[Any]) -> None:
        self.reason: str | None = None
        self._executor, self._futures = executor, futures
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="dask-watchdog", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        executor = self._executor
        gate = gate_resource(executor.expected["tree_sha256"])
        empty_since: float | None = None
        while not self._stop.wait(1.0):
            try:
                count = executor.client.run_on_scheduler(scheduler_side.gate_workers, gate)
            except Exception:  # noqa: BLE001 - the scheduler is gone: the futures will say so
                return
            now = time.monotonic()
            empty_since = None if count else (empty_since or now)
            if empty_since is not None and now - empty_since >= executor.no_worker_grace_s:
                self.reason = (
                    f"no accepted Dask worker left for {executor.no_worker_grace_s:.0f} s "
                    f"(scheduler {executor.scheduler}); resume the run once workers are back"
                )
                executor.client.cancel(self._futures)  # as_completed wakes on the cancellations
                return

    def stop(self) -> None:
        self._stop.set()


class DaskExecutorError(EnvironmentMissing, RuntimeError):
    """The cluster cannot run this suite (no worker accepted, scheduler unreachable, ...)."""


@dataclass(frozen=True)
class UnitDone:
    unit: Unit
    rows: list[Row]
    placement: dict[str, Any]
    facts: list[dict[str, Any]] = field(default_factory=list)  # the worker suite's manifest facts


@dataclass(frozen=True)
class LostTry:
    """A try of ``keys`` that started on ``worker`` and never returned (the worker died)."""

    record: dict[str, Any]


@dataclass
class _Tries:
    """Try-start events by Dask key, filled by the client's event subscription thread."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    starts: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)

    def add(self, msg: dict[str, Any]) -> None:
        with self.lock:
            self.starts.setdefault(msg["dask_key"], {})[msg["try"]] = msg

    def lost(self, dask_key: str, finished_try: str | None) -> list[dict[str, Any]]:
        """Tries of ``dask_key`` other than the finished one, each reported once."""
        with self.lock:
            found = [
                msg
                for try_id, msg in self.starts.get(dask_key, {}).items()
                if try_id != finished_try and try_id not in self.reported
            ]
            self.reported.update(msg["try"] for msg in found)
        return found


class DaskExecutor:
    """Runs units of one suite on a Dask cluster; use as a context manager."""

    def __init__(
        self,
        ref: SuiteRef,
        *,
        scheduler: str | None = None,
        local_workers: int | None = None,
        registration_wait_s: float = REGISTRATION_WAIT_S,
        no_worker_grace_s: float = NO_WORKER_GRACE_S,
        worker_config: dict[str, Any] | None = None,
        on_lost_try: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if (scheduler is None) == (local_workers is None):
            raise ValueError("give exactly one of scheduler= and local_workers=")
        if local_workers is not None and local_workers < 1:
            raise ValueError("local_workers must be >= 1")
        self.ref = ref
        self.scheduler = scheduler
        self.local_workers = local_workers
        self.registration_wait_s = registration_wait_s
        self.no_worker_grace_s = no_worker_grace_s
        # a local cluster's workers start under this configuration (the quiet one unless a
        # benchmark asks for Dask's defaults to compare with)
        self.worker_config = QUIET_WORKER_CONFIG if worker_config is None else worker_config
        self.run_token = secrets.token_hex(4)
        self.expected = expected_identity()
        self.resources = {HOST_RESOURCE: 1, gate_resource(self.expected["tree_sha256"]): 1}
        self.registrations: list[dict[str, Any]] = []
        self.dropped_orphans: list[str] = []  # slot plugins of dead clients this run closed
        self._cluster: LocalCluster | None = None
        self._client: Client | None = None
        self._tries = _Tries()
        self._unit_numbers = itertools.count()  # Dask keys stay unique over every stream()
        self.lost_tries: list[dict[str, Any]] = []
        self.on_lost_try = on_lost_try or self.lost_tries.append

    # ---- connection and registration ----

    def __enter__(self) -> DaskExecutor:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        quiet_heartbeat_loss()  # a scheduler killed mid-run is our one line, not distributed's stack
        if self.local_workers is not None:
            # the scheduler's HTTP endpoint (health, metrics; no dashboard) wants port 8787 and
            # warns when another cluster on the host has it; it takes a free port, nothing here
            # uses it, and the warning only confused a run's output
            with dask.config.set(self.worker_config), warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Port .* is already in use", UserWarning)
                self._cluster = LocalCluster(
                    n_workers=self.local_workers,
                    threads_per_worker=1,
                    processes=True,
                    resources={HOST_RESOURCE: 1},
                    dashboard_address=None,
                    host="127.0.0.1",
                )
            self._client = Client(self._cluster)
        else:
            try:
                self._client = Client(self.scheduler, timeout="10s")
            except OSError as exc:
                raise DaskExecutorError(
                    f"cannot reach Dask scheduler {self.scheduler}: {exc}"
                ) from exc
        why = self._client.run_on_scheduler(scheduler_side.cannot_load, run_unit_task.__module__)
        if why is not None:
            raise DaskExecutorError(
                f"the Dask scheduler {self.scheduler} cannot load metewand ({why}): it unpickles "
                "the run's tasks, so start `dask scheduler` from a Python environment where the "
                "client's metewand is installed"
            )
        self._client.subscribe_topic(TRY_TOPIC, self._on_try_event)
        self.dropped_orphans = self._drop_orphaned_slots()
        self._register()

    @property
    def client(self) -> Client:
        if self._client is None:
            raise DaskExecutorError("the executor is not started")
        return self._client

    def _on_try_event(self, event: tuple[float, dict[str, Any]]) -> None:
        msg = event[1]
        if isinstance(msg, dict) and msg.get("run") == self.run_token:
            self._tries.add(msg)

    def _drop_orphaned_slots(self) -> list[str]:
        """Close the slots of runs whose client is gone (``kill -9``): on a shared cluster they
        would otherwise hold their engines and workers open beside this run's attempts."""
        live = set(self.client.run_on_scheduler(scheduler_side.connected_clients))
        # a worker that cannot import metewand (another Python, another checkout path) answers
        # with an exception: it holds no slot of ours, and its registration says why it is refused
        replies = self.client.run(slot_owners, on_error="return")
        orphans = {
            name
            for owners in replies.values()
            if isinstance(owners, dict)
            for name, client_id in owners.items()
            if client_id not in live
        }
        for name in sorted(orphans):
            with contextlib.suppress(ValueError):  # another client dropped it first
                self.client.unregister_worker_plugin(name)
        return sorted(orphans)

    def _register(self) -> None:
        # a LocalCluster's workers share this host: each is a measuring place of its own
        shared = self.local_workers is not None and self.local_workers > 1
        plugin = SlotPlugin(
            self.ref, self.expected, self.run_token, client_id=self.client.id, shared_host=shared
        )
        unloadable = self._workers_unable_to_load(plugin)
        try:
            responses = self.client.register_plugin(plugin, name=plugin_name(self.run_token))
        except Exception:
            # the scheduler's broadcast raises the first worker's unpickling error; it has kept
            # the plugin and given it to every other worker (and gives it to later ones)
            if not unloadable:
                raise
            responses = {a: {"status": "OK"} for a in self._worker_names() if a not in unloadable}
        failed = {
            address: f"the worker plugin failed: {reply.get('exception') or reply.get('text')}"
            for address, reply in (responses or {}).items()
            if isinstance(reply, dict) and reply.get("status") != "OK"
        }
        failed.update(unloadable)
        wanted = set(responses or {}) - set(failed)
        self.registrations = self._wait_for_registrations(wanted)
        names = self._worker_names()
        for address, why in sorted(failed.items()):
            self.registrations.append(
                {
                    "worker": address,
                    "worker_name": names.get(address, ""),
                    "accepted": False,
                    "reason": why,
                }
            )
        if not any(r["accepted"] for r in self.registrations):
            reasons = "; ".join(f"{r['worker']}: {r['reason']}" for r in self.registrations)
            raise DaskExecutorError(
                f"no Dask worker was accepted for this run ({reasons or 'the cluster has no workers'})"
            )

    def _workers_unable_to_load(self, plugin: SlotPlugin) -> dict[str, str]:
        """Workers that cannot unpickle the run's plugin (no metewand on their Python's path, or
        another metewand without this class), with why: they are refused, not the run stopped.

        The probe is ``pickle.loads`` of the plugin's own bytes, a function every worker has."""
        replies = self.client.run(pickle.loads, dask_pickle.dumps(plugin), on_error="return")
        return {
            address: (
                f"the worker cannot load metewand's worker plugin ({type(reply).__name__}: "
                f"{reply}): start it with a Python environment where the client's metewand "
                "is installed"
            )
            for address, reply in replies.items()
            if isinstance(reply, BaseException)
        }

    def _worker_names(self) -> dict[str, str]:
        """address -> name of the cluster's workers now."""
        workers = self.client.scheduler_info().get("workers", {})
        return {address: str(info.get("name", "")) for address, info in workers.items()}

    def _wait_for_registrations(self, wanted: set[str]) -> list[dict[str, Any]]:
        """Registration events of this run, once every worker in ``wanted`` has sent one."""
        deadline = time.monotonic() + self.registration_wait_s
        while True:
            found = self._registration_events()
            if wanted <= {r["worker"] for r in found} or time.monotonic() > deadline:
                return found
            time.sleep(0.05)

    def _merged_registrations(self) -> list[dict[str, Any]]:
        """The start's registrations plus those of workers that joined (or restarted) since."""
        latest = {r["worker"]: r for r in self.registrations}
        latest.update({r["worker"]: r for r in self._registration_events()})
        return list(latest.values())

    def _registration_events(self) -> list[dict[str, Any]]:
        latest: dict[str, dict[str, Any]] = {}
        for _stamp, msg in self.client.get_events(REGISTRATION_TOPIC):
            if isinstance(msg, dict) and msg.get("run") == self.run_token:
                latest[msg["worker"]] = msg  # a restarted worker registers again: keep the last
        return list(latest.values())

    # ---- running units ----

    def run(self, suite: Suite, units: Sequence[Unit], sink: UnitEvents) -> None:
        """The run lifecycle's executor protocol: every row to ``sink`` as its unit finishes.

        ``suite`` is the client's own instance; the workers build theirs from ``self.ref``, so the
        two must name the same kind. Lost tries go to ``on_lost_try`` (the run's side file).
        The facts a unit's worker suite made go to the client's ``suite`` before the unit's rows;
        once the units are done (or the run stops), every worker's slot is closed and its facts
        (teardown reports) go there too, so the client's end of run sees them."""
        if suite.kind != self.ref.kind:
            raise ValueError(f"the executor was built for {self.ref.kind!r}, not {suite.kind!r}")
        try:
            for outcome in self.stream(units):
                if isinstance(outcome, LostTry):
                    self.on_lost_try(outcome.record)
                    continue
                merge_facts(suite, outcome.facts, outcome.placement)
                where = f"{outcome.placement['host']}/{outcome.placement['worker_name']}"
                for row in outcome.rows:
                    sink.attempt_started(f"{row['key']} on {where}")
                    sink.attempt_finished(row)
        except BaseException:
            with contextlib.suppress(Exception):  # the cluster may be what broke
                self.close_slots(suite)
            raise
        self.close_slots(suite)

    def close_slots(self, suite: Suite) -> None:
        """Close this run's slot on every worker; their facts go to the client's ``suite``."""
        closed = self.client.run(close_slot_task, self.run_token, on_error="return")
        for address in sorted(closed):
            reply = closed[address]
            if isinstance(reply, dict):  # None: no slot there; an exception: the worker broke
                merge_facts(suite, reply["facts"], reply["placement"])

    def stream(self, units: Iterable[Unit]) -> Iterator[UnitDone | LostTry]:
        """Submit every unit, then yield outcomes as they finish (lost tries before their unit).

        Leaving early (an exception, Ctrl-C, the consumer closing the generator) cancels what has
        not run and interrupts the units in flight on every worker."""
        by_key: dict[str, Unit] = {}
        futures = []
        for unit in units:
            index = next(self._unit_numbers)
            dask_key = f"metewand-unit-{self.run_token}-{index}"
            by_key[dask_key] = unit
            futures.append(
                self.client.submit(
                    run_unit_task,
                    self.run_token,
                    dask_key,
                    unit.to_json(),
                    key=dask_key,
                    resources=self.resources,
                    pure=False,
                    priority=-index,  # earlier units first: the plan's order where it is free
                )
            )
        finished: dict[str, dict[str, Any]] = {}
        watchdog = _Watchdog(self, futures)
        try:
            # results are gathered as units finish, not one blocking fetch per unit; a unit that
            # raised (or ran out of retries after worker deaths) raises here and stops the run
            for future, result in as_completed(futures, with_results=True):
                if watchdog.reason is not None:
                    raise DaskExecutorError(watchdog.reason)
                if not isinstance(result, dict):  # cancelled under us: the cluster went away
                    raise DaskExecutorError(self._lost_reason(result))
                where = finished[future.key] = result["placement"]
                for msg in self._tries.lost(future.key, where["try"]):
                    yield LostTry(self._lost_record(msg, by_key[future.key], where))
                yield UnitDone(by_key[future.key], result["rows"], where, result.get("facts", []))
                future.release()
        except BaseException as exc:
            self.interrupt(futures)
            if watchdog.reason is not None:  # the cancellation was the watchdog's
                raise DaskExecutorError(watchdog.reason) from exc
            raise
        finally:
            watchdog.stop()
        yield from self._late_lost_tries(by_key, finished)

    def _lost_reason(self, result: Any) -> str:
        what = f"{type(result).__name__}: {result}" if isinstance(result, BaseException) else result
        return (
            f"the Dask cluster went away mid-run (scheduler {self.scheduler}, client "
            f"{getattr(self._client, 'status', '?')}; a unit ended with {what!s:.200}); resume "
            "the run once the scheduler is back"
        )

    def interrupt(self, futures: Sequence[Any] = ()) -> None:
        """Cancel units not started and stop the units in flight (``suite.interrupt()`` on
        every worker): a unit cut short returns no rows, and a resume runs it again."""
        client = self._client
        if client is None:
            return
        with contextlib.suppress(Exception):
            client.cancel(list(futures))
        with contextlib.suppress(Exception):
            client.run(interrupt_task, self.run_token, on_error="ignore")

    def _late_lost_tries(
        self, by_key: dict[str, Unit], finished: dict[str, dict[str, Any]]
    ) -> Iterator[LostTry]:
        """Tries whose start event reached us only after their unit's result."""
        for _stamp, msg in self.client.get_events(TRY_TOPIC):
            if isinstance(msg, dict) and msg.get("run") == self.run_token:
                self._tries.add(msg)
        for dask_key, unit in by_key.items():
            where = finished[dask_key]
            for msg in self._tries.lost(dask_key, where["try"]):
                yield LostTry(self._lost_record(msg, unit, where))

    def _lost_record(
        self, msg: dict[str, Any], unit: Unit, finished: dict[str, Any] | None
    ) -> dict[str, Any]:
        return {
            "kind": "lost_try",
            "keys": list(unit.keys),
            "dask_key": msg["dask_key"],
            "host": msg["host"],
            "worker": msg["worker"],
            "worker_name": msg["worker_name"],
            "try": msg["try"],
            "started_unix": msg["started"],
            "reason": "the worker ran this try and left the cluster before returning it",
            "retried_as": finished["try"] if finished else None,
            "retried_on": finished["worker"] if finished else None,
        }

    # ---- the end of a run ----

    def host_summaries(self) -> dict[str, Any]:
        """Each registered worker's host telemetry summary; a departed worker is unavailable."""
        try:
            alive = self.client.run(host_summary_task, self.run_token, on_error="return")
            self.registrations = self._merged_registrations()
        except Exception:  # noqa: BLE001 - the cluster went away: no host answers (said below)
            alive = {}
        out: dict[str, Any] = {}
        for registration in self.registrations:
            worker = registration["worker"]
            if not registration["accepted"]:
                continue
            reply = alive.get(worker)
            if isinstance(reply, BaseException):
                out[worker] = {"unavailable": f"the worker failed: {type(reply).__name__}: {reply}"}
            elif worker in alive:
                out[worker] = reply or {"unavailable": "no unit ran on this worker"}
            else:
                out[worker] = {"unavailable": "the worker left the cluster before the run ended"}
        return out

    def close(self) -> None:
        """Close every slot (the plugin's teardown), then the client and a local cluster."""
        client, self._client = self._client, None
        if client is not None:
            try:
                if self._cluster is None:  # a shared cluster keeps running: take our slots down
                    client.unregister_worker_plugin(plugin_name(self.run_token))
            except Exception:  # noqa: BLE001 - closing must go on
                pass
            client.close()
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.close()
