"""The browser run: plan, start the fixture server and engines, run every attempt in balanced
order with bounded concurrency, write rows and artifacts, tear down, score.

``run_browser(...)`` is the whole command (``metewand browser run``); it returns an exit code:
0 done, 2 invalid input (nothing run), 130 interrupted (state ``interrupted``, resumable).
A run directory is only ever changed through ``RunStore`` (whole rows, whole artifact dirs).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from metewand.runtime import provenance, rundir
from metewand.runtime.exit_codes import BENCHMARK_FAILURES, INTERRUPTED, INVALID_INPUT, OK
from metewand.runtime.owned import sweep
from metewand.runtime.progress import ReporterFactory, null_reporter
from metewand.runtime.rundir import write_json_atomic
from metewand.runtime.store import (
    MANIFEST_NAME,
    RunStore,
    RunView,
    StoreError,
    utc_now,
)
from metewand.suites.browser import classify, peer_manifest
from metewand.suites.browser.attempt_runner import AttemptRunner, RunHooks
from metewand.suites.browser.engine_pool import EnginePool
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.fixtures import FixtureServer
from metewand.suites.browser.leftovers import kill_leftovers
from metewand.suites.browser.profiler import ResourceProfiler
from metewand.suites.browser.rows import PlannedAttempt, base_row, not_run_row
from metewand.suites.browser.run_config import CONNECTION_POLICY, REUSE_POLICY, RunConfig
from metewand.suites.browser.run_plan import (
    Plan,
    PlanError,
    build_plan,
    corpus_digest,
    not_run_subsets,
)

CONFIG_KEY: Final = "config"
Echo = Callable[[str], None]


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


@dataclass
class RunResult:
    exit_code: int
    run_dir: Path | None = None


def manifest_data(plan: Plan, run_id: str) -> dict[str, Any]:
    config = plan.config
    facts = provenance.collect()
    return {
        "suite": "browser",
        "run_id": run_id,
        CONFIG_KEY: config.to_json(),
        "seed": config.seed,
        "k": config.k,
        "jobs": config.jobs,
        "isolation": config.isolation,
        "score_mode": config.score_mode,
        "selected_engines": list(config.engines),
        "resource_profile": {
            "mode": config.resource.profile,
            "sample_interval_ms": config.resource.sample_interval_ms,
            "calibration_baseline": config.resource.calibration_baseline,
            "max_observer_effect_pct": config.resource.max_observer_effect_pct,
            "reference_engine": config.resource.reference_engine,
            "cold_start_samples": config.resource.cold_start_samples,
            "settle_limit_ms": config.resource.settle_limit_ms,
            "host_telemetry": config.resource.host_telemetry,
            "host_sample_interval_s": config.resource.host_sample_interval_s,
        },
        **plan.rotation.describe(),
        "engine_reuse": REUSE_POLICY,
        "reuse": REUSE_POLICY,
        "host": facts["host"],
        "runner": facts["runner"],
        "cdp_connection": CONNECTION_POLICY,
        "corpus": corpus_digest(plan.corpus.root),
        "harness_pin": facts["runner"]["source"]["tree_sha256"],
        "provenance": facts,
        "engines": {
            name: {"found": False, "reason": m.reason, "detail": m.detail}
            for name, m in plan.missing.items()
        },
        "selection": {
            "tasks": len(plan.tasks),
            "attempts": len(plan.attempts),
            "subsets": sorted({t.subset_id for t in plan.tasks}),
        },
        "skipped_invalid_tasks": [
            {"file": e.file, "path": e.json_path, "message": e.message}
            for e in plan.skipped_invalid
        ],
    }


def run_browser(
    config: RunConfig | None,
    out_dir: Path,
    run_id: str | None = None,
    resume: str | None = None,
    progress: ReporterFactory = null_reporter,
    echo: Echo = _stderr,
    hooks: RunHooks | None = None,
    plan: Plan | None = None,
) -> RunResult:
    """``plan``: the plan of ``config`` when the caller built it already (to check it first)."""
    try:
        store, plan = _open(config, out_dir, run_id, resume, echo, plan)
    except (PlanError, StoreError) as exc:
        for line in getattr(exc, "lines", [str(exc)]):
            echo(f"error: {line}")
        return RunResult(INVALID_INPUT)
    with store:
        for line in rundir.journal_warnings(store.run_dir):
            echo(f"warning: {line}")
        killed = kill_leftovers(store.run_dir, store.run_id)
        sweep(store.run_dir)  # engine groups a killed session left behind
        if killed:
            echo(f"killed {len(killed)} engine process(es) left by an earlier run: {killed}")
        todo = [a for a in plan.attempts if a.key not in store.finished_keys()]
        echo(f"run {store.run_id}: {len(todo)} of {len(plan.attempts)} attempts to run "
             f"({len(plan.tasks)} tasks x {len(plan.config.engines)} engines x k={plan.config.k})")  # fmt: skip
        profiler = ResourceProfiler(plan.config, store.run_dir, store.run_id)
        profiler.start_host(os.getpid())
        try:
            asyncio.run(_execute(plan, store, todo, progress, hooks or profiler))
        except KeyboardInterrupt:
            kill_leftovers(store.run_dir, store.run_id)
            _finish_profiler(profiler)
            sweep(store.run_dir)
            _finish_manifest(store, "interrupted")
            store.set_state("interrupted")
            echo(f"interrupted: {store.run_dir} (resume with --resume {store.run_dir})")
            return RunResult(INTERRUPTED, store.run_dir)
        except Exception as exc:  # the harness broke: say so, never leave the run "running"
            kill_leftovers(store.run_dir, store.run_id)
            _finish_profiler(profiler)
            _mark_harness_failure(store, exc, echo)
            return RunResult(BENCHMARK_FAILURES, store.run_dir)
        kill_leftovers(store.run_dir, store.run_id)
        _finish_profiler(profiler)
        sweep(store.run_dir)
        _finish_manifest(store, "completed")
        # The run writes rows and raw files only; scores.json and the resource summary are
        # derived files, written by compare.generate.write_after_run (the CLI calls it next).
        store.set_state("complete")
        echo(f"done: {store.run_dir}")
        return RunResult(OK, store.run_dir)


def _open(
    config: RunConfig | None, out_dir: Path, run_id: str | None, resume: str | None, echo: Echo,
    planned: Plan | None = None,
) -> tuple[RunStore, Plan]:  # fmt: skip
    if resume is not None:
        run_dir = rundir.locate_run_dir(resume, out_dir)
        # Everything is checked on a read-only view first: a refused resume leaves the run
        # directory as it was (no resumed_at, no state change, no torn-tail repair).
        plan = _resume_plan(RunView(run_dir))
        _check_baseline(plan.config, out_dir)
        return RunStore.open(run_dir), plan
    assert config is not None
    plan = planned or build_plan(config)
    _check_baseline(config, out_dir)
    for error in plan.skipped_invalid:
        echo(f"skipped (--keep-going): {error.file}: {error.json_path}: {error.message}")
    for subset_id, why in not_run_subsets(plan).items():
        echo(f"subset {subset_id}: {why}")
    for name, missing in plan.missing.items():
        echo(f"engine {name}: {missing.reason} ({missing.detail}); its rows are unsupported")
    from metewand.runtime.store import new_run_id

    run_id = run_id or new_run_id()
    baseline = _baseline_dir(config, out_dir)
    peer_fields = peer_manifest.start_fields(
        plan, run_id, provenance.collect(list_files=True), utc_now(),
        str(baseline.resolve()) if baseline is not None else None,
    )  # fmt: skip
    try:
        return RunStore.create(out_dir, run_id, manifest_data(plan, run_id), peer_fields), plan
    except OSError as exc:  # --out is a file, under a file, or not writable
        raise PlanError([f"--out {out_dir}: cannot create the run directory there: "
                         f"{exc.strerror or exc}"]) from None  # fmt: skip


def _baseline_dir(config: RunConfig, out_dir: Path) -> Path | None:
    """``--resource-calibration-baseline``: a run directory, or a run id under ``out_dir``."""
    baseline = config.resource.calibration_baseline
    if baseline is None:
        return None
    return rundir.locate_run_dir(baseline, out_dir)


def _finish_manifest(store: RunStore, status: str) -> None:
    """The peer's completion fields and the run's resource provenance, from the rows."""
    host_summary = rundir.read_json(store.run_dir / rundir.HOST_SUMMARY)
    block = store.manifest.get("host_telemetry")
    fields = peer_manifest.finish_fields(
        store.rows(), status, utc_now(), block if isinstance(block, dict) else {}, host_summary
    )
    store.update_top_level(fields)


def _resume_plan(view: RunView) -> Plan:
    """The plan of the run being resumed, refused when it is not a browser run or its corpus
    changed (``PlanError``/``StoreError``, exit 2)."""
    where = view.run_dir / MANIFEST_NAME
    try:
        data = view.manifest["data"]
        if not isinstance(data, dict) or data.get("suite") != "browser":
            suite = data.get("suite") if isinstance(data, dict) else None
            raise PlanError([f"{where}: not a browser run (suite {suite!r}); resume it with the "
                             "command that created it"])  # fmt: skip
        config = RunConfig.from_json(data[CONFIG_KEY])
        recorded = data["corpus"]["sha256"]
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, PlanError):
            raise
        raise PlanError([f"{where}: unreadable browser run manifest ({type(exc).__name__}: "
                         f"{exc})"]) from None  # fmt: skip
    plan = build_plan(config)
    if corpus_digest(plan.corpus.root)["sha256"] != recorded:
        raise PlanError([f"{plan.corpus.root}: corpus changed since the run started"])
    return plan


HARNESS_ERROR_FILE: Final = rundir.HARNESS_ERROR


def _mark_harness_failure(store: RunStore, exc: Exception, echo: Echo) -> None:
    """State interrupted with the reason; the traceback goes to a file, not to the terminal."""
    import traceback

    reason = f"harness failed: {type(exc).__name__}: {exc}"
    traceback_file = rundir.side_file(store.run_dir, HARNESS_ERROR_FILE)
    rundir.write_text_atomic(traceback_file, "".join(traceback.format_exception(exc)))
    store.update_manifest({"interruption_reason": reason})
    store.set_state("interrupted")
    echo(f"error: {reason} (traceback in {traceback_file}; "
         f"--resume {store.run_dir} continues the run)")  # fmt: skip


def _finish_profiler(profiler: ResourceProfiler) -> None:
    profiler.stop_host()
    profiler.close()


def _check_baseline(config: RunConfig, out_dir: Path) -> None:
    """Refuse a baseline that is not a readable run before the run starts, not after it."""
    baseline_dir = _baseline_dir(config, out_dir)
    if baseline_dir is None:
        return
    try:
        RunView(baseline_dir).manifest  # noqa: B018 - read to validate
    except (StoreError, ValueError, OSError) as exc:
        raise PlanError([f"--resource-calibration-baseline "
                         f"{config.resource.calibration_baseline}: {exc}"]) from None  # fmt: skip


async def _execute(
    plan: Plan,
    store: RunStore,
    todo: list[PlannedAttempt],
    reporter: ReporterFactory,
    hooks: RunHooks | None,
) -> None:
    main = asyncio.current_task()
    assert main is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, main.cancel)
    progress = reporter(len(todo))
    try:
        if isinstance(hooks, ResourceProfiler) and not store.finished_keys():
            await hooks.cold_starts(plan.available, {})
        progress.start()
        await _run_workers(plan, store, todo, progress, hooks)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        progress.close()


async def _run_workers(
    plan: Plan, store: RunStore, todo: list[PlannedAttempt], progress: Any,
    hooks: RunHooks | None,
) -> None:  # fmt: skip
    queue: asyncio.Queue[PlannedAttempt] = asyncio.Queue()
    for planned in todo:
        queue.put_nowait(planned)
    identities: dict[str, Any] = dict(store.manifest["data"].get("engines", {}))
    peer_engines: dict[str, Any] = dict(store.manifest.get("engines") or {})

    async def on_launch(engine: str, process: EngineProcess) -> None:
        if "binary_sha256" not in identities.get(engine, {}):
            identity = (await process.identity()).to_json()
            identities[engine] = {"found": True, **identity}
            store.update_manifest({"engines": identities})
            peer_engines[engine] = peer_manifest.engine_fields(identity)
            store.update_top_level({"engines": peer_engines})

    workers = min(plan.config.jobs, max(1, len(todo)))
    teardown: dict[str, Any] = {}
    try:
        await asyncio.gather(*(
            _worker(n, plan, store, queue, progress, on_launch, hooks, teardown)
            for n in range(workers)
        ))  # fmt: skip
    finally:
        store.update_manifest({"teardown": teardown})


async def _worker(
    worker: int, plan: Plan, store: RunStore, queue: asyncio.Queue[PlannedAttempt],
    progress: Any, on_launch: Any, hooks: RunHooks | None, teardown: dict[str, Any],
) -> None:  # fmt: skip
    pool = EnginePool(
        plan.available, store.run_dir, store.run_id, worker, on_launch,
        hooks.preexec_for if hooks is not None else None,
    )  # fmt: skip
    server = FixtureServer(plan.corpus.fixtures_dir, harness_only_graders=True)
    base_url = await server.start()
    runner = AttemptRunner(plan, store, pool, server, base_url, hooks)
    try:
        while not queue.empty():
            planned = queue.get_nowait()
            progress.attempt_started(planned.label)
            row = await _one(plan, store, runner, planned)
            store.append(row)
            progress.attempt_finished(str(row["status"]))
    finally:
        # Shielded: an interrupted run still stops its engines before the loop closes.
        reports = await asyncio.shield(pool.stop_all())
        teardown[f"worker-{worker}"] = reports
        await asyncio.shield(server.stop())


async def _one(
    plan: Plan, store: RunStore, runner: AttemptRunner, planned: PlannedAttempt
) -> dict[str, Any]:
    missing = plan.missing.get(planned.engine)
    if missing is not None:
        base = base_row(store.run_id, planned, plan.config.isolation, plan.config.seed)
        verdict = classify.engine_binary_missing(planned.engine, missing.detail)
        return not_run_row(base, verdict, utc_now(), {})
    return await runner.run(planned)


__all__ = ["RunResult", "run_browser", "write_json_atomic"]
