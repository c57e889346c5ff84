"""Acceptance 3–5: persistent cache hits, --jobs 2 equals --jobs 1, a C worker, resume."""

from pathlib import Path

from compute_helpers import (
    FAULT,
    WORKERS,
    compile_c,
    measurements,
    problem,
    python_impl,
    run,
    write_manifest,
)

GENERATED = f"""
[datasets.numbers]
kind = "generated"
materializer = {{ runner = "python", entrypoint = "{FAULT}", args = ["gen"] }}
parameter_defaults = {{ size = 1 }}
"""


def _manifest(tmp_path: Path, extra_impl: str = "", names: str = '"a", "b"') -> Path:
    return write_manifest(
        tmp_path,
        GENERATED
        + problem()
        + python_impl("a", "ok")
        + python_impl("b", "crash")
        + extra_impl
        + f"""
[[experiments]]
name = "grid"
problem = "answer"
datasets = ["numbers"]
implementations = [{names}]
repetitions = 2
[experiments.dataset_parameters.numbers]
size = {{ grid = [1, 2] }}
""",
    )


def _receipt(row: dict) -> dict:
    return row["record"]["provenance"]["data"]["context"]["dataset_materialization"]


def test_second_run_hits_the_cache(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    first = run(manifest, tmp_path, run_id="one")
    built = {_receipt(r)["derivation_id"]: _receipt(r) for r in first.rows}
    assert len(built) == 2  # each configuration built once and shared by its 4 attempts
    assert all(r["origin"] == "constructed" for r in built.values())
    assert all(
        measurements(r)["materialization_time_ns"]["status"] == "complete" for r in first.rows
    )
    second = run(manifest, tmp_path, run_id="two")
    for row in second.rows:
        assert measurements(row)["materialization_time_ns"] == {
            "status": "unavailable",
            "reason": "cache_hit",
        }
        receipt = _receipt(row)
        assert receipt["origin"] == "cache_hit"
        original = built[receipt["derivation_id"]]
        assert receipt["materialization_time_ns"] == original["materialization_time_ns"]
        assert receipt["constructed_at"] == original["constructed_at"]


def test_jobs_two_matches_jobs_one(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    one = run(manifest, tmp_path, run_id="j1", jobs=1)
    two = run(manifest, tmp_path, run_id="j2", jobs=2)
    assert {(r["key"], r["status"], r["code"]) for r in one.rows} == {
        (r["key"], r["status"], r["code"]) for r in two.rows
    }
    assert len(one.rows) == 8
    assert {
        r["record"]["provenance"]["data"]["context"]["concurrency"]["jobs"] for r in two.rows
    } == {2}


def test_c_worker_speaks_the_protocol(tmp_path: Path) -> None:
    binary = compile_c(WORKERS / "c_noop.c", tmp_path)
    impl = f"""
[implementations.c]
runner = "command"
program = "{binary}"
problems = ["answer"]
"""
    summary = run(_manifest(tmp_path, impl, '"c"'), tmp_path)
    assert [r["status"] for r in summary.rows] == ["accepted"] * 4
    worker = summary.rows[0]["record"]["provenance"]["data"]["context"]["worker"]
    assert worker["sdk"] is None and worker["capabilities"] == ["one_shot"]


def test_resume_runs_only_what_is_missing(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    first = run(manifest, tmp_path, run_id="r")
    assert first.attempts == 8
    again = run(manifest, tmp_path, resume="r")
    assert (again.attempts, again.skipped) == (0, 8)


def test_host_telemetry_beside_a_compute_run(tmp_path: Path) -> None:
    import json

    from metewand.runtime import schemas

    summary = run(_manifest(tmp_path), tmp_path, run_id="host", host_sample_interval_s=0.1)
    run_dir = Path(summary.run_dir)
    samples = [json.loads(x) for x in (run_dir / "host_telemetry.jsonl").read_text().splitlines()]
    assert len(samples) >= 2  # one at start, one at stop, more while it ran
    assert all(schemas.violations("abb_host_telemetry-1", s) == [] for s in samples)
    host = json.loads((run_dir / "host_summary.json").read_text())
    assert schemas.violations("abb_host_summary-1", host) == []
    assert host["gate"]["sample_count"] == len(samples)


def test_host_telemetry_off_writes_nothing(tmp_path: Path) -> None:
    summary = run(_manifest(tmp_path), tmp_path, run_id="quiet", host_sample_interval_s=None)
    assert not (Path(summary.run_dir) / "host_telemetry.jsonl").exists()
    assert not (Path(summary.run_dir) / "host_summary.json").exists()
