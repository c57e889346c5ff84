"""Grading a driver-path attempt from what its adapter reported (``adapter_attempt``).

The adapter's check rows are the contract's grading surface: every check the task declares must
be among them (an adapter that drops one is not trusted); rows it reported that the task does not
declare are kept apart, never graded. A server-graded task's value checks are graded here from
what the adapter saved, and its saved ``answer`` goes to the fixture server's grader, whose checks
are appended (both must pass).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from metewand.suites.browser import classify
from metewand.suites.browser.ab_probe_tasks import is_ab_probe
from metewand.suites.browser.adapter_payload import VALUE_CHECK_KINDS, server_graded
from metewand.suites.browser.adapters import AdapterRun
from metewand.suites.browser.checks import CheckResult
from metewand.suites.browser.classify import Classification
from metewand.suites.browser.drivers import server_checks
from metewand.suites.browser.errors import GraderUnavailable
from metewand.suites.browser.tasks import Task

if TYPE_CHECKING:
    from metewand.suites.browser.adapter_attempt import AdapterAttempt

PEER_COMPATIBLE: Final = "peer-compatible"


def _declared_labels(task: Task) -> list[str]:
    return [
        str(c.get("label") or c.get("kind"))
        for c in task.driver.get("checks") or []
        if isinstance(c, Mapping)
    ]


def _adapter_checks(run: AdapterRun) -> list[CheckResult]:
    return [
        CheckResult(
            str(c.get("name", "?")),
            "driver",
            "pass" if c.get("status") == "pass" else "fail",
            str(c.get("evidence", "")),
        )
        for c in run.checks
    ]


# every adapter reports its connection as a check row of its own (the contract's first row)
CONTRACT_CHECKS: Final = frozenset({"driver_connect"})


def graded_view(
    task: Mapping[str, Any], run: AdapterRun
) -> tuple[AdapterRun, list[dict[str, Any]]]:
    """The adapter's result as it is graded, and the check rows it reported that the task does
    not declare (kept apart, labelled, never graded). A server-graded task's value checks,
    whose expected values the adapter never got (``adapter_payload.adapter_checks``), are
    graded here from what it saved; the task's own expected value is the reference."""
    if run.result is None:
        return run, []
    specs = {
        str(c.get("label") or c.get("kind")): c
        for c in declared_checks(task.get("driver") or {})
        if isinstance(c, Mapping)
    }
    kept, extra = [], []
    for row in run.checks:
        name = str(row.get("name", "?"))
        if name not in specs and name not in CONTRACT_CHECKS:
            extra.append(row)
        elif name in specs and server_graded(task):
            kept.append(_runner_graded(row, specs[name], _saved(run.result)))
        else:
            kept.append(row)
    observations = run.result.get("observations")
    observations = dict(observations) if isinstance(observations, Mapping) else {}
    return dataclasses.replace(
        run, result={**run.result, "observations": {**observations, "checks": kept}}
    ), extra


def declared_checks(driver: Mapping[str, Any]) -> list[Any]:
    """The checks a task declares: ``driver.checks``, or for an agent-browser tool probe its
    ``driver.env.AB_CHECKS`` (that adapter grades those)."""
    if is_ab_probe(driver):
        env = driver.get("env")
        return list(env.get("AB_CHECKS") or []) if isinstance(env, Mapping) else []
    return list(driver.get("checks") or [])


def _saved(result: Mapping[str, Any]) -> Mapping[str, Any]:
    observations = result.get("observations")
    saved = observations.get("saved") if isinstance(observations, Mapping) else None
    return saved if isinstance(saved, Mapping) else {}


