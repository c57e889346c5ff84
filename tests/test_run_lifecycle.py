"""The one run object (runtime/run.py): create, interrupt (SIGINT, SIGTERM, kill -9), resume,
harness faults, refused resumes — on a suite whose attempts are real processes."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lifecycle_suite import ProcessStarter, ProcessSuite
from metewand.measure.host import HostTelemetry
from metewand.measure.host_gate import GateThresholds
from metewand.runtime.executor import LocalExecutor
from metewand.runtime.run import (
    HARNESS_ERROR_FILE,
    INTERRUPTED_REASON,
    Run,
    RunRequest,
    open_store,
    start,
)
from metewand.runtime.store import RunView, StoreError

TESTS = Path(__file__).parent
SCRIPT = TESTS / "lifecycle_suite.py"


def _keys(run_dir: Path) -> list[str]:
    return [str(row["key"]) for row in RunView(run_dir).rows()]


def _script(out: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(out), "r1", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_rows(run_dir: Path, count: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (run_dir / "results.jsonl").exists() and len(_keys(run_dir)) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {count} rows in {run_dir} after {timeout_s}s")


def _attempt_processes(sleep_s: str) -> list[int]:
    """Live attempt processes of the script (their command line names the sleep)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if f"time.sleep({sleep_s})".encode() in cmdline:
                found.append(int(entry.name))
    return found


def test_a_completed_run_tears_down_sweeps_finishes_and_is_complete(tmp_path: Path) -> None:
    store = open_store(tmp_path, "done", None, {"suite": "process-test"})
    with store:
        suite = ProcessSuite(units=3, attempts=2, store=store)
        host = HostTelemetry(
            0.2, os.getpid(), store.run_dir / "host_telemetry.jsonl", GateThresholds()
        )
        keys = Run(store, host).execute(suite, LocalExecutor(2), suite.units())
    view = RunView(tmp_path / "done")
    assert sorted(_keys(view.run_dir)) == sorted(keys)
    assert len(keys) == 6
    assert view.state == "complete"
    assert suite.calls == ["prepare", "teardown", "finish:True"]
    assert view.manifest["data"]["finished"] is True
    summary = json.loads((view.run_dir / "host_summary.json").read_bytes())
    assert summary  # host telemetry was started and stopped by the run
    assert (view.run_dir / "host_telemetry.jsonl").stat().st_size > 0


def test_a_harness_fault_marks_the_run_interrupted_with_reason_and_traceback(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path, "broken", None, {"suite": "process-test"})
    with store:
        suite = ProcessSuite(units=3, attempts=1, fail_keys=frozenset({"u1/a0"}), store=store)
        with pytest.raises(RuntimeError, match="injected fault"):
            Run(store).execute(suite, LocalExecutor(1), suite.units())
    view = RunView(tmp_path / "broken")
    assert view.state == "interrupted"
    reason = "harness failed: RuntimeError: injected fault in u1/a0"
    assert view.manifest["data"]["interruption_reason"] == reason
    assert "Traceback" in (view.run_dir / HARNESS_ERROR_FILE).read_text()
    assert suite.calls == ["prepare", "teardown", "finish:False"]
    assert _keys(view.run_dir) == ["u0/a0"]


def test_a_failure_at_the_end_leaves_the_run_interrupted_not_running(tmp_path: Path) -> None:
    store = open_store(tmp_path, "end", None, {"suite": "process-test"})
    with store:
        suite = ProcessSuite(units=2, attempts=1, store=store)

        def broken_finish(completed: bool) -> None:
            suite.calls.append(f"finish:{completed}")
            raise OSError("disk full while writing the manifest")

        suite.finish = broken_finish  # type: ignore[method-assign]
        with pytest.raises(OSError, match="disk full"):
            Run(store).execute(suite, LocalExecutor(1), suite.units())
    view = RunView(tmp_path / "end")
    assert view.state == "interrupted"
    assert view.manifest["data"]["interruption_reason"] == (
        "harness failed: OSError: disk full while writing the manifest"
    )
    assert suite.calls == ["prepare", "teardown", "finish:True"]  # the end ran once
    assert sorted(_keys(view.run_dir)) == ["u0/a0", "u1/a0"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_interrupts_kills_attempts_and_resume_runs_each_key_once(
    tmp_path: Path, signum: int
) -> None:
    sleep_s = "1.2345" if signum == signal.SIGINT else "1.2346"
    run_dir = tmp_path / "r1"
    script = _script(tmp_path, "3", "2", sleep_s, "2")
    _wait_for_rows(run_dir, 1)
    script.send_signal(signum)
    _, stderr = script.communicate(timeout=30)
    assert script.returncode == 130, stderr
    assert "Traceback" not in stderr
    view = RunView(run_dir)
    assert view.state == "interrupted"
    assert view.manifest["data"]["interruption_reason"] == INTERRUPTED_REASON
    assert view.manifest["data"]["finished"] is False
    assert _attempt_processes(sleep_s) == []  # the attempts in flight were killed
    first = _keys(run_dir)
    assert 1 <= len(first) < 6
    resumed = _script(tmp_path, "3", "2", "0", "2", "--resume")
    stdout, stderr = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, stderr
    assert stdout.strip() == f"todo {6 - len(first)}"
    keys = _keys(run_dir)
    assert sorted(keys) == sorted(f"u{u}/a{a}" for u in range(3) for a in range(2))
    assert len(keys) == len(set(keys))  # every key exactly once
    assert RunView(run_dir).state == "complete"


def test_kill_9_then_resume_runs_each_key_once(tmp_path: Path) -> None:
    run_dir = tmp_path / "r1"
    script = _script(tmp_path, "4", "2", "0.5", "1")
    _wait_for_rows(run_dir, 2)
    script.kill()
    script.communicate(timeout=30)
    assert RunView(run_dir).state == "running"  # nothing could mark it: resume decides
    resumed = _script(tmp_path, "4", "2", "0", "2", "--resume")
    _, stderr = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, stderr
    keys = _keys(run_dir)
    assert sorted(keys) == sorted(f"u{u}/a{a}" for u in range(4) for a in range(2))
    assert len(keys) == len(set(keys))
    assert _attempt_processes("0.5") == []


def test_a_refused_resume_leaves_the_run_directory_as_it_was(tmp_path: Path) -> None:
    with open_store(tmp_path, "old", None, {"suite": "process-test"}):
        pass
    manifest = tmp_path / "old" / "run_manifest.json"
    before = manifest.read_bytes()

    def refuse(view: RunView) -> None:
        raise StoreError(f"{view.run_dir} is not this benchmark")

    with pytest.raises(StoreError, match="is not this benchmark"):
        open_store(tmp_path, None, tmp_path / "old", {}, check_resume=refuse)
    assert manifest.read_bytes() == before


def test_start_keeps_the_recorded_phase_marks_for_every_suite(tmp_path: Path) -> None:
    """The "phase marks cannot change on resume" rule is ``runtime.run.start``'s: a toy suite's
    resume given the other flag is refused (exit 2, the run directory as it was)."""
    new = RunRequest(tmp_path, "m")
    assert start(ProcessStarter(1, 1, phase_marks=False), new).exit_code == 0
    run_dir = tmp_path / "m"
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}

    refused = start(ProcessStarter(1, 1), RunRequest(tmp_path, resume=run_dir, phase_marks=True))
    assert refused.exit_code == 2
    assert refused.lines == [
        f"error: {run_dir} was run with --no-phase-marks; resuming with --phase-marks would mix "
        "attempts timed with and without marks (resume without the flag)"
    ]
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before
    for same in (None, False):  # no flag, or the recorded one: no contradiction
        resumed = start(
            ProcessStarter(1, 1), RunRequest(tmp_path, resume=run_dir, phase_marks=same)
        )
        assert resumed.exit_code == 0, resumed.lines


