"""The browser run: plan, open (or resume) the run directory, and hand the plan's rounds to the
runtime (``runtime.run.Run`` over ``BrowserSuite`` on the local executor, ``--jobs`` slots each
with its own engines and fixture server, or on a Dask cluster, ``Executor.dask``: whole rounds,
one slot per worker); then score.

``run_browser(...)`` is the whole command (``metewand browser run``); its front half (resume
checks, the run directory, host telemetry, the executor, the interrupt contract) is
``runtime.run.start``'s, and it returns that ``RunOutcome``: ``exit_code`` 0 done, 2 invalid
input (nothing run), 3 no usable Dask cluster (state ``interrupted``, resumable), 130
interrupted (state ``interrupted``, resumable), 1 the harness broke (interrupted, resumable).
A run directory is only ever changed through ``RunStore`` (whole rows, whole artifact dirs).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from metewand.errors import INVALID_INPUT, OK
from metewand.measure.clock import utc_now
from metewand.runtime import provenance, rundir
from metewand.runtime.progress import ReporterFactory, null_reporter
from metewand.runtime.run import (
    HARNESS_ERROR_FILE,
    ExecutorChoice,
    Prepared,
    RunOutcome,
    RunRequest,
    start,
)
from metewand.runtime.store import MANIFEST_NAME, RunStore, RunView, StoreError
from metewand.runtime.suite import Unit
from metewand.suites.browser import peer_manifest
from metewand.suites.browser.attempt_registry import AttemptRegistry
from metewand.suites.browser.leftovers import kill_leftovers
from metewand.suites.browser.profiler import ResourceProfiler
from metewand.suites.browser.run_config import CONNECTION_POLICY, REUSE_POLICY, RunConfig
from metewand.suites.browser.run_plan import (
    Plan,
    PlanError,
    build_plan,
    corpus_digest,
    not_run_subsets,
)
from metewand.suites.browser.suite import (
    BrowserSuite,
    cycles_per_unit,
    engine_pins,
    rounds,
    suite_config,
)

CONFIG_KEY: Final = "config"
ENGINE_PINS_KEY: Final = "engine_pins"
Echo = Callable[[str], None]


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


# the names this module's callers know: one executor spelling, one outcome, for every suite
Executor = ExecutorChoice
RunResult = RunOutcome


def _corpus_facts(plan: Plan) -> dict[str, Any]:
    """The corpus's digest, with the shared part and the selected tasks' own file digests
    (``run_plan.corpus_digest``): every task file is left out of the shared part, run or not."""
    facts = corpus_digest(plan.corpus.root, plan.corpus.tasks)
    selected = {task.task_id for task in plan.tasks}
    facts["task_sha256"] = {k: v for k, v in facts["task_sha256"].items() if k in selected}
    return facts


def manifest_data(plan: Plan, run_id: str) -> dict[str, Any]:
    """The run's own settings; ``runtime.run.start`` adds the provenance facts (host, runner)."""
    config = plan.config
    return {
        "suite": "browser",
        "run_id": run_id,
        CONFIG_KEY: config.to_json(),
        "seed": config.seed,
        "k": config.k,
        "jobs": config.jobs,
        "isolation": config.isolation,
        "adapter_mode": config.adapter_mode,
        "driver_isolation": config.driver_isolation,
        "phase_marks": config.phase_marks,
        "score_mode": config.score_mode,
        "selected_engines": list(config.engines),
        "resource_profile": {
            "mode": config.resource.profile,
            "sample_interval_ms": config.resource.sample_interval_ms,
            "calibration_baseline": config.resource.calibration_baseline,
            "calibration": config.resource.calibration_mode,
            "calibration_every": config.resource.calibration_every,
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
        "benchmarked_tree": provenance.benchmarked_tree(config.tasks_dir),
        "cdp_connection": CONNECTION_POLICY,
        "corpus": _corpus_facts(plan),
        "engines": {
            name: {"found": False, "reason": m.reason, "detail": m.detail}
            for name, m in plan.missing.items()
        },
        "selection": {
            "tasks": len(plan.tasks),
            "attempts": len(plan.attempts),
            # of those, interleaved calibration's unprofiled twins (0 without it)
            "calibration_twins": sum(not planned.observed for planned in plan.attempts),
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
    registry: AttemptRegistry | None = None,
    plan: Plan | None = None,
    executor: ExecutorChoice | None = None,
    resume_phase_marks: bool | None = None,
) -> RunOutcome:
    """``plan``: the plan of ``config`` when the caller built it already (to check it first).
    ``registry``: the attempts' drivers and observers (default: ``attempt_registry``'s).
    ``resume_phase_marks``: ``--phase-marks``/``--no-phase-marks`` given with ``resume`` (None:
    neither); one contradicting the run's recorded choice is refused (exit 2).

    The outcome is ``runtime.run.start``'s, said through ``echo`` (``RunOutcome.report``, as
    ``metewand run`` does). Rows and raw files only: scores.json and the resource summary are
    derived files, written by compare.generate.write_after_run (the CLI calls it next)."""
    try:
        resume_dir = rundir.locate_run_dir(resume, out_dir) if resume is not None else None
    except StoreError as exc:
        echo(f"error: {exc}")
        return RunOutcome(INVALID_INPUT)
    starter = _BrowserStart(config, out_dir, echo, registry, plan)
    executor = executor or ExecutorChoice()
    request = RunRequest(out_dir, run_id, resume_dir, executor, resume_phase_marks, progress)
    outcome = start(starter, request)
    if outcome.report(echo) == OK:
        echo(f"done: {outcome.run_dir}")
    return outcome


@dataclass
class _BrowserStart:
    """The browser suite's part of ``runtime.run.start`` (a ``RunStarter``)."""

    config: RunConfig | None
    out_dir: Path
    echo: Echo
    registry: AttemptRegistry | None
    plan: Plan | None = None
    name: str = "browser"

    def check_resume(self, view: RunView) -> None:
        """The plan of the run being resumed, refused when it is not a browser run, its corpus
        changed or its calibration baseline is gone (exit 2)."""
        self.plan = _resume_plan(view)
        _check_baseline(self.plan.config, self.out_dir)

    def new_run(
        self, run_id: str, facts: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        assert self.config is not None
        config = self.config
        plan = self.plan = self.plan or build_plan(config)
        _check_baseline(config, self.out_dir)
        for error in plan.skipped_invalid:
            self.echo(f"skipped (--keep-going): {error.file}: {error.json_path}: {error.message}")
        for subset_id, why in not_run_subsets(plan).items():
            self.echo(f"subset {subset_id}: {why}")
        for name, missing in plan.missing.items():
            self.echo(
                f"engine {name}: {missing.reason} ({missing.detail}); its rows are unsupported"
            )
        baseline = _baseline_dir(config, self.out_dir)
        peer_fields = peer_manifest.start_fields(
            plan,
            run_id,
            facts,
            utc_now(),
            str(baseline.resolve()) if baseline is not None else None,
        )
        return manifest_data(plan, run_id), peer_fields

    def on_open(self, store: RunStore) -> None:
        """Engines a killed session of the run left are killed (and said so) before the sweep."""
        for line in rundir.journal_warnings(store.run_dir):
            self.echo(f"warning: {line}")
        killed = kill_leftovers(store.run_dir, store.run_id)
        if killed:
            self.echo(f"killed {len(killed)} engine process(es) left by an earlier run: {killed}")

    def prepare(self, store: RunStore, executor: ExecutorChoice) -> Prepared:
        assert self.plan is not None
        plan = self.plan
        cycles = cycles_per_unit(plan.config, executor.kind)
        units = _announce(store, plan, self.echo, cycles)
        profiler = ResourceProfiler(plan.config, store.run_dir, store.run_id)
        # on Dask every worker runs its own host's cold starts before its first round
        on_dask = executor.kind == "dask"
        suite = BrowserSuite(plan, store, profiler, self.registry, cold_starts_here=not on_dask)
        suite.cycles = cycles
        return Prepared(
            suite,
            units,
            plan.config.jobs,
            lambda: _dask_config(store, plan),
            profiler.host_sampling(),
            profiler.group_members,
            profiler.adopt_host,
        )


def _dask_config(store: RunStore, plan: Plan) -> dict[str, Any]:
    """The ``SuiteRef`` config a Dask worker rebuilds the suite from."""
    config = plan.config
    corpus_sha256 = store.manifest["data"]["corpus"]["sha256"]
    pins = _engine_pins(store, plan) if config.resource.profile != "off" else {}
    return suite_config(
        config, store.run_dir, corpus_sha256, pins, cold_start_places(store.run_dir)
    )


def _engine_pins(store: RunStore, plan: Plan) -> dict[str, str]:
    """A profiled Dask run's engine pins: recorded when it started (hashed here, on the
    client), kept by every later session, so a resumed run admits the same binaries only."""
    recorded = store.manifest["data"].get(ENGINE_PINS_KEY)
    if isinstance(recorded, dict) and recorded:
        return {str(k): str(v) for k, v in recorded.items()}
    pins = engine_pins(plan)
    store.update_manifest({ENGINE_PINS_KEY: pins})
    return pins


def cold_start_places(run_dir: Path) -> list[str]:
    """Places (``placement.place`` or ``host``) whose cold starts the run already holds."""
    places = set()
    for record in rundir.read_jsonl(run_dir / rundir.COLD_START).rows:
        where = record.get("placement")
        if isinstance(where, dict):
            places.add(str(where.get("place") or where.get("host")))
    return sorted(places)


def _announce(store: RunStore, plan: Plan, echo: Echo, cycles: bool = False) -> list[Unit]:
    """What is left to run, said before it runs; the rounds of it."""
    done = store.finished_keys()
    todo = sum(planned.key not in done for planned in plan.attempts)
    shape = f"{len(plan.tasks)} tasks x {len(plan.config.engines)} engines x k={plan.config.k}"
    twins = sum(not planned.observed for planned in plan.attempts)
    if twins and plan.config.resource.calibration_every == 1:
        # the twins are attempts too (rows, time), but not the matrix's: say so, not 2x the shape
        shape += ", each attempt also run once unprofiled beside it (interleaved calibration)"
    elif twins:
        every = plan.config.resource.calibration_every
        shape += (
            f", {twins} of its attempts also run once unprofiled beside them (interleaved "
            f"calibration on one round in {every})"
        )
    echo(f"run {store.run_id}: {todo} of {len(plan.attempts)} attempts to run ({shape})")
    return rounds(plan, done, cycles)


def _baseline_dir(config: RunConfig, out_dir: Path) -> Path | None:
    """``--resource-calibration-baseline``: a run directory, or a run id under ``out_dir``."""
    baseline = config.resource.calibration_baseline
    if baseline is None:
        return None
    return rundir.locate_run_dir(baseline, out_dir)


def _resume_plan(view: RunView) -> Plan:
    """The plan of the run being resumed, refused when it is not a browser run or its corpus
    changed (``PlanError``/``StoreError``, exit 2)."""
    where = view.run_dir / MANIFEST_NAME
    try:
        data = view.manifest["data"]
        if not isinstance(data, dict) or data.get("suite") != "browser":
            suite = data.get("suite") if isinstance(data, dict) else None
            raise PlanError(
                [
                    f"{where}: not a browser run (suite {suite!r}); resume it with the "
                    "command that created it"
                ]
            )
        config = RunConfig.from_json(data[CONFIG_KEY])
        recorded = data["corpus"]["sha256"]
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, PlanError):
            raise
        raise PlanError(
            [f"{where}: unreadable browser run manifest ({type(exc).__name__}: {exc})"]
        ) from None
    plan = build_plan(config)
    if corpus_digest(plan.corpus.root)["sha256"] != recorded:
        raise PlanError([f"{plan.corpus.root}: corpus changed since the run started"])
    return plan


def _check_baseline(config: RunConfig, out_dir: Path) -> None:
    """Refuse a baseline that is not a readable run before the run starts, not after it."""
    baseline_dir = _baseline_dir(config, out_dir)
    if baseline_dir is None:
        return
    try:
        RunView(baseline_dir).manifest  # noqa: B018 - read to validate
    except (StoreError, ValueError, OSError) as exc:
        raise PlanError(
            [f"--resource-calibration-baseline {config.resource.calibration_baseline}: {exc}"]
        ) from None


__all__ = ["HARNESS_ERROR_FILE", "Executor", "RunResult", "run_browser"]
