"""The worker side of ``--executor dask``: registration, one slot per worker, whole units.

A ``SlotPlugin`` is registered by the client on every worker of the cluster (also on workers that
join later, and on a worker a nanny restarts after a crash). At setup it:

1. records the worker host's provenance (host facts, kernel, CPU, metewand version, source digest)
   and compares the version and digest with the client's. A worker that differs is *refused*: it
   never receives the run's gate resource, so the scheduler cannot place a unit on it; the refusal
   and its reason go to the client as a registration event;
2. asks the suite kind's admission check (``runtime.suite.admit``: a profiled browser run's
   engine binaries must hash to the run's pins here), run off the event loop; a reason refuses
   the worker as above;
3. on acceptance, grants itself the run's gate resource (``metewand-src-<digest>``), which every
   unit requires beside the host resource (``metewand-host``) that the operator gives the one
   worker of a host on its command line.

Where a row was measured is its *place*: the host, or, when the run's workers share one host
(``--dask-local N`` with N > 1, ``shared_host``), the host and the worker (``host/name``): two
workers side by side on one machine are two measuring places, never one host's pool.

Units run in ``run_unit_task``: the suite is rebuilt from its ``SuiteRef``, the slot is opened on
the first unit and reused by every later one, and closed at teardown. The task reports its start
as a try event first, so the client can record a try that a killed worker lost. Every row is
stamped with where it ran (host, worker, try). The manifest facts the worker's suite collected
while running the unit (``runtime.suite.take_facts``) travel back with its rows; those its slot
makes when it closes (teardown reports) come back from ``close_slot_task``, which the client runs
on every worker when its units are done: the client is the run manifest's one writer.

Host telemetry and the pollution gate run per worker while its slot is open; the client collects
each worker's summary at the end of the run (``host_summary_task``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import secrets
import threading
import time
from typing import Any

from distributed import WorkerPlugin, get_worker
from distributed.exceptions import Reschedule

from metewand import canonical
from metewand.measure.host import HostTelemetry, Spool
from metewand.runtime import provenance
from metewand.runtime import suite as suite_registry
from metewand.runtime.host_name import set_worker_place, worker_host, worker_place
from metewand.runtime.suite import (
    Row,
    Slot,
    Suite,
    SuiteRef,
    Unit,
    admit,
    build,
    take_facts,
    worker_telemetry,
)

# The resource an operator gives the one worker of a host (``--resources metewand-host=1``): with a
# quantity of 1 and every unit asking for 1, the host never runs two units at once.
HOST_RESOURCE = "metewand-host"
REGISTRATION_TOPIC = "metewand-registration"
TRY_TOPIC = "metewand-try"
TELEMETRY_INTERVAL_S = 1.0
# A slot closes after the unit in flight on it has ended (as a local slot does): an interrupted
# unit ends within an attempt's cancellation; a unit still running after this long is closed
# under (its engines stopped beneath it), so closing never hangs the run's end.
UNIT_END_WAIT_S = 60.0


def gate_resource(tree_sha256: str) -> str:
    """The resource only workers running the client's exact source hold."""
    return f"metewand-src-{tree_sha256[:16]}"


def expected_identity() -> dict[str, str]:
    """What a worker must match: the client's metewand version and source digest."""
    runner = provenance.runner_facts()
    return {
        "metewand_version": runner["metewand_version"],
        "tree_sha256": runner["source"]["tree_sha256"],
    }


def refusal_reason(expected: dict[str, str], runner: dict[str, Any]) -> str | None:
    """Why a worker with ``runner`` facts cannot run the client's units, or None."""
    version = runner.get("metewand_version")
    digest = runner.get("source", {}).get("tree_sha256")
    if version != expected["metewand_version"]:
        return (
            f"metewand version {version} differs from the client's {expected['metewand_version']}"
        )
    if digest != expected["tree_sha256"]:
        return (
            f"metewand source digest {digest} differs from the client's {expected['tree_sha256']} "
            "(the worker runs other code: install the client's checkout on it)"
        )
    return None


# what of a plugin travels from the client to its workers; the rest each worker builds
_TRAVELS = (
    "ref",
    "expected",
    "run_token",
    "factory_path",
    "admission_path",
    "client_id",
    "shared_host",
)


HEARTBEAT_LOSS = "Failed to communicate with scheduler during heartbeat"
BATCHED_COMM_CLOSED = "Batched Comm Closed"
# distributed's loggers that log a lost scheduler with its whole stack
STACKED_LOSS_LOGGERS = ("distributed.worker", "distributed.batched")


