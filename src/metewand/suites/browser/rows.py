"""Browser result rows (``results.jsonl``), as docs/DESIGN.md "Browser result row" defines them.

Each row also carries the peer benchmark's row fields under the peer's names and meanings
(``subset_id``, ``seed``, ``attempt`` from 1, ``failure`` {class, detail, origin}, ``driver``,
``artifact_dir``, ``cdp_call_count``, ...), so the peer's own readers can read our run directory;
metewand's own fields (``subset``, ``failure_class``, ``cdp``, ...) stay beside them.

A row is built once, whole: ``attempt_row`` for an attempt that ran (the base, the driver's
result, the observers' blocks, the engine's facts), ``not_run_row`` for one that could not.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Any, Final

from metewand.runtime import rundir
from metewand.runtime.row_head import RowHead
from metewand.suites.browser.attempt_driver import AttemptResult, attempt_seed, jsonable
from metewand.suites.browser.classify import Classification
from metewand.suites.browser.driver_paths import driver_path_key
from metewand.suites.browser.observers.base import Observed
from metewand.suites.browser.tasks import Task


@dataclass(frozen=True)
class PlannedAttempt:
    """One engine's slot for one task-attempt, in execution order."""

    task: Task
    engine: str
    attempt: int
    round: int
    position: int
    # False: the unprofiled twin of an interleaved calibration (same task-attempt, same engine
    # process, no sampler); its row is kept, marked, and read only by the calibration.
    observed: bool = True

    @property
    def key(self) -> str:
        key = attempt_key(self.task, self.engine, self.attempt)
        return key if self.observed else key + TWIN_SUFFIX

    @property
    def label(self) -> str:
        label = f"{self.task.task_id} x {self.engine} #{self.attempt}"
        return label if self.observed else label + " (observer off)"


# a sibling of the profiled twin's artifact dir, never inside it
TWIN_SUFFIX: Final = "-observer-off"


def attempt_key(task: Task, engine: str, attempt: int) -> str:
    return f"{task.layer}/{task.subset_id}/{task.task_id}/{engine}/{attempt}"


def task_title(task: Task) -> str:
    """The task's ``title``, else its (required) ``description``: what a report shows."""
    title = task.data.get("title")
    if isinstance(title, str) and title.strip():
        return title
    return str(task.data.get("description", ""))


# the peer's two evaluation axes, by layer, for task files that do not name theirs
AXIS_BY_LAYER = {
    "L1": "protocol_driver_compatibility",
    "L2": "web_platform_workflow_semantic_correctness",
}
# metewand scores every selected engine on its own attempts (no Chrome gate), which is what the
# peer's ``chrome_gate`` object says for its ``independent`` score mode
INDEPENDENT_GATE = {"status": "independent", "required": False, "chrome_attempt_ref": None}
# origins that mean the CDP socket went away during the attempt
DISCONNECT_ORIGINS = ("client_transport", "engine_process")


def base_row(
    run_id: str, planned: PlannedAttempt, isolation: str, base_seed: str | int | None
) -> dict[str, Any]:
    task = planned.task
    return {
        "key": planned.key,
        "run_id": run_id,
        "layer": task.layer,
        "subset": task.subset_id,
        "subset_id": task.subset_id,
        "task_id": task.task_id,
        "task_version": task.data.get("task_version"),
        "title": task_title(task),
        "task_path": task.path,
        "driver": task.driver_kind,
        # the driver path (registry key) a driver task runs through; the harness's own CDP
        # driver for raw_cdp and the probes
        "driver_path": driver_path_key(task),
        "evaluation_axis": task.data.get("evaluation_axis") or AXIS_BY_LAYER.get(task.layer),
        "launch_profile": task.data.get("launch_profile", "default"),
        "engine": planned.engine,
        "attempt": planned.attempt,
        "seed": attempt_seed(base_seed, task.task_id, planned.attempt),
        "isolation": isolation,
        "order": {"round": planned.round, "position": planned.position},
        "chrome_gate": dict(INDEPENDENT_GATE),
        "fallback_used": False,  # no driver or route fallback exists in metewand
        # every row with a status enters scores.json (infra and crash count as not passed),
        # except an interleaved calibration's unprofiled twin, which only the calibration reads
        "score_included": planned.observed,
        **({} if planned.observed else {"calibration_twin": True, "observer": "off"}),
    }


