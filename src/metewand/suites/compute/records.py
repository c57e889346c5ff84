"""Result rows: the published attempt record, its observation, and the row around them.

Row (one canonical line of ``results.jsonl``): ``key``, ``status`` (accepted | failed),
``attempt`` (retry index), ``role`` (measured | warmup), ``code``, the plan coordinates,
``record`` (attempt schema), ``observation`` (observation schema or null), ``artifacts``,
``phases`` (``metewand_attempt_phases/1`` or null: where the attempt's wall and CPU went).
"""

from __future__ import annotations

import os
from typing import Any

from metewand import __version__, canonical
from metewand.runtime import rundir
from metewand.runtime.payload import observation_timing
from metewand.runtime.row_head import RowHead
from metewand.suites.compute.execute import AttemptOutcome
from metewand.suites.compute.validate import file_sha256

VERSIONS = {
    "public_schema_version": 1,
    "identity_version": 1,
    "manifest_version": 1,
    "wire_protocol_version": 1,
    "execution_semantics_version": 2,
}


def provenance(outcome: AttemptOutcome, receipt: dict[str, Any], jobs: int) -> dict[str, Any]:
    return {
        "tool_version": __version__,
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
            },
        },
    }


def _observation(
    outcome: AttemptOutcome, attempt_id: str, artifact_dir: str, rel: str, prov: dict
) -> dict[str, Any]:
    metrics_path = os.path.join(artifact_dir, rundir.ATTEMPT_METRICS_DIR, rundir.ATTEMPT_METRICS)
    metrics_sha = file_sha256(metrics_path)
    result_sha = str(outcome.result_sha256)
    timing = observation_timing(outcome.measurements, outcome.implementation_time_ns)
    body = {
        "slot_id": outcome.attempt.slot_id,
        "attempt_id": attempt_id,
        "result": {
            "id": canonical.identity("artifact", {"version": 1, "sha256": result_sha}),
            "path": f"{rel}/{rundir.ATTEMPT_RESULT_DIR}",
            "sha256": result_sha,
        },
        "metrics": {
            "id": canonical.identity("artifact", {"version": 1, "sha256": metrics_sha}),
            "path": f"{rel}/{rundir.ATTEMPT_METRICS_DIR}/{rundir.ATTEMPT_METRICS}",
            "sha256": metrics_sha,
        },
        "timing": timing,
        "validity": {"valid": True, "completion": "not_required"},
    }
    ident = canonical.identity("observation", {"version": 1, **body})
    return {"schema_version": 1, "id": ident, **body, "provenance": prov}


def build_row(
    outcome: AttemptOutcome,
    receipt: dict[str, Any],
    artifact_dir: str,
    rel: str,
    jobs: int,
    retry_index: int = 0,
) -> dict[str, Any]:
    a = outcome.attempt
    prov = provenance(outcome, receipt, jobs)
    attempt_id = canonical.identity(
        "attempt", {"version": 1, "slot": a.slot_id, "retry_index": retry_index}
    )
    observation = None
    if outcome.accepted:
        observation = _observation(outcome, attempt_id, artifact_dir, rel, prov)
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
        "slot_id": a.slot_id,
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
