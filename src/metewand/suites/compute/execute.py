"""One attempt with the document's exact timing envelopes.

Order: evaluator launch + hello (evaluator startup, outside every envelope) → [cold envelope
starts] implementation launch + hello (worker startup) → [prepare_and_execute envelope starts]
prepare → dataset integrity check → [execute_only envelope starts] execute, through its complete
response → [envelope ends] resource readings → result validation → evaluate (evaluation) →
metrics validation and result re-hash → shutdown of the evaluator and (on its last attempt)
the implementation, concurrently. Every phase timer uses ``time.monotonic_ns``.

A failure at any point publishes the attempt with a diagnostic code; the interrupted phase (and
the timed wall, once its envelope began) becomes partial ``interrupted``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from metewand.errors import MetewandError
from metewand.measure import forms
from metewand.measure.clock import utc_now
from metewand.measure.forms import Measurement, Reason
from metewand.runtime import rundir
from metewand.suites.compute.manifest import ProblemDef
from metewand.suites.compute.materialize import MaterializedDataset
from metewand.suites.compute.payload import (
    CPU_SCOPE_FOR_TIMING_SCOPE,
    AccountingBackend,
    ExecutionMeasurements,
    TimedWallInclusion,
)
from metewand.suites.compute.phase_marks import AttemptPhases
from metewand.suites.compute.plan import PlannedAttempt
from metewand.suites.compute.protocol import (
    PhaseTimeout,
    ProtocolViolation,
    WorkerError,
    WorkerGone,
)
from metewand.suites.compute.session import LaunchSpec, WorkerSession, shutdown_concurrently
from metewand.suites.compute.tree_memory import TreeMemory
from metewand.suites.compute.validate import (
    InvalidOutput,
    dataset_sizes,
    read_metrics,
    read_result,
    tree_sha256,
)
from metewand.suites.compute.workers import ImplementationWorker, read_resources

T = TypeVar("T")


@dataclass(frozen=True)
class Timeouts:
    hello_s: float = 30.0
    prepare_s: float = 300.0
    execute_s: float = 300.0
    evaluate_s: float = 300.0
    shutdown_s: float = 5.0


class AttemptFailure(MetewandError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class AttemptInput:
    attempt: PlannedAttempt
    problem: ProblemDef
    dataset: MaterializedDataset
    implementation: LaunchSpec
    evaluator: LaunchSpec
    attempt_dir: str  # private: result/, metrics/, logs/
    timeouts: Timeouts = field(default_factory=Timeouts)
    setup_error: str | None = None  # a build or materialization failure found before launch
    phase_marks: bool = True  # metewand run --no-phase-marks: no marks, the row's phases null
    dataset_output_schema: str = ""  # its schema id (enters the resolved dataset instance)


@dataclass
class AttemptOutcome:
    attempt: PlannedAttempt
    measurements: ExecutionMeasurements
    started_at: str
    finished_at: str = ""
    code: str | None = None
    message: str | None = None
    result: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None
    result_sha256: str | None = None
    statistics: dict[str, Any] = field(default_factory=dict)
    implementation_time_ns: int | None = None
    worker: dict[str, Any] = field(default_factory=dict)
    evaluator: dict[str, Any] = field(default_factory=dict)  # pid, reused (always False today)
    logs: dict[str, Any] = field(default_factory=dict)
    # metewand_attempt_phases/1 (the row's own field; None when marks were off)
    phases: dict[str, Any] | None = None
    # The kernel's memory high-water of the worker tree (beside the payload, not in it).
    tree_memory: TreeMemory = field(
        default_factory=lambda: TreeMemory(
            forms.unavailable(Reason.NOT_STARTED), AccountingBackend.NONE
        )
    )

    @property
    def accepted(self) -> bool:
        return self.code is None


def classify(exc: BaseException, role: str, phase: str) -> AttemptFailure:
    """The diagnostic code for an exception raised while talking to ``role``."""
    if isinstance(exc, AttemptFailure):
        return exc
    if isinstance(exc, PhaseTimeout):
        return AttemptFailure("phase_timeout", f"{role} {phase}: {exc}")
    if role == "evaluator":
        code = "setup_failure" if isinstance(exc, OSError) else "evaluator_failure"
        return AttemptFailure(code, f"evaluator {phase}: {exc}")
    if isinstance(exc, OSError):
        return AttemptFailure("setup_failure", f"cannot launch the implementation: {exc}")
    if isinstance(exc, ProtocolViolation):
        return AttemptFailure("protocol_error", f"implementation {phase}: {exc}")
    if isinstance(exc, WorkerGone):
        return AttemptFailure("implementation_crash", f"implementation {phase}: {exc}")
    if isinstance(exc, WorkerError):
        code = "protocol_error" if phase == "hello" else "implementation_failure"
        return AttemptFailure(code, f"implementation {phase}: {exc}")
    if isinstance(exc, InvalidOutput):
        return AttemptFailure("invalid_result", str(exc))
    return AttemptFailure("internal_error", f"{phase}: {type(exc).__name__}: {exc}")


class AttemptRun:
    """Runs one attempt on an (optionally reused) implementation worker."""

    def __init__(
        self, spec: AttemptInput, worker: ImplementationWorker, release_worker: bool = True
    ) -> None:
        """``release_worker``: this is the worker's last attempt (shut it down with the evaluator).

        A reused worker's earlier attempts pass False and keep it alive for the next attempt.
        """
        self.spec = spec
        self.worker = worker
        self.release_worker = release_worker
        scope = spec.attempt.policy.timing_scope
        self.scope = scope
        self.m = ExecutionMeasurements.not_started(
            CPU_SCOPE_FOR_TIMING_SCOPE[scope], spec.dataset.measurement
        )
        self.values: dict[str, Measurement] = {}
        self.open_phase: tuple[str, int] | None = None
        self.envelope_start: int | None = None
        self.outcome = AttemptOutcome(spec.attempt, self.m, utc_now())
        self.evaluator: WorkerSession | None = None
        self.phase, self.role = "setup", "implementation"
        self.phases = AttemptPhases(spec.phase_marks)

    # -- timing helpers ------------------------------------------------------------------

    def timed(self, name: str, fn: Callable[[], T]) -> T:
        start = time.monotonic_ns()
        self.open_phase = (name, start)
        value = fn()
        self.values[name] = forms.complete(time.monotonic_ns() - start)
        self.open_phase = None
        return value

    def _close_interrupted(self) -> None:
        now = time.monotonic_ns()
        if self.open_phase is not None:
            name, start = self.open_phase
            self.values[name] = forms.partial(now - start, Reason.INTERRUPTED)
        if self.envelope_start is not None and "timed_wall_time_ns" not in self.values:
            self.values["timed_wall_time_ns"] = forms.partial(
                now - self.envelope_start, Reason.INTERRUPTED
            )

    # -- the attempt ---------------------------------------------------------------------

    def run(self) -> AttemptOutcome:
        # self.phase names what was under way when a failure struck (execute, not "prepare",
        # once _prepare_execute has moved on); self.role whose exchange it was.
        self.phase, self.role = "setup", "implementation"
        try:
            if self.spec.setup_error:
                raise AttemptFailure("setup_failure", self.spec.setup_error)
            self.phase, self.role = "startup", "evaluator"
            self.evaluator = self.worker.launch_evaluator(
                self.spec.evaluator, self.spec.attempt_dir
            )
            self.phases.begin("evaluator", self.evaluator.accounting, "evaluator_startup")
            self.timed("evaluator_startup_time_ns", lambda: self._start(self.evaluator))
            self.phases.mark("evaluator", None)
            self.outcome.evaluator = {"pid": self.evaluator.pid, "reused": False}
            self.phase, self.role = "hello", "implementation"
            self._implementation_startup()
            self.phase = "prepare"
            self._prepare_execute()
            self.phase = "validate"
            self._read_resources()
            self._validate_result()
            self.phase, self.role = "evaluate", "evaluator"
            self._evaluate()
        except BaseException as exc:
            self._fail(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._finish()
        return self.outcome

    def _fail(self, exc: BaseException) -> None:
        failure = classify(exc, self.role, self.phase)
        gone = isinstance(exc, WorkerGone) and self.role == "implementation"
        if gone and self.worker.exited_cleanly():
            failure = AttemptFailure(
                "protocol_error", f"implementation {self.phase}: exited early: {exc}"
            )
        if self.outcome.code is None:
            self.outcome.code, self.outcome.message = failure.code, failure.message
        self._close_interrupted()
        self._read_resources(interrupted=True)
        self.worker.discard()

    def _start(self, session: WorkerSession | None) -> None:
        assert session is not None
        session.start()
        session.hello(self.spec.timeouts.hello_s)

    def _implementation_startup(self) -> None:
        if self.scope == "cold_end_to_end":
            self.envelope_start = time.monotonic_ns()
        if not self.worker.alive:
            start = time.monotonic_ns()
            self.open_phase = ("worker_startup_time_ns", start)
            try:
                self.worker.start(
                    self.spec.implementation,
                    self.spec.timeouts.hello_s,
                    lambda acc: self.phases.begin("implementation", acc, "worker_startup"),
                )
            finally:
                self.outcome.worker.update(self.worker.describe())
            self.open_phase = None
            self.worker.startup = forms.complete(time.monotonic_ns() - start)
            self.phases.mark("implementation", None)
            self.outcome.worker["reused"] = False
        else:  # a reused worker: its start-up belongs to an earlier attempt
            self.phases.begin("implementation", self.worker.accounting)
            self.outcome.worker["reused"] = True
        self.values["worker_startup_time_ns"] = self.worker.startup
        self.outcome.worker.update(self.worker.describe())

    def _prepare_execute(self) -> None:
        a, t = self.spec.attempt, self.spec.timeouts
        budget = a.policy.timeout_s
        dataset_dir = str(self.spec.dataset.directory)
        sizes = dataset_sizes(dataset_dir)
        request = {
            "dataset_dir": dataset_dir,
            "problem_contract_id": a.problem_contract_id or a.problem,
            "problem_parameters": a.problem_parameters,
            "implementation_parameters": a.implementation_parameters,
            "implementation_seed": a.implementation_seed,
        }
        # Marks stand outside the envelope where they can: before its start, after its end.
        self.phases.mark("implementation", "prepare")
        if self.scope == "prepare_and_execute":
            self.worker.cpu_baseline()
            self.envelope_start = time.monotonic_ns()
        deadline = _Deadline(budget)
        session = self.worker.session
        self.timed(
            "prepare_time_ns",
            lambda: session.call("prepare", request, deadline.left(t.prepare_s)),
        )
        self.phases.mark("implementation", "integrity_check")
        if dataset_sizes(dataset_dir) != sizes:  # inside the continuous wall, outside phases
            raise AttemptFailure("implementation_failure", "prepare modified the dataset")
        self.phase = "execute"
        result_dir = os.path.join(self.spec.attempt_dir, rundir.ATTEMPT_RESULT_DIR)
        os.makedirs(result_dir, exist_ok=True)
        self.phases.mark("implementation", "execute")
        if self.scope == "execute_only":
            self.worker.cpu_baseline()
            self.envelope_start = time.monotonic_ns()
        reply = self.timed(
            "execute_request_time_ns",
            lambda: session.call("execute", {"result_dir": result_dir}, deadline.left(t.execute_s)),
        )
        assert self.envelope_start is not None
        self.values["timed_wall_time_ns"] = forms.complete(
            time.monotonic_ns() - self.envelope_start
        )
        self.phases.mark("implementation", None)
        self._reply = reply

    def _read_resources(self, interrupted: bool = False) -> None:
        self.phases.finish("implementation")  # before a discard releases the accounting
        if "cpu_time_ns" in self.values:
            return
        session = self.worker.session
        if session is None or session.pid is None:
            self.backend = AccountingBackend.NONE  # never launched: nothing was accounted
            return  # not_started stays
        self.backend = self.worker.backend()  # before a discard releases the accounting
        if self.worker.accounting is None:
            # The worker ran without accounting: disabled or unusable here, or not Linux.
            missing = forms.unavailable(self.worker.missing_reason or Reason.ACCOUNTING_UNAVAILABLE)
            self.values["cpu_time_ns"] = self.values["peak_rss_bytes"] = missing
            self.outcome.tree_memory = TreeMemory(missing, AccountingBackend.NONE)
            return
        cpu, rss, tree = read_resources(self.worker, interrupted)
        self.values["cpu_time_ns"], self.values["peak_rss_bytes"] = cpu, rss
        self.outcome.tree_memory = tree

    def _validate_result(self) -> None:
        result_dir = os.path.join(self.spec.attempt_dir, rundir.ATTEMPT_RESULT_DIR)
        reply = self._reply
        impl_ns = reply.get("implementation_time_ns")
        if "implementation_time_ns" not in reply or not (
            impl_ns is None or (isinstance(impl_ns, int) and not isinstance(impl_ns, bool))
        ):
            raise ProtocolViolation(
                "malformed_message", "execute reply needs implementation_time_ns"
            )
        stats = reply.get("statistics", {})
        self.outcome.statistics = stats if isinstance(stats, dict) else {}
        self.outcome.implementation_time_ns = impl_ns if isinstance(impl_ns, int) else None
        self.outcome.result = read_result(result_dir, reply, self.spec.problem.result_schema)
        self.outcome.result_sha256 = tree_sha256(result_dir)

    def _evaluate(self) -> None:
        a, t = self.spec.attempt, self.spec.timeouts
        metrics_dir = os.path.join(self.spec.attempt_dir, rundir.ATTEMPT_METRICS_DIR)
        os.makedirs(metrics_dir, exist_ok=True)
        metrics_path = os.path.join(metrics_dir, rundir.ATTEMPT_METRICS)
        request = {
            "dataset_dir": str(self.spec.dataset.directory),
            "problem_contract_id": a.problem_contract_id or a.problem,
            "problem_parameters": a.problem_parameters,
            "result_dir": os.path.join(self.spec.attempt_dir, rundir.ATTEMPT_RESULT_DIR),
            "metrics_path": metrics_path,
        }
        evaluator = self.evaluator
        assert evaluator is not None
        self.phases.mark("evaluator", "evaluation")
        self.timed("evaluation_time_ns", lambda: evaluator.call("evaluate", request, t.evaluate_s))
        self.phases.mark("evaluator", None)
        try:
            self.outcome.metrics = read_metrics(metrics_path, self.spec.problem.metric_schema)
        except InvalidOutput as exc:
            raise AttemptFailure("evaluator_failure", f"invalid metrics: {exc}") from exc
        if (
            tree_sha256(os.path.join(self.spec.attempt_dir, rundir.ATTEMPT_RESULT_DIR))
            != self.outcome.result_sha256
        ):
            raise AttemptFailure("invalid_result", "the result changed during evaluation")

    def _finish(self) -> None:
        # Both workers exit at once (the cost is the slower exit, not the sum); still before the
        # row is built, so a finished row means no process of the attempt is alive and its log
        # byte counts are final. Shutdown stays outside every phase timer.
        sessions = [self.evaluator] if self.evaluator is not None else []
        if self.release_worker and self.worker.session is not None and self.worker.alive:
            sessions.append(self.worker.session)
        self.phases.finish("evaluator")
        self.outcome.phases = self.phases.to_json()
        self.phases.close()
        shutdown_concurrently(sessions, self.spec.timeouts.shutdown_s)
        if self.release_worker:
            self.worker.discard()
        if self.evaluator is not None:
            self.outcome.logs["evaluator"] = self.evaluator.logs()
        self.outcome.logs["implementation"] = self.worker.logs()
        backend = getattr(self, "backend", AccountingBackend.NONE)
        self.outcome.measurements = replace(
            self.m,
            **self.values,  # type: ignore[arg-type]
            accounting_backend=backend,
            timed_wall_includes=frozenset({TimedWallInclusion.INTEGRITY_CHECKS})
            if self.scope != "execute_only"
            else frozenset(),
        )
        self.outcome.finished_at = utc_now()


class _Deadline:
    """The scientific timeout covers prepare and execute together when set."""

    def __init__(self, budget_s: float | None) -> None:
        self.end = None if budget_s is None else time.monotonic() + budget_s

    def left(self, operational_s: float) -> float:
        if self.end is None:
            return operational_s
        return max(0.0, self.end - time.monotonic())
