"""Drivers: how one task's ``driver`` block is run on a page, then graded.

``DRIVERS`` maps a task's ``driver.kind`` to its runner. Each runner returns a ``DriverVerdict``
(checks, answer, observations, and the classification when it is not a plain pass/fail) or
raises a ``DriverError``/CDP exception that ``classify`` maps to a status.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote

from metewand.suites.browser import classify
from metewand.suites.browser.cdp import CdpClient, CdpError
from metewand.suites.browser.checks import CheckResult, run_checks
from metewand.suites.browser.errors import DriverUnavailable
from metewand.suites.browser.phase_marks import Mark, no_mark, step_phase
from metewand.suites.browser.probes import (
    NO_GRADER_ACCESS,
    GraderAccess,
    ProbeContext,
    probe_for,
)
from metewand.suites.browser.steps import RawCdpState, reset_download_behavior, run_steps
from metewand.suites.browser.substitute import RunnerTokens
from metewand.suites.browser.tasks import Task

SCENE_READY_LIMIT_S: Final = 3.0
SCENE_POLL_S: Final = 0.1
SCENE_SETTLE_S: Final = 0.2
ABOUT_BLANK_FIXTURE: Final = "/l1/core"  # what {fixture_url} means on an about:blank scene


@dataclass
class AttemptContext:
    """Everything a driver needs for one attempt."""

    task: Task
    client: CdpClient
    page_session: str
    engine: str
    fixture_base_url: str
    artifact_dir: str
    run_id: str
    attempt: int
    seed: str
    notes: list[str] = field(default_factory=list)  # cleanup trouble, never a status change
    grader: GraderAccess = NO_GRADER_ACCESS
    mark: Mark = no_mark  # a phase boundary (phase_marks): page work the engine is charged for

    @property
    def command_timeout_s(self) -> float:
        return self.task.task_ms / 1000


@dataclass
class DriverVerdict:
    classification: classify.Classification
    checks: list[CheckResult]
    answer: Any = None
    observations: dict[str, Any] = field(default_factory=dict)


def verdict_from_checks(checks: list[CheckResult]) -> classify.Classification:
    failed = [c.name for c in checks if not c.ok]
    return classify.graded_fail(failed) if failed else classify.passed()


async def _quiet(ctx: AttemptContext, method: str, params: dict[str, Any]) -> Any:
    """A scene-preparation command: a protocol error here is left for the steps to meet."""
    try:
        return await ctx.client.send(
            method, params, session_id=ctx.page_session, timeout=ctx.command_timeout_s
        )
    except CdpError:
        return None


def _uses_runtime(task: Task) -> bool:
    return any(str(s.get("method", "")).startswith("Runtime.") for s in task.driver["steps"])


async def prepare_scene(ctx: AttemptContext) -> None:
    """Open the scene. An about:blank scene is re-navigated only for tasks with Runtime steps
    (as the corpus's harness does); otherwise its load events would be buffered and satisfy a
    task's own later ``Page.loadEventFired`` wait too early."""
    scene = ctx.task.scene
    if scene["kind"] != "self_hosted_fixture":
        if _uses_runtime(ctx.task):
            await _quiet(ctx, "Page.enable", {})
            await _quiet(ctx, "Page.navigate", {"url": "about:blank"})
            await asyncio.sleep(SCENE_SETTLE_S)
        return
    await _quiet(ctx, "Page.enable", {})
    await _quiet(ctx, "Page.navigate", {"url": ctx.fixture_base_url + scene["url"]})
    deadline = time.monotonic() + SCENE_READY_LIMIT_S
    while time.monotonic() < deadline:
        reply = await _quiet(
            ctx, "Runtime.evaluate", {"expression": "document.readyState", "returnByValue": True}
        )
        state = ((reply or {}).get("result") or {}).get("value")
        if state in ("interactive", "complete"):
            break
        await asyncio.sleep(SCENE_POLL_S)
    await asyncio.sleep(SCENE_SETTLE_S)


def runner_tokens(ctx: AttemptContext) -> RunnerTokens:
    scene = ctx.task.scene
    path = scene["url"] if scene["kind"] == "self_hosted_fixture" else ABOUT_BLANK_FIXTURE
    return RunnerTokens(
        fixture_url=ctx.fixture_base_url + path,
        fixture_path=str(ctx.task.fixtures_dir),
        artifact_dir=ctx.artifact_dir,
    )


async def run_raw_cdp(ctx: AttemptContext) -> DriverVerdict:
    ctx.mark("scene")
    await prepare_scene(ctx)
    state = RawCdpState(ctx.client, ctx.page_session, runner_tokens(ctx), ctx.command_timeout_s)
    try:
        await run_steps(
            list(ctx.task.driver["steps"]), state, lambda i, step: ctx.mark(step_phase(i, step))
        )
    finally:
        if state.download_domains:
            ctx.mark("download_reset")
        ctx.notes += await reset_download_behavior(state)
    ctx.mark("grade")
    checks = run_checks(list(ctx.task.grader["checks"]), state.saved)
    return DriverVerdict(verdict_from_checks(checks), checks, state.answer, state.saved)


def grader_session(run_id: str, task_id: str, engine: str, attempt: int, seed: str) -> str:
    """The per-attempt ``session`` value shared by the page, the grader and the grade ledger."""
    return f"{run_id}-{task_id}-{engine}-{attempt}-{seed}"


def probe_session(ctx: AttemptContext) -> str:
    return grader_session(ctx.run_id, ctx.task.task_id, ctx.engine, ctx.attempt, ctx.seed)


async def run_node_cdp_probe(ctx: AttemptContext) -> DriverVerdict:
    kind = probe_for(ctx.task.driver)
    if kind is None:
        raise DriverUnavailable(f"no metewand probe for script {ctx.task.driver.get('script')!r}")
    session = probe_session(ctx)
    url_path = str(ctx.task.scene["url"])
    url_path = url_path.replace("{seed}", quote(ctx.seed)).replace("{session}", quote(session))
    env = ctx.task.driver.get("env") or {}
    probe_ctx = ProbeContext(
        ctx.client,
        ctx.page_session,
        ctx.fixture_base_url + url_path,
        env.get("PROBE_SPEC") or {},
        ctx.command_timeout_s,
        session,
    )
    ctx.mark("probe")
    result = await kind.run(probe_ctx)
    ctx.mark("grade")
    payload = {
        "run_id": ctx.run_id,
        "task_id": ctx.task.task_id,
        "attempt": ctx.attempt,
        "engine": ctx.engine,
        "seed": ctx.seed,
        "session": session,
        "answer": result.answer,
        "observations": result.observations,
    }
    verdict = await ctx.grader.grade(
        ctx.fixture_base_url, str(ctx.task.grader["endpoint"]), payload
    )
    checks, infra = server_checks(verdict)
    if verdict.get("ok") is True:
        outcome = classify.passed()
    elif infra is not None:
        outcome = classify.grader_infra(f"grader: {infra}")
    else:
        outcome = classify.graded_fail([c.name for c in checks if not c.ok] or ["answer"])
    return DriverVerdict(outcome, checks, result.answer, result.observations)


def server_checks(verdict: Mapping[str, Any]) -> tuple[list[CheckResult], str | None]:
    """A server-side grader's check rows, and its detail when it had no verdict to give
    (failure class ``infra``, e.g. no expected answer registered for the task)."""
    checks = [_server_check(c) for c in verdict.get("checks") or []]
    if verdict.get("ok") is not True and _failure_class(verdict) == "infra":
        return checks, _failure_detail(verdict)
    return checks, None


def _server_check(check: Any) -> CheckResult:
    if not isinstance(check, Mapping):
        return CheckResult(str(check), "server_side", "fail", "malformed check from grader")
    status = "pass" if check.get("status") in ("pass", True) or check.get("ok") is True else "fail"
    name = str(check.get("name", "server_check"))
    evidence = check.get("evidence", check.get("detail", ""))
    return CheckResult(name, "server_side", status, str(evidence))


def _failure_class(verdict: Mapping[str, Any]) -> str | None:
    failure = verdict.get("failure")
    if isinstance(failure, Mapping):
        return str(failure.get("class")) if failure.get("class") else None
    return None


def _failure_detail(verdict: Mapping[str, Any]) -> str:
    failure = verdict.get("failure")
    if isinstance(failure, Mapping):
        return str(failure.get("detail") or failure.get("message") or failure)
    return str(failure)


DriverFn = Callable[[AttemptContext], Awaitable[DriverVerdict]]

DRIVERS: Final[dict[str, DriverFn]] = {
    "raw_cdp": run_raw_cdp,
    "node_cdp_probe": run_node_cdp_probe,
}
