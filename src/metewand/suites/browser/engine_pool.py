"""The engines one worker drives: launched on first use, reused across attempts, relaunched
after death, stopped at the end with their teardown reports.

Each worker owns one ``EngineProcess`` per engine (never shared between workers, so ``--jobs N``
attempts never meet inside one browser). Engines are marked with the run id in their
environment (see ``leftovers``) and their pids and private dirs are recorded in the run
directory, so ``--resume`` can kill the engines of a killed runner and remove their dirs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from metewand.measure.accounting import TreeAccounting
from metewand.runtime import rundir
from metewand.suites.browser.engine_process import HEALTH_FRESH_S, EngineProcess
from metewand.suites.browser.engines import ResolvedEngine
from metewand.suites.browser.leftovers import record_pid, run_markers

OnLaunch = Callable[[str, EngineProcess], Awaitable[None]]
GroupFor = Callable[[int, str], TreeAccounting | None]


def marked_engine(
    engine: ResolvedEngine, run_id: str, run_dir: Path | None = None
) -> ResolvedEngine:
    """The same engine with the run's markers added to its environment."""
    env = {**engine.spec.env, **run_markers(run_id, run_dir)}
    spec = dataclasses.replace(engine.spec, env=env)
    return ResolvedEngine(spec, engine.binary, engine.found_by)


class EnginePool:
    def __init__(
        self,
        engines: dict[str, ResolvedEngine],
        run_dir: Path,
        run_id: str,
        worker: int,
        on_launch: OnLaunch | None = None,
        group_for: GroupFor | None = None,
        log_name: str | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.worker = worker
        self._on_launch = on_launch
        self._processes: dict[str, EngineProcess] = {}
        # ``log_name``: a Dask worker's pools all have index 0 and share the run directory
        self.log_dir = log_dir = run_dir / rundir.ENGINE_LOGS / (log_name or f"worker-{worker}")
        for name, engine in engines.items():
            self._processes[name] = EngineProcess(
                marked_engine(engine, run_id, run_dir),
                log_dir,
                on_spawn=self._record,
                accounting=group_for(worker, name) if group_for is not None else None,
            )
        self.relaunches: dict[str, int] = {name: 0 for name in engines}

    def _record(self, process: EngineProcess) -> None:
        """Record a just-spawned engine (pid, session, private root) in the run directory."""
        record_pid(
            self.run_dir,
            {
                "pid": process.pid,
                "engine": process.engine.name,
                "worker": self.worker,
                "generation": process.generation,
                "private_dirs": process.private_dirs,
            },
        )

    def process(self, engine: str) -> EngineProcess:
        return self._processes[engine]

    async def ready(self, engine: str) -> EngineProcess:
        """The engine, healthy: started on first use, relaunched when found dead or not
        answering on its CDP endpoint (``EngineProcess.health``), never handed out on the word
        of ``Popen.poll()`` alone."""
        process = self._processes[engine]
        if process.generation == 0:
            await process.start()
        elif process.answered_within(HEALTH_FRESH_S):
            return process
        else:
            health = await process.health()
            if health == "ok":
                return process
            await process.relaunch(health)
            self.relaunches[engine] += 1
        if self._on_launch is not None:
            await self._on_launch(engine, process)
        return process

    def facts(self, engine: str) -> dict[str, Any]:
        """What a row records about the engine process it ran on."""
        process = self._processes[engine]
        return {
            "worker": self.worker,
            "generation": process.generation,
            "pid": process.pid,
            "launch_id": process.launch_id,
            "relaunches": self.relaunches[engine],
        }

    async def stop_all(self) -> dict[str, dict[str, Any]]:
        reports = {}
        for name, process in self._processes.items():
            report = await process.stop()
            reports[name] = {
                "worker": self.worker,
                "generations": process.generation,
                "deaths": [d.to_json() for d in process.deaths],
                "sigkill_needed": report.sigkill_needed,
                "stragglers_killed": report.stragglers_killed,
                "leftover_pids": report.leftover_pids,
                "zombie_pids": report.zombie_pids,
                "clean": report.clean,
            }
        return reports
