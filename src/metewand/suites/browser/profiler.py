"""Resource profiling of a browser run (``--resource-profile engine``): the engines' accounting
groups, host telemetry, cold starts; the warm attempts' observers are ``observers.resources``.

Scopes stay apart: engine_scope comes from one accounting group per worker x engine (the engine
joins it before exec, so nothing escapes by forking early) and a ``Sampler`` over that tree per
warm attempt; harness_scope is this process's own CPU (driver, grader, fixture server all run
here) per attempt; host_scope is ``HostTelemetry``. Measurement trouble adds flags and never
changes a functional status: every observer call is guarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metewand import canonical
from metewand.measure import subreaper
from metewand.measure.accounting import AccountingUnavailable, TreeAccounting, open_accounting
from metewand.measure.host import HostTelemetry
from metewand.measure.mark_probe import KeptProbes
from metewand.measure.pss import PssScanner
from metewand.measure.quiet import CpuNs
from metewand.measure.sampler import FaultHook, Sampler
from metewand.runtime import rundir
from metewand.runtime.owned import OwnedJournal
from metewand.runtime.run import HostSampling, host_telemetry
from metewand.suites.browser.binary_identity import binary_sha256
from metewand.suites.browser.engine_pool import marked_engine
from metewand.suites.browser.engine_process import EngineLaunchError, EngineProcess
from metewand.suites.browser.engines import ResolvedEngine
from metewand.suites.browser.leftovers import record_pid
from metewand.suites.browser.observers.base import EngineGroups
from metewand.suites.browser.resource_record import cold_start_record
from metewand.suites.browser.run_config import RunConfig

COLD_START_FILE = rundir.COLD_START
COLD_START_INTERVAL_MS = 50
# PSS reader threads per engine tree, more than the cores: a walk of a busy Chrome process waits
# on its mmap lock and on CPU, so more readers overlap the waits. On the 2-core host, 4 instead
# of 2 cut the median end-scan wall from ~40 to ~27 ms at the same sampler CPU.
PSS_READERS = 4
# Test-only fault injection (acceptance: a sampler fault mid-attempt changes no status, shows up
# as a flag): the sampler raises on this tick of every warm attempt. Read here and nowhere else.
SAMPLER_FAULT_ENV = "METEWAND_TEST_SAMPLER_FAULT_AT_TICK"
ColdStartSink = Callable[[dict[str, Any]], None]


def _fault_hook_from_env() -> FaultHook | None:
    raw = os.environ.get(SAMPLER_FAULT_ENV)
    if not raw:
        return None
    at_tick = int(raw)

    def hook(tick: int) -> None:
        if tick == at_tick:
            raise RuntimeError(f"injected sampler fault at tick {tick} ({SAMPLER_FAULT_ENV})")

    return hook


class ResourceProfiler(EngineGroups):
    def __init__(self, config: RunConfig, run_dir: Path, run_id: str) -> None:
        self.options = config.resource
        self.jobs = config.jobs
        self.sampling = self.options.profile == "engine"
        self.phase_marks = config.phase_marks
        self.run_dir = run_dir
        self._journal = OwnedJournal(run_dir)  # engine groups, removed after a kill -9
        self.run_id = run_id
        self._groups: dict[tuple[int, str], TreeAccounting] = {}
        # One scanner per group for the whole run: its reader threads start once, and the last
        # end scan's per-process values can answer the next baseline scan when nothing moved.
        self._scanners: dict[tuple[int, str], PssScanner] = {}
        # phase marks' probes, their files open from one attempt to the next
        self._mark_probes = KeptProbes()
        self._fault_hook = _fault_hook_from_env()
        self._attached: dict[tuple[int, str], int | None] = {}
        self._host: HostTelemetry | None = None

    # -- host telemetry -------------------------------------------------------------------
    def host_sampling(self) -> HostSampling | None:
        """The run's host telemetry settings (None: ``--host-telemetry off``)."""
        if not self.options.host_telemetry:
            return None
        return HostSampling(self.options.host_sample_interval_s, self.options.host_foreign_cpu_max)

    def adopt_host(self, host: HostTelemetry | None) -> None:
        """The run's host telemetry (``runtime.run.start`` makes it, the run starts and stops
        it); kept to subtract its sampler's own CPU from the harness scope."""
        self._host = host

    def host_telemetry(self, root_pid: int, to_file: bool = True) -> HostTelemetry | None:
        """This profiler's host telemetry (not started), when asked for. ``to_file`` False:
        samples go to a private spool (a Dask worker: the run's ``host_telemetry.jsonl`` is the
        client's host; the worker's summary goes back whole)."""
        sink = self.run_dir / rundir.HOST_TELEMETRY if to_file else None
        self.adopt_host(host_telemetry(self.host_sampling(), root_pid, sink, self.group_members))
        return self._host

    def host_cpu_ns(self) -> int:
        """The host-telemetry thread's CPU so far (ns), which the harness scope leaves out."""
        return self._host.sampler_cpu_ns if self._host is not None else 0

    def group_members(self) -> list[int]:
        """Every process in the engines' accounting groups (host telemetry's thread asks, so
        a group removed meanwhile is skipped): an engine helper that left the harness's tree
        is still the benchmark's, never foreign CPU."""
        members: list[int] = []
        for group in list(self._groups.values()):
            with contextlib.suppress(OSError):
                members.extend(group.pids())
        return members

    def _claim_session(self, process: EngineProcess) -> None:
        """A cold-start engine is the run's from its spawn: it lives well under one host
        sample, so no sample sees it lead its session, and its helpers, reparented to init at
        its stop (zombies until init reaps them), would otherwise count as foreign CPU."""
        if self._host is not None and process.pid is not None:
            self._host.claim_session(process.pid)

    # -- warm attempts ----------------------------------------------------------------------
    def group(self, worker: int, engine: str) -> TreeAccounting | None:
        """The worker x engine group (opened on first use); None: no accounting here."""
        key = (worker, engine)
        if key not in self._groups:
            try:
                self._groups[key] = open_accounting(
                    label=f"{self.run_id}-w{worker}-{engine}", announce=self._journal.group
                )
            except AccountingUnavailable:
                return None
        return self._groups[key]

    def launch_group(self, worker: int, engine: str) -> TreeAccounting | None:
        # Engines join a group in both resource profiles, so a baseline run differs from a
        # profiled one only by the sampler, and both can tell when an engine has gone quiet;
        # with phase marks on, a functional run's engines join one too (the marks read it).
        if self.options.profile == "off" and not self.phase_marks:
            return None
        return self.group(worker, engine)

    def attach(self, worker: int, engine: str, process: EngineProcess) -> None:
        """The engine's root into its group (the proc backend needs it; cgroups ignore a
        rejoin)."""
        if self._attached.get((worker, engine)) != process.pid and process.pid:
            self._groups[(worker, engine)].attach(process.pid)  # the proc backend needs the root
            self._attached[(worker, engine)] = process.pid

    def tree_cpu(self, worker: int, engine: str, process: EngineProcess) -> CpuNs | None:
        group = self._groups.get((worker, engine))
        if group is None:
            return None
        try:
            self.attach(worker, engine, process)
        except OSError:
            return None

        def read() -> int | None:
            try:
                return group.cpu().total.value
            except OSError:  # the settle wait then goes by states and members alone
                return None

        return read

    def engine_group(
        self, worker: int, engine: str, process: EngineProcess
    ) -> TreeAccounting | None:
        """The group the engine joined at launch (phase marks read it); None without one."""
        group = self._groups.get((worker, engine))
        if group is None or process.pid is None:
            return None
        try:
            self.attach(worker, engine, process)  # the proc backend needs the root
        except OSError:
            return None
        return group

    def sampler(self, worker: int, engine: str, group: TreeAccounting) -> Sampler:
        """A warm attempt's sampler over ``group`` (not started), on the group's one scanner."""
        scanner = self._scanners.setdefault((worker, engine), PssScanner(workers=PSS_READERS))
        return Sampler(
            group, self.options.sample_interval_ms, scanner=scanner, fault_hook=self._fault_hook
        )

    def mark_probes(self) -> KeptProbes:
        return self._mark_probes

    def close(self) -> None:
        self._mark_probes.close()  # before the groups whose files they hold
        for scanner in self._scanners.values():
            scanner.close()
        self._scanners.clear()
        for group in self._groups.values():
            with contextlib.suppress(OSError):
                group.close()
        self._groups.clear()

    # -- cold start -------------------------------------------------------------------------
    async def cold_starts(
        self,
        engines: dict[str, ResolvedEngine],
        sink: ColdStartSink | None = None,
        log_name: str = "cold_start",
    ) -> None:
        """``--cold-start-samples`` launches per engine outside the warm loop; each record
        goes to ``sink`` (default: appended to the run's ``cold_start.jsonl``; a Dask worker's
        go back to the client as facts). ``log_name``: their engine logs' directory."""
        if not self.sampling or self.options.cold_start_samples <= 0:
            return
        log_dir = self.run_dir / rundir.ENGINE_LOGS / log_name
        if sink is not None:
            await self._cold_starts(engines, log_dir, sink)
            return
        with open(self.run_dir / COLD_START_FILE, "ab") as out:

            def append(record: dict[str, Any]) -> None:
                out.write(canonical.line(record))
                out.flush()

            await self._cold_starts(engines, log_dir, append)

    async def _cold_starts(
        self, engines: dict[str, ResolvedEngine], log_dir: Path, sink: ColdStartSink
    ) -> None:
        sha: dict[str, str] = {}
        # Each cold start's engine lives between two host samples; its helpers, orphaned at
        # its stop, are ours to reap, so their CPU stays the run's (measure.subreaper).
        with subreaper.adopting() as why:
            if why is not None and self._host is not None:
                self._host.foreign.member_errors.append(
                    f"cold starts: {why}; their engines' orphans go to init, and CPU they spend "
                    "between two host samples reads as foreign"
                )
            for name, engine in engines.items():
                if name not in sha:  # hashed once per engine, outside every launch window
                    sha[name] = await asyncio.to_thread(binary_sha256, engine.binary)
                for sample in range(self.options.cold_start_samples):
                    record = await self._one_cold_start(name, engine, sample, log_dir)
                    record["engine_sha256"] = sha[name]
                    sink(record)

    async def _one_cold_start(
        self, name: str, engine: ResolvedEngine, sample: int, log_dir: Path
    ) -> dict[str, Any]:
        group = open_accounting(
            label=f"{self.run_id}-cold-{name}-{sample}", announce=self._journal.group
        )
        interval = min(COLD_START_INTERVAL_MS, self.options.sample_interval_ms)
        process = EngineProcess(
            marked_engine(engine, self.run_id, self.run_dir),
            log_dir,
            on_spawn=self._claim_session,
            accounting=group,
        )
        sampler = Sampler(group, interval)
        sampler.start()
        failure = None
        try:
            await process.start()
            if process.pid is not None:
                group.attach(process.pid)
                record_pid(
                    self.run_dir,
                    {
                        "pid": process.pid,
                        "engine": name,
                        "cold_start": sample,
                        "private_dirs": process.private_dirs,
                    },
                )
        except EngineLaunchError as exc:
            failure = str(exc)[:500]
        summary = sampler.stop()
        cpu = group.cpu()
        await process.stop()
        group.close()
        return cold_start_record(
            summary,
            cpu,
            backend=group.backend,
            fallback_reasons=group.fallback_reasons,
            engine=name,
            ready_ms=None if failure else process.ready_ms,
            extra={
                "run_id": self.run_id,
                "sample": sample,
                "failure": failure,
                "port": getattr(process, "port", None),
            },
        )