def peer_failure(
    status: str, failure_class: str | None, origin: str | None, reason: str
) -> dict[str, Any] | None:
    """The peer's ``failure`` object: null for a pass, else its class, detail and origin."""
    if status == "pass":
        return None
    return {"class": failure_class or "infra", "detail": reason, "origin": origin}


def attempt_row(
    base: dict[str, Any],
    result: AttemptResult,
    observed: Sequence[Observed],
    *,
    started_at: str,
    finished_at: str,
    engine_process: dict[str, Any],
    engine_provenance: dict[str, Any],
    run_context: dict[str, Any],
) -> dict[str, Any]:
    """The whole row of an attempt that ran (any status): the base, the driver's result and its
    own fields (which may restate ``isolation`` and ``driver_path``), the engine's facts, every
    observer's block. Its files: the driver's, ``outcome.json``, then the observers'."""
    files = [*result.artifacts, rundir.ATTEMPT_OUTCOME, *(f for o in observed for f in o.artifacts)]
    artifacts = [f"{rundir.ARTIFACTS}/{base['key']}/{name}" for name in files]
    head = _head(base, result.status, started_at, finished_at, artifacts).fields()
    fields = {
        **base,
        **_verdict_fields(result),
        "duration_ms": result.duration_ms,
        "checks": list(result.checks),
        "cdp": {
            "wait_ms": None if result.cdp_wait_ms is None else round(result.cdp_wait_ms, 3),
            "commands": result.cdp_commands,
            "errors": result.cdp_errors,
        },
        "cdp_call_count": result.cdp_commands,
        "cdp_error_count": result.cdp_errors,
        "ws_disconnect_count": 1 if result.origin in DISCONNECT_ORIGINS else 0,
        "answer": jsonable(result.answer),
        "artifact_dir": f"artifacts/{base['key']}",
        "engine_process": engine_process,
        "engine_provenance": engine_provenance,
        "run_context": run_context,
        "notes": list(result.notes),
        **result.row_fields,
    }
    return {**fields, **_blocks(observed, taken=fields.keys() | head.keys()), **head}


def _verdict_fields(verdict: AttemptResult | Classification) -> dict[str, Any]:
    """How the attempt ended, in the peer's ``failure`` object and in metewand's fields."""
    return {
        "failure": peer_failure(
            verdict.status, verdict.failure_class, verdict.origin, verdict.reason
        ),
        "failure_class": verdict.failure_class,
        "origin": verdict.origin,
        "secondary_status": verdict.secondary_status,
        "reason": verdict.reason,
    }


def _blocks(observed: Sequence[Observed], taken: Set[str]) -> dict[str, Any]:
    """The observers' row fields; a field another observer, the driver or the base already
    holds is a programming error (two owners for one field), never silently overwritten."""
    merged: dict[str, Any] = {}
    for block in observed:
        clash = sorted(name for name in block.fields if name in taken or name in merged)
        if clash:
            raise ValueError(f"observer {block.name!r} adds row fields another part owns: {clash}")
        merged.update(block.fields)
    return merged


def not_run_row(
    base: dict[str, Any], verdict: Classification, at: str, engine_facts: dict[str, Any]
) -> dict[str, Any]:
    """A row for an attempt that could not run (engine missing, engine would not start):
    a status with its reason, never numbers."""
    head = _head(base, verdict.status, at, at, [])  # nothing ran: no artifacts
    return {
        **base,
        **_verdict_fields(verdict),
        "duration_ms": None,
        "checks": [],
        "cdp": None,
        "cdp_call_count": 0,
        "cdp_error_count": 0,
        "ws_disconnect_count": 0,
        "answer": None,
        "artifact_dir": None,  # nothing ran, so no artifact directory was written
        # no engine process served it: the peer's objects with every fact null
        "engine_provenance": {
            "engine": base["engine"],
            "binary": None,
            "binary_sha256": None,
            "pid": None,
            "browser_ws": None,
            "http_endpoint": None,
            "http_identity": {},
            "launch_command": None,
        },
        "run_context": {
            "browser_generation": None,
            "browser_pid": None,
            "prev_task_id": None,
            "started_monotonic_ms": None,
            "worker_slot": None,
        },
        "engine_process": engine_facts,
        "notes": [],
        "traffic": None,
        **head.fields(),
    }


def _head(
    base: dict[str, Any], status: str, started_at: str, finished_at: str, artifacts: list[str]
) -> RowHead:
    return RowHead(
        key=base["key"],
        status=status,
        attempt=base["attempt"],
        artifacts=artifacts,
        run_id=base["run_id"],
        started_at=started_at,
        finished_at=finished_at,
    )
