"""The typed payload: construction rules, observation timing, and record schemas around it."""

from __future__ import annotations

import dataclasses

import pytest

from metewand import canonical
from metewand.measure import forms
from metewand.measure.forms import Reason
from metewand.runtime import schemas
from metewand.suites.compute.payload import (
    CPU_SCOPE_FOR_TIMING_SCOPE,
    AccountingBackend,
    CpuTimeScope,
    ExecutionMeasurements,
    PayloadError,
    TimedWallInclusion,
    observation_timing,
)


def _measured(backend: AccountingBackend, resource: forms.Measurement) -> ExecutionMeasurements:
    base = ExecutionMeasurements.not_started(
        CpuTimeScope.PREPARE_AND_EXECUTE, materialization=forms.unavailable(Reason.CACHE_HIT)
    )
    return dataclasses.replace(
        base,
        worker_startup_time_ns=forms.complete(40_000_000),
        evaluator_startup_time_ns=forms.complete(30_000_000),
        prepare_time_ns=forms.complete(100_000_000),
        execute_request_time_ns=forms.complete(150_000_000),
        timed_wall_time_ns=forms.complete(251_000_000),
        evaluation_time_ns=forms.complete(250_000_000),
        cpu_time_ns=resource,
        peak_rss_bytes=resource,
        accounting_backend=backend,
        timed_wall_includes=frozenset(TimedWallInclusion),
    )


def test_partial_resources_leave_timing_null() -> None:
    payload = _measured(AccountingBackend.PROC, forms.partial(4096, Reason.PROCESS_ONLY))
    timing = observation_timing(payload, implementation_time_ns=17)
    assert timing == {
        "primary_time": "timed_wall_time",
        "timed_wall_time_ns": 251_000_000,
        "implementation_time_ns": 17,
        "evaluation_time_ns": 250_000_000,
        "cpu_time_ns": None,
        "peak_rss_bytes": None,
    }


def test_complete_resources_fill_timing_and_zero_stays_zero() -> None:
    payload = _measured(AccountingBackend.CGROUP2, forms.complete(0))
    timing = observation_timing(payload)
    assert timing["cpu_time_ns"] == 0 and timing["peak_rss_bytes"] == 0
    assert timing["implementation_time_ns"] is None


def test_observation_needs_complete_wall_and_evaluation() -> None:
    payload = _measured(AccountingBackend.CGROUP2, forms.complete(1))
    broken = dataclasses.replace(payload, evaluation_time_ns=forms.unavailable(Reason.NOT_STARTED))
    with pytest.raises(PayloadError, match=r"\$\.evaluation_time_ns"):
        observation_timing(broken)
    with pytest.raises(PayloadError):
        observation_timing(payload, implementation_time_ns=-1)


def test_construction_enforces_the_same_rules_as_parsing() -> None:
    payload = _measured(AccountingBackend.PROC, forms.partial(1, Reason.PROCESS_ONLY))
    with pytest.raises(PayloadError, match="cpu_time_ns"):
        dataclasses.replace(payload, cpu_time_ns=forms.complete(1))
    with pytest.raises(PayloadError, match="not part of payload version 1"):
        dataclasses.replace(payload, version=1, cpu_time_scope=CpuTimeScope.EXECUTE_ONLY)
    with pytest.raises(PayloadError, match="timed_wall_time_ns"):
        dataclasses.replace(payload, execute_request_time_ns=forms.partial(5, Reason.INTERRUPTED))


def test_out_of_range_value_becomes_unavailable_not_a_number() -> None:
    payload = _measured(AccountingBackend.CGROUP2, forms.complete(canonical.SAFE_INTEGER_MAX + 1))
    assert payload.to_json()["cpu_time_ns"] == {"status": "unavailable", "reason": "out_of_range"}
    assert observation_timing(payload)["cpu_time_ns"] is None


