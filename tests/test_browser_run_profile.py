"""Resource profiling of a real browser run: every artifact validates against its schema, scopes
stay apart, and a baseline run calibrates the profiled one."""

from __future__ import annotations

import json
from pathlib import Path

from browser_run_helpers import lexbench_or_skip, rows_of
from metewand.compare.generate import write_after_run
from metewand.runtime.schemas import violations
from metewand.suites.browser.leftovers import run_processes
from metewand.suites.browser.run_config import ResourceOptions, RunConfig
from metewand.suites.browser.runner import run_browser
from peer_layouts import assert_peer_layouts

TASKS = ("pw_raw_runtime_evaluateprimitives", "pw_raw_dom_describenode", "r3_dA_e_before_content")


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _config(corpus: Path, profile: str, baseline: str | None = None) -> RunConfig:
    resource = ResourceOptions(
        profile=profile,
        calibration_baseline=baseline,
        cold_start_samples=2,
        reference_engine="chrome",
        host_sample_interval_s=0.5,
    )
    return RunConfig(
        str(corpus), ("chrome", "lightpanda"), k=1, seed="p", task_ids=TASKS, resource=resource
    )


def test_profiled_run_artifacts_validate_and_calibrate(tmp_path: Path) -> None:
    corpus = lexbench_or_skip()
    quiet = {"echo": lambda _t: None}
    base = run_browser(_config(corpus, "baseline"), tmp_path, "base", **quiet)  # type: ignore[arg-type]
    assert base.exit_code == 0 and base.run_dir is not None
    assert not (base.run_dir / "cold_start.jsonl").exists()
    assert all("resource" not in r for r in rows_of(base.run_dir))
    _assert_settled(rows_of(base.run_dir))
    run = run_browser(_config(corpus, "engine", "base"), tmp_path, "prof", **quiet)  # type: ignore[arg-type]
    assert run.exit_code == 0 and run.run_dir is not None
    write_after_run(run.run_dir)  # what the CLI does after a run: the derived files
    d = run.run_dir
    for row in rows_of(d):
        resource = row["resource"]  # the peer's layout: plain numbers, reasons in unavailable
        assert violations("abb_engine_resources-1", resource) == []
        assert violations("metewand_engine_resources-1", row["resource_forms"]) == []
        assert resource["scope"] == "engine_scope"
        assert row["resource_forms"]["cpu_total_ms"]["status"] in ("complete", "partial")
        assert resource["cpu_total_ms"] == row["resource_forms"]["cpu_total_ms"]["value"]
        assert row["harness_scope"]["cpu_ms"] >= 0
        assert any(a.endswith("resource.jsonl") for a in row["artifacts"])
    _assert_settled(rows_of(d))
    cold = _lines(d / "cold_start.jsonl")
    assert sorted((c["engine"], c["sample"]) for c in cold) == [
        ("chrome", 0),
        ("chrome", 1),
        ("lightpanda", 0),
        ("lightpanda", 1),
    ]
    for record in cold:
        assert violations("abb_engine_resources-1", record) == []
        assert record["phase"] == "cold_start" and len(record["engine_sha256"]) == 64
        # the empty scan before the launch is no measurement trouble
        assert "pss_unavailable" not in record["quality_flags"]
    for sample in _lines(d / "host_telemetry.jsonl"):
        assert violations("abb_host_telemetry-1", sample) == []
    assert violations("abb_host_summary-1", json.loads((d / "host_summary.json").read_text())) == []
    summary = json.loads((d / "resource_summary.json").read_text())
    assert violations("abb_resource_summary-1", summary) == []
    assert violations("metewand_resource_summary-1", summary) == []
    settle = summary["by_engine"]["chrome"]["sampling"]["settle"]
    assert settle["attempts"] == len(TASKS) and settle["waited_ms_median"] > 0
    conditions = {c["id"]: c for c in summary["eligibility_conditions"]}
    assert conditions["profile_jobs_k"]["passed"] is False  # k=1 < 5: never eligible
    assert conditions["calibration"]["figures"], "the baseline run must have been paired"
    assert "intersection" in (d / "resource-card.md").read_text().lower()
    assert_peer_layouts(d)  # the peer's readers find their layouts in our run directory
    row = rows_of(d)[0]
    assert row["attempt"] >= 1 and row["artifact_dir"] == f"artifacts/{row['key']}"
    assert row["resource"]["control_plane_traffic"]["available"] is False
    manifest = json.loads((d / "run_manifest.json").read_text())
    assert manifest["completion_status"] == "completed"
    assert manifest["completed_result_rows"] == manifest["expected_result_rows"] == len(rows_of(d))
    assert manifest["engines"]["chrome"]["sha256"] and manifest["runner"]["source"]["files"]
    assert manifest["runner"]["event_loop"].startswith("uvloop ")  # the default loop ran it
    assert run_processes(tmp_path / "prof", "prof") == []


def _assert_settled(rows: list[dict[str, object]]) -> None:
    """Both resource profiles wait for the engine to go quiet after each attempt; Chromium's
    renderer exit and spare-renderer fork take more than the two looks of an idle tree."""
    settles = {(r["engine"], r["task_id"]): r["settle"] for r in rows}
    # the span goes on through cleanup and the settle wait: never shorter than the window
    assert all(r["attempt_span_ms"] >= r["collection_wall_ms"] for r in rows)  # type: ignore[operator]
    assert all(isinstance(s, dict) and s["waited_ms"] >= 0 for s in settles.values())
    assert sum(bool(s["quiet"]) for s in settles.values()) >= len(settles) - 1  # type: ignore[index]
    chrome = [s for (engine, _), s in settles.items() if engine == "chrome"]
    assert any(s["looks"] > 2 for s in chrome), chrome  # type: ignore[index]
