"""Browser result rows (``results.jsonl``), as docs/DESIGN.md "Browser result row" defines them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metewand.suites.browser.attempt import AttemptOutcome
from metewand.suites.browser.classify import Classification
from metewand.suites.browser.tasks import Task


@dataclass(frozen=True)
class PlannedAttempt:
    """One engine's slot for one task-attempt, in execution order."""

    task: Task
    engine: str
    attempt: int
    round: int
    position: int

    @property
    def key(self) -> str:
        return attempt_key(self.task, self.engine, self.attempt)

    @property
    def label(self) -> str:
        return f"{self.task.task_id} x {self.engine} #{self.attempt}"


def attempt_key(task: Task, engine: str, attempt: int) -> str:
    return f"{task.layer}/{task.subset_id}/{task.task_id}/{engine}/{attempt}"


def task_title(task: Task) -> str:
    """The task's ``title``, else its (required) ``description``: what a report shows."""
    title = task.data.get("title")
    if isinstance(title, str) and title.strip():
        return title
    return str(task.data.get("description", ""))


def base_row(run_id: str, planned: PlannedAttempt, isolation: str) -> dict[str, Any]:
    task = planned.task
    return {
        "key": planned.key,
        "run_id": run_id,
        "layer": task.layer,
        "subset": task.subset_id,
        "task_id": task.task_id,
        "title": task_title(task),
        "task_path": task.path,
        "engine": planned.engine,
        "attempt": planned.attempt,
        "isolation": isolation,
        "order": {"round": planned.round, "position": planned.position},
    }


def outcome_row(
    base: dict[str, Any],
    outcome: AttemptOutcome,
    started_at: str,
    finished_at: str,
    engine_facts: dict[str, Any],
    artifacts: list[str],
) -> dict[str, Any]:
    """A row for an attempt that ran (any status)."""
    return {
        **base,
        "status": outcome.status,
        "failure_class": outcome.failure_class,
        "origin": outcome.origin,
        "secondary_status": outcome.secondary_status,
        "reason": outcome.reason,
        "duration_ms": outcome.duration_ms,
        "started_at": started_at,
        "finished_at": finished_at,
        "checks": outcome.checks,
        "cdp": {
            "wait_ms": round(outcome.cdp_wait_ms, 3),
            "commands": outcome.cdp_commands,
            "errors": outcome.cdp_errors,
        },
        "engine_process": engine_facts,
        "notes": outcome.notes,
        "traffic": None,
        "artifacts": artifacts,
    }


def not_run_row(
    base: dict[str, Any], verdict: Classification, at: str, engine_facts: dict[str, Any]
) -> dict[str, Any]:
    """A row for an attempt that could not run (engine missing, engine would not start):
    a status with its reason, never numbers."""
    return {
        **base,
        "status": verdict.status,
        "failure_class": verdict.failure_class,
        "origin": verdict.origin,
        "secondary_status": verdict.secondary_status,
        "reason": verdict.reason,
        "duration_ms": None,
        "started_at": at,
        "finished_at": at,
        "checks": [],
        "cdp": None,
        "engine_process": engine_facts,
        "notes": [],
        "traffic": None,
        "artifacts": [],
    }
