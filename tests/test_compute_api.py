"""The fixed-dataset API returns the typed payload on success and keeps it on failure."""

import sys
from pathlib import Path

from compute_helpers import FAULT
from metewand.suites.compute.api import (
    FixedDatasetFailure,
    FixedDatasetResult,
    run_fixed_dataset_outcome,
)
from metewand.suites.compute.payload import ExecutionMeasurements


def _run(tmp_path: Path, mode: str) -> FixedDatasetResult | FixedDatasetFailure:
    return run_fixed_dataset_outcome(
        str(tmp_path),
        [sys.executable, str(FAULT), "impl"],
        [sys.executable, str(FAULT), "eval"],
        private_root=str(tmp_path),
        timeout_s=2.0,
        env={"METEWAND_TEST_MODE": mode},
    )


def test_success_carries_the_typed_payload(tmp_path: Path) -> None:
    outcome = _run(tmp_path, "ok")
    assert isinstance(outcome, FixedDatasetResult), outcome
    assert isinstance(outcome.measurements, ExecutionMeasurements)
    assert outcome.measurements.timed_wall_time_ns.value == outcome.timed_wall_time_ns
    assert outcome.metrics["data"] == {"correct": True}
    assert outcome.measurements.materialization_time_ns.reason == "provided_dataset"


def test_failure_keeps_the_payload_in_its_diagnostic(tmp_path: Path) -> None:
    outcome = _run(tmp_path, "crash")
    assert isinstance(outcome, FixedDatasetFailure)
    assert outcome.code == "implementation_crash"
    kept = outcome.diagnostic["details"]["measurements"]
    assert kept["execute_request_time_ns"]["reason"] == "interrupted"
    assert ExecutionMeasurements.from_json(kept) == outcome.measurements
