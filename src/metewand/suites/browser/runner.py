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

from metewand.runtime import provenance
from metewand.runtime.exit_codes import BENCHMARK_FAILURES, INTERRUPTED, INVALID_INPUT, OK
from metewand.runtime.progress import ReporterFactory, null_reporter
from metewand.runtime.store import RunStore, StoreError, utc_now, write_json_atomic
from metewand.suites.browser import classify
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
        killed = kill_leftovers(store.run_dir, store.run_id)
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
        write_scores(store)
        if plan.config.resource.profile == "engine":
            _resource_summary(store, plan.config, out_dir, echo)
        store.set_state("complete")
        echo(f"done: {store.run_dir}")
        return RunResult(OK, store.run_dir)


def _open(
    config: RunConfig | None, out_dir: Path, run_id: str | None, resume: str | None, echo: Echo,
    planned: Plan | None = None,
) -> tuple[RunStore, Plan]:  # fmt: skip
    if resume is not None:
        run_dir = Path(resume) if Path(resume).is_dir() else Path(out_dir) / resume
        store = RunStore.open(run_dir)
        try:
            data = store.manifest["data"]
            plan = build_plan(RunConfig.from_json(data[CONFIG_KEY]))
            if corpus_digest(plan.corpus.root)["sha256"] != data["corpus"]["sha256"]:
                raise PlanError([f"{plan.corpus.root}: corpus changed since the run started"])
        except BaseException:
            store.close()
            raise
        return store, plan
    assert config is not None
    plan = planned or build_plan(config)
    for error in plan.skipped_invalid:
        echo(f"skipped (--keep-going): {error.file}: {error.json_path}: {error.message}")
    for subset_id, why in not_run_subsets(plan).items():
        echo(f"subset {subset_id}: {why}")
    for name, missing in plan.missing.items():
        echo(f"engine {name}: {missing.reason} ({missing.detail}); its rows are unsupported")
    from metewand.runtime.store import new_run_id

    run_id = run_id or new_run_id()
    return RunStore.create(out_dir, run_id, manifest_data(plan, run_id)), plan


HARNESS_ERROR_FILE: Final = "harness_error.txt"


def _mark_harness_failure(store: RunStore, exc: Exception, echo: Echo) -> None:
    """State interrupted with the reason; the traceback goes to a file, not to the terminal."""
    import traceback

    reason = f"harness failed: {type(exc).__name__}: {exc}"
    (store.run_dir / HARNESS_ERROR_FILE).write_text("".join(traceback.format_exception(exc)))
    store.update_manifest({"interruption_reason": reason})
    store.set_state("interrupted")
    echo(f"error: {reason} (traceback in {store.run_dir / HARNESS_ERROR_FILE}; "
         f"--resume {store.run_dir} continues the run)")  # fmt: skip


def _finish_profiler(profiler: ResourceProfiler) -> None:
    profiler.stop_host()
    profiler.close()


def _resource_summary(store: RunStore, config: RunConfig, out_dir: Path, echo: Echo) -> None:
    from metewand.compare.calibration import CalibrationThresholds
    from metewand.compare.resource_artifacts import finalize_resource_artifacts

    baseline = config.resource.calibration_baseline
    baseline_dir = None
    if baseline is not None:
        baseline_dir = Path(baseline) if Path(baseline).is_dir() else Path(out_dir) / baseline
    summary = finalize_resource_artifacts(
        store.run_dir,
        baseline_dir,
        reference_engine=config.resource.reference_engine,
        thresholds=CalibrationThresholds.from_observer_effect_pct(
            config.resource.max_observer_effect_pct
        ),
    )
    eligible = summary.get("resource_comparison_eligible")
    echo(f"resource summary: resource_comparison_eligible={eligible}")


def write_scores(store: RunStore) -> None:
    from metewand.compare.scores import browser_scores, scores_bytes

    data = store.manifest["data"]
    scores = browser_scores(store.rows(), {**data, "run_id": store.run_id})
    target = store.run_dir / "scores.json"
    tmp = target.with_suffix(".json.tmp")
    tmp.write_bytes(scores_bytes(scores))
    tmp.replace(target)


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

    async def on_launch(engine: str, process: EngineProcess) -> None:
        if "binary_sha256" not in identities.get(engine, {}):
            identity = (await process.identity()).to_json()
            identities[engine] = {"found": True, **identity}
            store.update_manifest({"engines": identities})

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
    server = FixtureServer(plan.corpus.fixtures_dir)
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
        base = base_row(store.run_id, planned, plan.config.isolation)
        verdict = classify.engine_binary_missing(planned.engine, missing.detail)
        return not_run_row(base, verdict, utc_now(), {})
    return await runner.run(planned)


__all__ = ["RunResult", "run_browser", "write_json_atomic", "write_scores"]