def test_not_started_payload_has_no_zero_anywhere() -> None:
    obj = ExecutionMeasurements.not_started(CpuTimeScope.EXECUTE_ONLY).to_json()
    forms_only = [v for v in obj.values() if isinstance(v, dict)]
    assert len(forms_only) == 9
    assert all(v == {"status": "unavailable", "reason": "not_started"} for v in forms_only)
    assert schemas.is_valid("measurements-v2", obj)


def test_timing_scope_maps_to_cpu_scope() -> None:
    assert CPU_SCOPE_FOR_TIMING_SCOPE["cold_end_to_end"] is (
        CpuTimeScope.WORKER_LIFETIME_THROUGH_EXECUTE
    )
    assert set(CPU_SCOPE_FOR_TIMING_SCOPE.values()) == set(CpuTimeScope)


def test_parse_errors_name_the_key_path() -> None:
    obj = _measured(AccountingBackend.CGROUP1, forms.complete(5)).to_json()
    obj["prepare_time_ns"] = {"status": "complete", "value": -3}
    with pytest.raises(PayloadError) as info:
        ExecutionMeasurements.from_json(obj)
    assert info.value.path == "$.prepare_time_ns.value" and "negative" in str(info.value)
    with pytest.raises(PayloadError, match=r"^\$: not strict JSON"):
        ExecutionMeasurements.loads(b'{"version":2,"version":2}')


def _provenance(payload: ExecutionMeasurements) -> dict[str, object]:
    return {
        "tool_version": "0.1.0",
        "wire_protocol_version": 1,
        "execution_semantics_version": 2,
        "public_schema_version": 1,
        "data": {"executor": "local", "measurements": payload.to_json()},
    }


def test_attempt_and_observation_records_carry_the_payload() -> None:
    payload = _measured(AccountingBackend.PROC, forms.partial(4096, Reason.PROCESS_ONLY))
    sha = "0" * 64
    observation = {
        "schema_version": 1,
        "id": "o1",
        "slot_id": "s1",
        "attempt_id": "a1",
        "result": {"id": "r", "path": "result", "sha256": sha},
        "metrics": {"id": "m", "path": "metrics.json", "sha256": sha},
        "timing": observation_timing(payload, None),
        "validity": {"valid": True, "completion": "not_required"},
        "provenance": _provenance(payload),
    }
    assert schemas.violations("observation", observation) == []
    failed = {
        "schema_version": 1,
        "id": "a2",
        "slot_id": "s1",
        "retry_index": 0,
        "outcome": {
            "kind": "failed",
            "diagnostic": {
                "code": "phase_timeout",
                "message": "execute exceeded 20 ms",
                "details": {"measurements": payload.to_json()},
            },
        },
        "observations": [],
        "started_at": "2025-01-01T00:00:00Z",
        "finished_at": "2025-01-01T00:00:01Z",
        "provenance": _provenance(payload),
    }
    assert schemas.violations("attempt", failed) == []
    failed["outcome"]["diagnostic"]["details"]["measurements"]["cpu_time_ns"] = {  # type: ignore[index]
        "status": "complete",
        "value": 5,
    }
    paths = [v.path for v in schemas.violations("attempt", failed)]
    assert paths and paths[0].startswith("$.outcome")
    accepted_without_observation = dict(failed, outcome={"kind": "accepted"})
    assert not schemas.is_valid("attempt", accepted_without_observation)


def test_materialization_receipt_with_and_without_measurement() -> None:
    receipt = {
        "schema_version": 1,
        "derivation_id": "mw1-dataset-instance-" + "a" * 64,
        "kind": "generated",
        "origin": "constructed",
        "output_sha256": "b" * 64,
        "materialization_time_ns": {"status": "complete", "value": 1200},
    }
    assert schemas.violations("dataset-materialization-receipt", receipt) == []
    del receipt["materialization_time_ns"]
    assert schemas.is_valid("dataset-materialization-receipt", receipt)
    receipt["materialization_time_ns"] = {"status": "complete", "value": -1}
    assert not schemas.is_valid("dataset-materialization-receipt", receipt)
