"""The peer benchmark's own artifacts (../shared/reference/lexbench-run-sample) validate against
the schemas metewand ships for the peer's layouts; a real profiled run of ours is checked against
the same schemas in test_browser_run_profile.py (``assert_peer_layouts``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metewand.compare.generate import write_after_run
from metewand.runtime.schemas import violations
from metewand.suites.browser import classify
from metewand.suites.browser.rows import PlannedAttempt, base_row, not_run_row
from metewand.suites.browser.run_config import ResourceOptions, RunConfig
from metewand.suites.browser.runner import run_browser
from metewand.suites.browser.tasks import load_corpus
from peer_layouts import assert_peer_layouts

SAMPLE = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference" / "lexbench-run-sample"


@pytest.mark.parametrize("name", ["functional", "profiled_off_baseline", "profiled_on"])
def test_the_peers_own_artifacts_validate(name: str) -> None:
    run_dir = SAMPLE / name
    if not run_dir.is_dir():
        pytest.skip(f"{run_dir} not present")
    assert_peer_layouts(run_dir)


def test_peer_schemas_reject_our_form_objects() -> None:
    """A peer schema id means the peer's layout: a measurement form where the peer writes a
    plain number is refused."""
    row = json.loads((SAMPLE / "profiled_on" / "results.jsonl").read_text().splitlines()[0])
    resource = dict(row["resource"], cpu_total_ms={"status": "complete", "value": 130})
    assert violations("abb_engine_resources-1", resource) != []


OWN_SUITE = Path(__file__).resolve().parents[1] / "src/metewand/data/browser_suite"
OWN_TASKS = ("own_echo_headers", "own_eval_values", "own_l2_inner_text")


def _own_config(profile: str, baseline: str | None = None) -> RunConfig:
    resource = ResourceOptions(
        profile=profile,
        calibration_baseline=baseline,
        cold_start_samples=1,
        reference_engine="chrome",
        host_sample_interval_s=0.5,
    )
    return RunConfig(
        str(OWN_SUITE),
        ("chrome", "lightpanda"),
        k=1,
        seed="peer",
        task_ids=OWN_TASKS,
        resource=resource,
    )


def test_a_real_profiled_run_of_ours_has_the_peers_layouts(tmp_path: Path) -> None:
    quiet = {"echo": lambda _t: None}
    base = run_browser(_own_config("baseline"), tmp_path, "base", **quiet)  # type: ignore[arg-type]
    assert base.exit_code == 0 and base.run_dir is not None
    run = run_browser(_own_config("engine", "base"), tmp_path, "prof", **quiet)  # type: ignore[arg-type]
    assert run.exit_code == 0 and run.run_dir is not None
    write_after_run(run.run_dir)  # what the CLI does after a run: the derived files
    d = run.run_dir
    assert_peer_layouts(d)
    rows = [json.loads(line) for line in (d / "results.jsonl").read_text().splitlines()]
    for row in rows:
        assert row["attempt"] == 1 and row["artifact_dir"] == f"artifacts/{row['key']}"
        assert (d / row["artifact_dir"] / "resource.jsonl").is_file()
        assert row["subset_id"] == row["subset"] and row["driver"] in ("raw_cdp", "node_cdp_probe")
        assert (row["failure"] is None) == (row["status"] == "pass")
        res = row["resource"]
        # section 2: the bytes metewand does not count say so in every row
        for name in ("control_plane_traffic", "wire_traffic"):
            assert res[name]["available"] is False and "not implemented" in res[name]["reason"]
        # CPU to the microsecond, equal to our form's value
        assert res["cpu_total_ms"] == row["resource_forms"]["cpu_total_ms"]["value"]
        assert row["harness_scope"]["scope"] == "harness_scope"
        scope = row["harness_scope"]
        observer = scope["sampler_cpu_ms_excluded"] + scope["host_telemetry_cpu_ms_excluded"]
        assert scope["cpu_ms"] == pytest.approx(
            max(0.0, scope["process_cpu_ms"] - observer), abs=0.002
        )
    assert any(round(r["resource"]["cpu_total_ms"]) != r["resource"]["cpu_total_ms"] for r in rows)
    manifest = json.loads((d / "run_manifest.json").read_text())
    assert manifest["schema"] == "metewand_run_manifest/1" and "data" in manifest
    assert manifest["selected_engines"] == ["chrome", "lightpanda"] and manifest["k_runs"] == 1
    assert manifest["completed_result_rows"] == manifest["expected_result_rows"] == len(rows)
    assert manifest["completion_status"] == "completed"
    assert len(manifest["engines"]["lightpanda"]["sha256"]) == 64
    assert manifest["resource_provenance"]["chrome"]["attempts"] == len(OWN_TASKS)
    cold = [json.loads(line) for line in (d / "cold_start.jsonl").read_text().splitlines()]
    assert {c["engine"] for c in cold} == {"chrome", "lightpanda"}
    for record in cold:
        assert len(record["engine_sha256"]) == 64
        assert "pss_unavailable" not in record["quality_flags"]
    summary = json.loads((d / "resource_summary.json").read_text())
    assert summary["observer_effect"]["baseline_run"] == "base"
    assert summary["by_engine"]["chrome"]["harness_scope"]["attempts"] == len(OWN_TASKS)
    card = (d / "resource-card.md").read_text()
    assert "Harness scope" in card and "control-plane bytes: not implemented" in card


def test_a_row_for_an_attempt_that_could_not_run_has_the_peers_layout() -> None:
    """An engine that is missing gives rows with a status and a reason, null provenance and no
    artifact dir: still readable by the peer's tools (and never numbers)."""
    corpus = load_corpus(OWN_SUITE)
    task = next(t for t in corpus.tasks if t.task_id == "own_eval_values")
    planned = PlannedAttempt(task, "lightpanda", 1, 0, 0)
    verdict = classify.engine_binary_missing("lightpanda", "not on PATH")
    row = not_run_row(base_row("r1", planned, "shared", "s"), verdict, "2026-01-01T00:00:00Z", {})
    assert violations("peer_result_row-1", row) == []
    assert row["failure"]["class"] == verdict.failure_class and row["artifact_dir"] is None
    assert row["duration_ms"] is None and row["cdp_call_count"] == 0
