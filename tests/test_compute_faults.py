"""Acceptance 2: each fault is one failed attempt with the right code; the run goes on,
measurements are kept, and no process of the attempt stays alive."""

from pathlib import Path

from compute_helpers import alive, by_impl, measurements, problem, python_impl, run, write_manifest

FAULTS = {
    "crash": "implementation_crash",
    "hang": "phase_timeout",
    "garbage": "protocol_error",
    "oversized": "protocol_error",
    "wrong_protocol": "protocol_error",
}


def _manifest(tmp_path: Path) -> Path:
    impls = "".join(python_impl(mode, mode) for mode in FAULTS)
    impls += python_impl("fine", "ok") + python_impl("graded_by_crash", "ok", "crashy")
    names = ", ".join(f'"{m}"' for m in [*FAULTS, "fine"])
    return write_manifest(
        tmp_path,
        problem()
        + problem("crashy", mode="eval_crash")
        + impls
        + f"""
[execution_policies.short]
timeout = "1 s"

[[experiments]]
name = "faults"
problem = "answer"
implementations = [{names}]
execution_policy = "short"

[[experiments]]
name = "evaluator"
problem = "crashy"
implementations = ["graded_by_crash"]
""",
    )


def test_each_fault_is_one_failed_attempt(tmp_path: Path) -> None:
    summary = run(_manifest(tmp_path), tmp_path)
    rows = by_impl(summary)
    assert len(summary.rows) == len(FAULTS) + 2
    for mode, code in FAULTS.items():
        row = rows[mode]
        assert (row["status"], row["code"]) == ("failed", code), (mode, row["message"])
        diag = row["record"]["outcome"]["diagnostic"]
        kept = diag["details"]["measurements"]
        assert kept == measurements(row)
        startup = kept["worker_startup_time_ns"]["status"]
        assert startup == ("partial" if mode == "wrong_protocol" else "complete"), mode
        pid = row["record"]["provenance"]["data"]["context"]["worker"].get("pid")
        assert pid and not alive(pid), mode
    assert rows["fine"]["status"] == "accepted"  # the run went on
    assert (rows["graded_by_crash"]["status"], rows["graded_by_crash"]["code"]) == (
        "failed",
        "evaluator_failure",
    )
    # Interrupted phases are partial; the timed wall of the hung attempt too.
    hang = measurements(rows["hang"])
    assert hang["execute_request_time_ns"]["status"] == "partial"
    assert hang["execute_request_time_ns"]["reason"] == "interrupted"
    assert hang["timed_wall_time_ns"]["status"] == "partial"
    assert hang["prepare_time_ns"]["status"] == "complete"
    crash = measurements(rows["crash"])
    assert crash["execute_request_time_ns"]["reason"] == "interrupted"
    # The hung worker's own child was killed with the tree.
    child_pid_file = Path(summary.run_dir) / "artifacts" / rows["hang"]["key"] / "hang-child.pid"
    child = int(child_pid_file.read_text())
    assert not alive(child)
    evaluated = measurements(rows["graded_by_crash"])
    assert evaluated["timed_wall_time_ns"]["status"] == "complete"
    assert evaluated["evaluation_time_ns"]["status"] == "partial"