def test_start_records_the_provenance_once_for_every_suite(tmp_path: Path) -> None:
    """A suite's starter does not write provenance: ``start`` puts the host and runner facts in
    every manifest, once, at the same keys (the per-file list of the source tree stays out)."""
    assert start(ProcessStarter(1, 1), RunRequest(tmp_path, "p")).exit_code == 0
    data = RunView(tmp_path / "p").manifest["data"]
    assert data["host"]["kernel"].startswith("Linux")
    assert len(data["runner"]["source"]["tree_sha256"]) == 64
    assert "files" not in data["runner"]["source"]
    assert not {"provenance", "harness_pin"} & set(data)


def test_start_makes_a_harness_fault_an_outcome_not_an_exception(tmp_path: Path) -> None:
    """One contract: what ends a run early is an outcome with its exit code and its words."""
    starter = ProcessStarter(1, 2, fail_keys=frozenset({"u0/a1"}))
    outcome = start(starter, RunRequest(tmp_path, "f"))
    run_dir = tmp_path / "f"
    assert (outcome.exit_code, outcome.run_dir) == (1, run_dir)
    assert isinstance(outcome.error, RuntimeError)
    (line,) = outcome.lines
    reason = "harness failed: RuntimeError: injected fault in u0/a1"
    assert line.startswith(f"error: {reason} (the run is marked interrupted; traceback in ")
    assert line.endswith(f"--resume {run_dir} continues the run)")
    assert RunView(run_dir).state == "interrupted"
    assert _keys(run_dir) == ["u0/a0"]

    other = start(ProcessStarter(1, 1), RunRequest(tmp_path, "o"))
    assert other.exit_code == 0
    manifest = tmp_path / "o" / "run_manifest.json"
    manifest.write_text(manifest.read_text().replace('"process-test"', '"other"'))
    refused = start(ProcessStarter(1, 1), RunRequest(tmp_path, resume=tmp_path / "o"))
    assert refused.exit_code == 2 and refused.run_dir is None
    assert refused.lines == [f"error: {tmp_path / 'o'} is not a process-test run (suite 'other')"]


def test_a_run_keeps_no_row_in_memory_and_its_outcome_reads_this_sessions_back(
    tmp_path: Path,
) -> None:
    """Rows go to the store and leave memory (a browser row is ~55 KB of objects: a long run
    grew by that much an attempt); the outcome reads this session's rows back, in the order
    they were made, without a resumed run's earlier ones."""
    broken = start(ProcessStarter(2, 2, fail_keys=frozenset({"u1/a0"})), RunRequest(tmp_path, "k"))
    assert broken.exit_code == 1 and _keys(tmp_path / "k") == ["u0/a0", "u0/a1"]
    resumed = start(ProcessStarter(2, 2), RunRequest(tmp_path, resume=tmp_path / "k"))
    assert resumed.exit_code == 0, resumed.lines
    gc.collect()
    held = [o for o in gc.get_objects() if isinstance(o, dict) and o.get("run_id") == "k"]
    assert held == []
    assert resumed.keys == ["u1/a0", "u1/a1"]
    rows = resumed.rows()
    assert [row["key"] for row in rows] == resumed.keys
    assert rows == [row for row in RunView(tmp_path / "k").rows() if row["key"] in resumed.keys]
