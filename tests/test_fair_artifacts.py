"""Run-end artifacts from real run directories: resource_summary.json and resource-card.md,
written by the one writer of derived files (compare.generate)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from fair_helpers import validate
from fair_runs import cold_start_rows, manifest, rows
from metewand import canonical
from metewand.compare.generate import generate
from metewand.compare.report_resources import resource_context
from metewand.compare.rundir import load_run
from metewand.measure.host import HostTelemetry
from metewand.runtime.rundir import read_jsonl
from metewand.runtime.store import RunStore, write_json_atomic


def _run(out: Path, run_id: str, data: dict, run_rows: list) -> Path:
    store = RunStore.create(out, run_id, data)
    for row in run_rows:
        store.append(row)
    store.set_state("complete")
    store.close()
    return out / run_id


def _summary_written(run_dir: Path, reference_engine: str | None = None) -> dict:
    """Write the derived files as after a run; the summary as the report sees it in memory."""
    generate(run_dir, ["json"], reference_engine=reference_engine)
    summary = resource_context(load_run(run_dir), None, reference_engine).summary
    assert summary is not None
    return summary


def test_finalize_writes_valid_reproducible_artifacts(tmp_path: Path) -> None:
    _run(tmp_path, "run_a", manifest("run_a", mode="baseline")["data"], rows(profiled=False))
    data = manifest()["data"]
    data["resource_profile"]["calibration_baseline"] = "run_a"
    run_b = _run(tmp_path, "run_b", data, rows())
    with HostTelemetry(0.1, os.getpid(), run_b / "host_telemetry.jsonl") as telemetry:
        time.sleep(0.3)
    write_json_atomic(run_b / "host_summary.json", telemetry.summary())
    with (run_b / "cold_start.jsonl").open("wb") as out:
        for row in cold_start_rows():
            out.write(canonical.line(row))

    summary = _summary_written(run_b, reference_engine="chrome")
    on_disk = canonical.loads((run_b / "resource_summary.json").read_bytes())
    assert on_disk == canonical.loads(canonical.dumps(summary))
    validate("abb_resource_summary/1", on_disk)
    validate("abb_host_summary/1", canonical.loads((run_b / "host_summary.json").read_bytes()))
    for sample in read_jsonl(run_b / "host_telemetry.jsonl").rows:
        validate("abb_host_telemetry/1", sample)
    for row in rows()[:5]:
        validate("metewand_engine_resources/1", row["resource"])  # synthetic rows: forms
    conditions = {c["id"]: c for c in summary["eligibility_conditions"]}
    # the real host's gate depends on the other tenants of this machine; the rest must pass
    assert all(c["passed"] for name, c in conditions.items() if name != "host_gate"), conditions
    assert summary["observer_effect"]["baseline_run"] == "run_a"
    validate("metewand_calibration/1", resource_context(load_run(run_b)).calibration)
    card = (run_b / "resource-card.md").read_text()
    assert card.startswith("# Resource card: run_b")
    first = (run_b / "resource_summary.json").read_bytes()
    generate(run_b, ["json"], reference_engine="chrome")
    assert (run_b / "resource_summary.json").read_bytes() == first


def test_finalize_without_baseline_or_host(tmp_path: Path) -> None:
    run_b = _run(tmp_path, "run_b", manifest()["data"], rows())
    summary = _summary_written(run_b)
    failed = {c["id"] for c in summary["eligibility_conditions"] if not c["passed"]}
    assert failed == {"host_gate", "calibration"}
    assert summary["cold_start"]["by_engine"]["chrome"]["samples"] == 0
    assert "unavailable" in (run_b / "resource-card.md").read_text()