class HeartbeatLossWithoutStack(logging.Filter):
    """A lost scheduler is one line, not distributed's stack. A worker whose heartbeat meets a
    scheduler that is closing (the end of a run on a loaded host: seen once in six CI runs), and
    a client or worker whose batched send meets a killed scheduler (ci179: the client's record,
    at INFO, printed a CommClosedError stack above the run's own "went away" error), log
    distributed's stack under the line. The line stays; the stack, distributed's own and no
    fault of the run, is left out. Other records keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith(HEARTBEAT_LOSS) or message.startswith(BATCHED_COMM_CLOSED):
            record.exc_info, record.exc_text = None, None
        return True


def quiet_heartbeat_loss() -> None:
    """Install ``HeartbeatLossWithoutStack`` on distributed's loggers, once per process: the
    worker's at its plugin's setup, the client's when the executor starts."""
    for name in STACKED_LOSS_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, HeartbeatLossWithoutStack) for f in logger.filters):
            logger.addFilter(HeartbeatLossWithoutStack())


class SlotPlugin(WorkerPlugin):
    """One per worker and run: registration, the worker's slot, its host telemetry."""

    def __init__(
        self,
        ref: SuiteRef,
        expected: dict[str, str],
        run_token: str,
        client_id: str = "",
        shared_host: bool = False,
    ) -> None:
        self.ref = ref
        self.shared_host = shared_host  # the run's workers share one host (a LocalCluster)
        self.client_id = client_id  # the client that owns this run: when it is gone, so is the run
        # the client's registry entry for this kind travels with the plugin, so a worker builds
        # the very suite the client named (also a kind registered at run time, e.g. by tests)
        self.factory_path = suite_registry._FACTORIES.get(ref.kind)
        self.admission_path = suite_registry._ADMISSIONS.get(ref.kind)
        self.expected = expected
        self.run_token = run_token
        self._fresh_state()

    def _fresh_state(self) -> None:
        """What a worker builds for itself; none of it travels from the client."""
        self.accepted = False
        self.reason: str | None = None
        self._suite: Suite | None = None
        self._slot: Slot | None = None
        self._telemetry: HostTelemetry | None = None
        self._summary: dict[str, Any] | None = None  # the telemetry of a closed slot
        self._lock = threading.Lock()
        self._unit_running = threading.Lock()  # held while a unit runs on this worker's slot
        self._worker_address = ""
        self._worker_name = ""

    def __getstate__(self) -> dict[str, Any]:
        return {k: self.__dict__[k] for k in _TRAVELS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fresh_state()

    async def setup(self, worker: Any) -> None:
        quiet_heartbeat_loss()
        canonical.use_orjson()  # the worker writes its units' artifacts as a local run does
        self._worker_address = worker.address
        self._worker_name = str(worker.name)
        set_worker_place(
            f"{worker_host()}/{worker.name}" if self.shared_host else None
        )  # one worker process, one place
        runner = provenance.runner_facts()
        self.reason = refusal_reason(self.expected, runner)
        if self.reason is None and HOST_RESOURCE not in worker.state.total_resources:
            self.reason = (
                f"the worker offers no {HOST_RESOURCE} resource: start it with "
                f"--nworkers 1 --nthreads 1 --resources {HOST_RESOURCE}=1"
            )
        if self.reason is None:
            self.reason = await asyncio.to_thread(self._admission)
        self.accepted = self.reason is None
        if self.accepted:
            await worker.set_resources(**{gate_resource(self.expected["tree_sha256"]): 1})
        worker.log_event(
            REGISTRATION_TOPIC,
            {
                "run": self.run_token,
                "worker": worker.address,
                "worker_name": str(worker.name),
                "host": worker_host(),
                "place": worker_place(),
                "accepted": self.accepted,
                "reason": self.reason,
                "host_facts": provenance.host_facts(),
                "runner": runner,
                "resources": dict(worker.state.total_resources),
            },
        )

    def _admission(self) -> str | None:
        """The suite kind's own refusal (e.g. engine binaries differing from the run's pins)."""
        try:
            return admit(self.ref, self.admission_path)
        except Exception as exc:  # noqa: BLE001 - a check that broke refuses, saying why
            return f"the admission check of {self.ref.kind!r} failed: {type(exc).__name__}: {exc}"

    def teardown(self, worker: Any) -> None:
        self.close_slot()

    def slot(self) -> tuple[Suite, Slot]:
        """The suite and this worker's slot, opened on first use and kept for later units."""
        with self._lock:
            if self._suite is None:
                if self.factory_path is not None:
                    suite_registry.register(self.ref.kind, self.factory_path)
                self._suite = build(self.ref)
            if self._slot is None:
                telemetry = worker_telemetry(self._suite, os.getpid())
                self._telemetry = (
                    telemetry or HostTelemetry(TELEMETRY_INTERVAL_S, os.getpid(), Spool())
                ).start()
                self._slot = self._suite.open_slot(f"dask:{self._worker_name}")
            return self._suite, self._slot

    def host_summary(self) -> dict[str, Any] | None:
        """This worker's host telemetry summary (None when no unit ever ran here); stops the
        telemetry of a slot still open."""
        with self._lock:
            telemetry, self._telemetry = self._telemetry, None
        if telemetry is not None:
            self._summary = telemetry.stop()
        return self._summary

    def close_slot(self) -> list[dict[str, Any]]:
        """Close this worker's slot once the unit in flight ended (``UNIT_END_WAIT_S`` at most);
        returns the facts its suite made since its last unit (the slot's teardown report).
        Telemetry stops here, its summary kept for ``host_summary``."""
        ended = self._unit_running.acquire(timeout=UNIT_END_WAIT_S)
        try:
            return self._close_slot()
        finally:
            if ended:
                self._unit_running.release()

    def _close_slot(self) -> list[dict[str, Any]]:
        with self._lock:
            slot, self._slot = self._slot, None
            telemetry, self._telemetry = self._telemetry, None
            suite = self._suite
        try:
            if slot is not None:
                slot.close()
        finally:
            if telemetry is not None:
                self._summary = telemetry.stop()
        return take_facts(suite) if suite is not None else []


def plugin_name(run_token: str) -> str:
    return f"metewand-slot-{run_token}"


def _plugin(run_token: str) -> SlotPlugin:
    worker = get_worker()
    plugin = worker.plugins.get(plugin_name(run_token))
    if not isinstance(plugin, SlotPlugin):
        # a worker that joined before the plugin reached it: let the scheduler place the unit again
        raise Reschedule()
    return plugin


def placement(plugin: SlotPlugin, try_id: str) -> dict[str, Any]:
    """Where a try ran: every row carries it, so rows of different hosts are never pooled blind."""
    where = {
        "executor": "dask",
        "host": worker_host(),
        "worker": plugin._worker_address,
        "worker_name": plugin._worker_name,
        "try": try_id,
    }
    if plugin.shared_host:  # the rows of workers side by side on one host are never pooled
        where["place"] = worker_place()
    return where


def run_unit_task(run_token: str, dask_key: str, unit_json: dict[str, Any]) -> dict[str, Any]:
    """Run one unit on this worker's slot; returns ``{"rows": [...], "placement": {...}}``."""
    plugin = _plugin(run_token)
    if not plugin.accepted:
        raise Reschedule()  # defence in depth: the gate resource already keeps units away
    unit = Unit.from_json(unit_json)
    try_id = secrets.token_hex(6)
    where = placement(plugin, try_id)
    get_worker().log_event(
        TRY_TOPIC,
        {
            "run": run_token,
            "dask_key": dask_key,
            "keys": list(unit.keys),
            "started": time.time(),
            **where,
        },
    )
    with plugin._unit_running:
        suite, slot = plugin.slot()
        try:
            rows: list[Row] = suite.run_unit(slot, unit)
        except (asyncio.CancelledError, concurrent.futures.CancelledError):
            # interrupt_task cut the unit short: it returns no rows (a resume runs it again).
            # Raised, it would reach the client's stderr as "Compute Failed" with a traceback
            # whenever the interrupt overtook the client's cancel of this unit's future.
            if not getattr(slot, "stopping", False):
                raise
            rows = []
    for row in rows:
        row["placement"] = dict(where)
    return {"rows": rows, "placement": where, "facts": take_facts(suite)}


async def close_slot_task(run_token: str, dask_worker: Any = None) -> dict[str, Any] | None:
    """Run through ``Client.run`` once the run's units are done (or interrupted): close this
    worker's slot once its unit in flight ended and return the facts that made (``{"facts",
    "placement"}``); None when no slot was open here. The wait runs off the worker's event loop,
    which keeps serving the scheduler meanwhile."""
    plugin = dask_worker.plugins.get(plugin_name(run_token)) if dask_worker else None
    if not isinstance(plugin, SlotPlugin) or plugin._slot is None:
        return None
    facts = await asyncio.to_thread(plugin.close_slot)
    return {"facts": facts, "placement": placement(plugin, "slot-close")}


def host_summary_task(run_token: str, dask_worker: Any = None) -> dict[str, Any] | None:
    """Run through ``Client.run``: stop and return this worker's host telemetry summary."""
    plugin = dask_worker.plugins.get(plugin_name(run_token)) if dask_worker else None
    if not isinstance(plugin, SlotPlugin):
        return None
    return plugin.host_summary()


def slot_owners(dask_worker: Any = None) -> dict[str, str]:
    """Run through ``Client.run``: this worker's metewand plugins and the client owning each."""
    plugins = dask_worker.plugins if dask_worker else {}
    return {name: p.client_id for name, p in plugins.items() if isinstance(p, SlotPlugin)}


def interrupt_task(run_token: str, dask_worker: Any = None) -> bool:
    """Run through ``Client.run``: stop this worker's unit in flight (``suite.interrupt()``)."""
    plugin = dask_worker.plugins.get(plugin_name(run_token)) if dask_worker else None
    if not isinstance(plugin, SlotPlugin) or plugin._suite is None:
        return False
    interrupt = getattr(plugin._suite, "interrupt", None)
    if interrupt is not None:
        interrupt()
    return True
