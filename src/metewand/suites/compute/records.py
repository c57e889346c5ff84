"""Result rows: the published attempt record, its observation, and the row around them.

Row (one canonical line of ``results.jsonl``): ``key``, ``status`` (accepted | failed),
``attempt`` (retry index), ``role`` (measured | warmup), ``code``, the plan coordinates and their
logical identities, ``record`` (attempt schema), ``observation`` (observation schema or null),
``artifacts``, ``phases`` (``metewand_attempt_phases/1`` or null: where the wall and CPU went).

Identities follow the Rust metewand's records (``identities.IDENTITY_RECIPE``, recorded as
``provenance.identity_recipe``): the attempt's ``slot_id`` is its resolved attempt slot and its
``id`` the ``attempt`` record (resolved slot + retry index); an observation's ``slot_id`` is its
resolved observation slot and its ``id`` the ``observation`` record (slot, producing attempt,
result and metrics artifacts, durations, completion). The resolved specification and its parts
are in ``provenance.data.context.resolved``. A dataset that never materialized has no artifact,
so such an attempt has no resolved slot: its ``slot_id`` stays the logical slot and
``resolved`` says why. Rows of runs written before carry no ``identity_recipe``: their ids
follow recipe 1 (``identity_recipe`` reads them so).
"""

from __future__ import annotations

import os
from typing import Any

from metewand.runtime import rundir
from metewand.runtime.row_head import RowHead
from metewand.suites.compute import identities as ids
from metewand.suites.compute import resolved
from metewand.suites.compute.execute import AttemptInput, AttemptOutcome
from metewand.suites.compute.payload import observation_timing
from metewand.suites.compute.validate import file_sha256
from metewand.version import tool_version

VERSIONS = {
    "public_schema_version": 1,
    "identity_version": ids.IDENTITY_VERSION,
    "identity_recipe": ids.IDENTITY_RECIPE,
    "manifest_version": 1,
    "wire_protocol_version": resolved.WIRE_PROTOCOL_VERSION,
    "execution_semantics_version": resolved.EXECUTION_SEMANTICS_VERSION,
}


def identity_recipe(row: dict[str, Any]) -> int:
    """Which record bodies a row's mw1 ids follow (rows written before say nothing: 1)."""
    provenance = row.get("record", {}).get("provenance", {})
    return int(provenance.get("identity_recipe", ids.LEGACY_IDENTITY_RECIPE))


def resolve(spec: AttemptInput, receipt: dict[str, Any], jobs: int) -> dict[str, Any]:
    """The attempt's resolved records (``{"reason": …}`` when its dataset has no artifact)."""
    a = spec.attempt
    tree = receipt.get("output_sha256")
    if not tree or not spec.dataset_output_schema:
        return {"reason": "the dataset was not materialized: no artifact, no resolved slot"}
    dataset = ids.record(
        "dataset-instance",
        configuration=a.dataset.identity,
        artifact=resolved.dataset_artifact(tree),
        output_schema=spec.dataset_output_schema,
    )
    problem = ids.record("problem-instance", dataset=dataset, configuration=a.problem_config_id)
    executor = resolved.executor(jobs)
    specification = ids.record(
        "resolved-specification",
        kind="one_shot",
        logical_specification=a.specification_id,
        problem_instance=problem,
        implementation=spec.implementation.resolved,
        evaluator=spec.evaluator.resolved,
        executor=executor,
        wire_protocol_version=resolved.WIRE_PROTOCOL_VERSION,
        execution_semantics_version=resolved.EXECUTION_SEMANTICS_VERSION,
    )
    out = {
        "dataset_instance": dataset,
        "problem_instance": problem,
        "executor": executor,
        "implementation_worker": spec.implementation.worker_id,
        "evaluator_worker": spec.evaluator.worker_id,
        "specification": specification,
        "attempt_slot": ids.record(
            "resolved-attempt-slot", logical_slot=a.slot_id, specification=specification
        ),
        "observation_slot": None,
    }
    if a.observation_slot_id is not None:
        out["observation_slot"] = ids.record(
            "resolved-observation-slot",
            logical_slot=a.observation_slot_id,
            specification=specification,
        )
    return out