def _runner_graded(
    row: dict[str, Any], spec: Mapping[str, Any], saved: Mapping[str, Any]
) -> dict[str, Any]:
    kind, expected = spec.get("kind"), spec.get("expected")
    if kind not in VALUE_CHECK_KINDS or "expected" not in spec:
        return row
    value = saved.get(str(spec.get("name", "")))
    if kind == "saved_equals":
        ok = value == expected
    else:
        found = isinstance(value, str) and isinstance(expected, str) and expected in value
        ok = found if kind == "saved_contains" else isinstance(value, str) and not found
    evidence = f"graded by the runner: saved {spec.get('name')}={json.dumps(value)[:200]}"
    return {**row, "status": "pass" if ok else "fail", "evidence": evidence}


def grader_answer(result: Mapping[str, Any] | None) -> Any:
    """What a server-side grader is given: the step saved as ``answer`` (the corpus's expected
    answers are those values), else the adapter's own ``answer``."""
    result = result or {}
    observations = result.get("observations")
    saved = observations.get("saved") if isinstance(observations, Mapping) else None
    if isinstance(saved, Mapping) and "answer" in saved:
        return saved["answer"]
    return result.get("answer")


async def grade_adapter_run(
    task: Task, run: AdapterRun, engine: str, ids: AdapterAttempt
) -> tuple[Classification, list[CheckResult], Any]:
    """The attempt's classification, its check rows and the graded answer."""
    checks = _adapter_checks(run)
    if run.outcome == "adapter_error" and _error_class(run) == "engine_unsupported":
        # the contract's harness error naming an engine gap (as the peer's runner reads it)
        reason = f"adapter_error: {run.detail}"
        return Classification("unsupported", "engine_unsupported", "adapter", reason), checks, None
    if run.outcome != "result":
        return run.classification(), checks, None
    run, _ = graded_view(task.data, run)
    checks = _adapter_checks(run)
    answer = grader_answer(run.result)
    reported = {c.name for c in checks}
    missing = [label for label in _declared_labels(task) if label not in reported]
    if missing:
        return classify.adapter_checks_missing(missing), checks, answer
    verdict = run.classification()
    if task.grader.get("kind") != "server_side":
        return verdict, checks, answer  # inline: the reported checks are the verdict
    try:
        server = await _server_verdict(task, run, engine, ids, answer)
    except GraderUnavailable as exc:
        return classify.classify_exception(exc), checks, answer
    graded = list(checks)
    if ids.score_mode == PEER_COMPATIBLE and task.layer == "L1":
        # the server's verdict alone (the driver's checks stay in the row, ungraded)
        graded = [c for c in checks if c.name == "driver_connect"]
        if verdict.status == "fail" and all(c.ok for c in graded):
            verdict = classify.passed()
    checks += server.checks
    if server.infra is not None:
        return classify.grader_infra(f"grader: {server.infra}"), checks, answer
    failed = [c.name for c in graded + server.checks if not c.ok]
    if verdict.status == "pass" and failed:
        verdict = classify.graded_fail(failed)
    return verdict, checks, answer


def _error_class(run: AdapterRun) -> str | None:
    error = (run.result or {}).get("error")
    return str(error.get("class")) if isinstance(error, Mapping) else None


@dataclass(frozen=True)
class _ServerVerdict:
    checks: list[CheckResult]
    infra: str | None  # the grader had no verdict to give (e.g. no expected answer)


async def _server_verdict(
    task: Task, run: AdapterRun, engine: str, ids: AdapterAttempt, answer: Any
) -> _ServerVerdict:
    observations = (run.result or {}).get("observations") or {}
    payload = {
        "run_id": ids.run_id,
        "task_id": task.task_id,
        "attempt": ids.attempt,
        "engine": engine,
        "seed": ids.seed,
        "session": ids.session(task.task_id, engine),
        "answer": answer,
        "observations": observations,
    }
    verdict = await ids.grader.grade(ids.fixture_base_url, str(task.grader["endpoint"]), payload)
    checks, infra = server_checks(verdict)
    if verdict.get("ok") is not True and not any(not c.ok for c in checks) and infra is None:
        checks.append(CheckResult("answer", "server_side", "fail", f"answer {answer!r}"))
    return _ServerVerdict(checks, infra)
