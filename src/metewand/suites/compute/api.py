"""``metewand.run_fixed_dataset_outcome``: one attempt on a caller-supplied dataset directory.

The dataset is used as is (no materialization: ``materialization_time_ns`` is unavailable
``provided_dataset``). Success returns a ``FixedDatasetResult`` whose ``measurements`` is the
typed execution-measurements payload; failure returns a ``FixedDatasetFailure`` whose diagnostic
keeps the same payload in ``details.measurements``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any

from metewand import canonical
from metewand.measure import forms
from metewand.measure.forms import Reason
from metewand.runtime import rundir
from metewand.suites.compute.execute import AttemptInput, AttemptOutcome, AttemptRun, Timeouts
from metewand.suites.compute.manifest import DatasetDef, ExecutionPolicy, Launch, ProblemDef
from metewand.suites.compute.materialize import MaterializedDataset
from metewand.suites.compute.payload import ExecutionMeasurements, observation_timing
from metewand.suites.compute.plan import DatasetConfig, PlannedAttempt
from metewand.suites.compute.session import LaunchSpec
from metewand.suites.compute.tree_memory import TreeMemory
from metewand.suites.compute.workers import ImplementationWorker, Opener


@dataclass(frozen=True)
class FixedDatasetResult:
    measurements: ExecutionMeasurements
    tree_memory: TreeMemory  # the kernel's memory high-water of the worker tree
    result: dict[str, Any]  # the validated result manifest
    metrics: dict[str, Any]  # the validated metrics document
    timed_wall_time_ns: int
    evaluation_time_ns: int
    implementation_time_ns: int | None
    statistics: dict[str, Any]
    result_dir: str
    metrics_path: str

    ok = True


@dataclass(frozen=True)
class FixedDatasetFailure:
    code: str
    message: str
    measurements: ExecutionMeasurements
    tree_memory: TreeMemory

    ok = False

    @property
    def diagnostic(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "details": {"measurements": self.measurements.to_json()},
        }


def _spec(
    role: str, argv: list[str], cwd: str, env: dict[str, str], caps: tuple[str, ...] = ()
) -> LaunchSpec:
    """A worker in the local environment; its hello carries the Rust resolved-worker id."""
    from metewand.suites.compute import identities, resolved
    from metewand.suites.compute.session import worker_env

    local = identities.record("environment-definition", name="local", definition={"kind": "local"})
    fields = resolved.worker(None, local, list(argv), worker_env(dict(env)))
    return LaunchSpec(
        list(argv), role, resolved.worker_id(fields), cwd, dict(env), caps, resolved=fields
    )


def run_fixed_dataset_outcome(
    dataset_dir: str,
    implementation: list[str],
    evaluator: list[str],
    *,
    problem: str = "problem",
    problem_parameters: dict[str, Any] | None = None,
    implementation_parameters: dict[str, Any] | None = None,
    implementation_seed: int = 0,
    result_schema: dict[str, Any] | None = None,
    metric_schema: dict[str, Any] | None = None,
    timing_scope: str = "prepare_and_execute",
    timeout_s: float | None = None,
    private_root: str | None = None,
    accounting_backend: str = "auto",
    timeouts: Timeouts | None = None,
    env: dict[str, str] | None = None,
    accounting_opener: Opener | None = None,
    phase_marks: bool = True,
) -> FixedDatasetResult | FixedDatasetFailure:
    """Run ``implementation`` (argv) on ``dataset_dir`` and grade it with ``evaluator`` (argv).

    ``env`` adds variables to both workers' environment (which is otherwise an allowlist).
    ``accounting_opener`` replaces how the accounting is opened: ``(backend, label)`` → a
    ``TreeAccounting`` (for a deliberately reduced real backend; default: ``open_accounting``).
    ``phase_marks``: False takes no phase marks (``metewand run --no-phase-marks``).
    """
    attempt_dir = tempfile.mkdtemp(prefix="attempt-", dir=private_root)
    os.chmod(attempt_dir, 0o700)
    dataset = _provided_dataset(dataset_dir)
    attempt = PlannedAttempt(
        "fixed",
        "fixed",
        "fixed",
        "default",
        dataset.config,
        problem,
        problem_parameters or {},
        "impl",
        implementation_parameters or {},
        "impl",
        implementation_seed,
        0,
        "measured",
        None,
        ExecutionPolicy(timing_scope=timing_scope, timeout_s=timeout_s),
    )
    spec = AttemptInput(
        attempt=attempt,
        problem=ProblemDef(
            problem, Launch("command", tuple(evaluator)), result_schema, metric_schema
        ),
        dataset=dataset,
        implementation=_spec(
            "implementation", implementation, attempt_dir, env or {}, ("one_shot",)
        ),
        evaluator=_spec("problem_evaluator", evaluator, attempt_dir, env or {}),
        attempt_dir=attempt_dir,
        timeouts=timeouts or Timeouts(),
        phase_marks=phase_marks,
    )
    worker = (
        ImplementationWorker(accounting_backend, opener=accounting_opener)
        if accounting_opener is not None
        else ImplementationWorker(accounting_backend)
    )
    try:
        outcome = AttemptRun(spec, worker, release_worker=True).run()
    finally:
        worker.finish(spec.timeouts.shutdown_s)
    return _fixed_outcome(outcome, attempt_dir)


def _provided_dataset(dataset_dir: str) -> MaterializedDataset:
    """A dataset directory given as is: its identity is its path, and it was not materialized
    here, so it has no materialization time."""
    definition = DatasetDef("provided", "fixed", path=os.path.abspath(dataset_dir))
    config = DatasetConfig(
        definition,
        {},
        0,
        canonical.identity("dataset-configuration", {"version": 1, "path": definition.path}),
    )
    receipt = {"schema_version": 1, "derivation_id": config.identity, "kind": "provided"}
    return MaterializedDataset(
        config,
        config.identity,
        definition.path,
        forms.unavailable(Reason.PROVIDED_DATASET),
        {**receipt, "origin": "provided"},
    )


def _fixed_outcome(
    outcome: AttemptOutcome, attempt_dir: str
) -> FixedDatasetResult | FixedDatasetFailure:
    """The attempt's outcome as the API returns it: a failure with its code, or the result."""
    m = outcome.measurements
    if not outcome.accepted:
        return FixedDatasetFailure(str(outcome.code), outcome.message or "", m, outcome.tree_memory)
    # An accepted attempt has complete wall and evaluation times; observation_timing refuses
    # anything else instead of turning a missing value into 0.
    timing = observation_timing(m, outcome.implementation_time_ns)
    return FixedDatasetResult(
        measurements=m,
        tree_memory=outcome.tree_memory,
        result=outcome.result or {},
        metrics=outcome.metrics or {},
        timed_wall_time_ns=timing["timed_wall_time_ns"],
        evaluation_time_ns=timing["evaluation_time_ns"],
        implementation_time_ns=outcome.implementation_time_ns,
        statistics=outcome.statistics,
        result_dir=os.path.join(attempt_dir, rundir.ATTEMPT_RESULT_DIR),
        metrics_path=os.path.join(attempt_dir, rundir.ATTEMPT_METRICS_DIR, rundir.ATTEMPT_METRICS),
    )