def provenance(
    outcome: AttemptOutcome, receipt: dict[str, Any], jobs: int, resolution: dict[str, Any]
) -> dict[str, Any]:
    return {
        "tool_version": tool_version(),
        **VERSIONS,
        "data": {
            "measurements": outcome.measurements.to_json(),
            # The kernel's tree memory high-water: beside the document's payload, not in it.
            "tree_memory": outcome.tree_memory.to_json(),
            "context": {
                "dataset_materialization": receipt,
                "worker": outcome.worker,
                "evaluator": outcome.evaluator,
                "logs": outcome.logs,
                "concurrency": {"jobs": jobs},
                "timing_scope": outcome.attempt.policy.timing_scope,
                "resolved": resolution,
            },
        },
    }


def _timing_identity(timing: dict[str, Any]) -> dict[str, Any]:
    """The observation identity's timing: durations as ``{seconds, nanoseconds}``."""

    def duration(ns: int | None) -> dict[str, int] | None:
        return None if ns is None else ids.duration(ns)

    return {
        "primary_time": timing["primary_time"],
        "timed_wall_time": duration(timing["timed_wall_time_ns"]),
        "implementation_time": duration(timing["implementation_time_ns"]),
        "evaluation_time": duration(timing["evaluation_time_ns"]),
        "cpu_time": duration(timing["cpu_time_ns"]),
        "peak_rss_bytes": timing["peak_rss_bytes"],
    }


def _observation(
    outcome: AttemptOutcome, attempt_id: str, slot: str, artifact_dir: str, rel: str, prov: dict
) -> dict[str, Any]:
    metrics_path = os.path.join(artifact_dir, rundir.ATTEMPT_METRICS_DIR, rundir.ATTEMPT_METRICS)
    metrics_sha = file_sha256(metrics_path)
    result_sha = str(outcome.result_sha256)
    timing = observation_timing(outcome.measurements, outcome.implementation_time_ns)
    result = {
        "id": ids.resource("artifact", {"role": "result", "tree_sha256": result_sha}),
        "path": f"{rel}/{rundir.ATTEMPT_RESULT_DIR}",
        "sha256": result_sha,
    }
    metrics = {
        "id": ids.resource("artifact", {"role": "metrics", "sha256": metrics_sha}),
        "path": f"{rel}/{rundir.ATTEMPT_METRICS_DIR}/{rundir.ATTEMPT_METRICS}",
        "sha256": metrics_sha,
    }
    ident = ids.record(
        "observation",
        slot=slot,
        producing_attempt=attempt_id,
        result=result,
        metrics=metrics,
        timing=_timing_identity(timing),
        completion="not_required",
    )
    return {
        "schema_version": 1,
        "id": ident,
        "slot_id": slot,
        "attempt_id": attempt_id,
        "result": result,
        "metrics": metrics,
        "timing": timing,
        "validity": {"valid": True, "completion": "not_required"},
        "provenance": prov,
    }


def build_row(
    outcome: AttemptOutcome,
    spec: AttemptInput,
    receipt: dict[str, Any],
    artifact_dir: str,
    rel: str,
    jobs: int,
    retry_index: int = 0,
) -> dict[str, Any]:
    a = outcome.attempt
    resolution = resolve(spec, receipt, jobs)
    prov = provenance(outcome, receipt, jobs, resolution)
    slot = resolution.get("attempt_slot") or a.slot_id
    attempt_id = ids.record("attempt", slot=slot, retry_index=retry_index)
    observation = None
    if outcome.accepted:
        observation_slot = resolution.get("observation_slot") or a.observation_slot_id or a.slot_id
        observation = _observation(outcome, attempt_id, observation_slot, artifact_dir, rel, prov)
        result: dict[str, Any] = {"kind": "accepted"}
    else:
        diagnostic = {
            "code": outcome.code,
            "message": outcome.message or str(outcome.code),
            "details": {"measurements": outcome.measurements.to_json()},
        }
        result = {"kind": "failed", "diagnostic": diagnostic}
    record = {
        "schema_version": 1,
        "id": attempt_id,
        "slot_id": slot,
        "retry_index": retry_index,
        "outcome": result,
        "observations": [observation["id"]] if observation else [],
        "started_at": outcome.started_at,
        "finished_at": outcome.finished_at,
        "provenance": prov,
    }
    head = RowHead(
        key=a.key,
        status="accepted" if outcome.accepted else "failed",
        attempt=retry_index,
        artifacts=rel,  # run id and times: in the manifest and the attempt record
    )
    return {
        **a.describe(),
        **head.fields(),
        "code": outcome.code,
        "message": outcome.message,
        "metrics": (outcome.metrics or {}).get("data"),
        "statistics": outcome.statistics,
        "record": record,
        "observation": observation,
        # metewand_attempt_phases/1: our own field, beside the document's record and observation
        "phases": outcome.phases,
    }
