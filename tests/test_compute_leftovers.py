"""Issue 12 item 2: a compute run killed with -9 leaves workers and accounting groups (v2 and v1);
``--resume`` and ``metewand clean RUN`` find them by the run's record and remove them — and
nothing else. Real ``metewand run`` subprocesses, real cgroups."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compute_helpers import alive
from metewand.runtime.owned import OWNED_NAME
from test_compute_hostile import daemons, hostile_manifest
from watchdog_helpers import kill_runner_and_watchdog


def _metewand(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "metewand", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _recorded(run_dir: Path) -> tuple[list[int], list[str]]:
    records = [json.loads(line) for line in (run_dir / OWNED_NAME).read_text().splitlines()]
    pids = [r["pid"] for r in records if r["kind"] == "process"]
    return pids, [r["path"] for r in records if r["kind"] == "group"]


def killed_run(tmp_path: Path) -> tuple[Path, Path]:
    """A run killed with -9 while its worker hangs (with a setsid daemon of its own)."""
    manifest = hostile_manifest(tmp_path, impl="hang_once")
    proc = _metewand(
        "run",
        str(manifest),
        "--run-id",
        "r1",
        "--out",
        "runs",
        "--cache-dir",
        "cache",
        "--host-telemetry",
        "off",
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 60
    while not daemons(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert daemons(tmp_path), proc.communicate(timeout=5)
    kill_runner_and_watchdog(proc.pid)  # the watchdog too: else it leaves nothing to sweep
    proc.wait()
    return manifest, tmp_path / "runs" / "r1"


def _left(recorded: tuple[list[int], list[str]], tmp_path: Path) -> tuple[list[int], list[str]]:
    pids, groups = recorded
    live = [p for p in pids + daemons(tmp_path) if alive(p)]
    return live, [g for g in groups if os.path.isdir(g)]


@pytest.mark.timeout(180)
def test_clean_removes_what_a_killed_run_left(tmp_path: Path) -> None:
    manifest, run_dir = killed_run(tmp_path)
    recorded = _recorded(run_dir)
    live, groups = _left(recorded, tmp_path)
    assert live and groups  # the kill did leave workers, a daemon and groups behind
    assert any("/unified/" in g or "/memory/" in g for g in groups)
    bystander = subprocess.Popen(["sleep", "60"])  # not the run's: must survive the clean
    try:
        done = subprocess.run(
            [sys.executable, "-m", "metewand", "clean", str(run_dir), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert set(report["groups_removed"]) == set(groups)
        assert _left(recorded, tmp_path) == ([], [])
        assert not (run_dir / OWNED_NAME).exists()
        assert alive(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()
    assert not (run_dir / ".work").exists()


@pytest.mark.timeout(180)
def test_resume_removes_what_the_killed_session_left_and_finishes(tmp_path: Path) -> None:
    manifest, run_dir = killed_run(tmp_path)
    live, groups = _left(_recorded(run_dir), tmp_path)
    assert live and groups
    proc = _metewand(
        "run",
        "--resume",
        "r1",
        "--out",
        "runs",
        "--cache-dir",
        "cache",
        "--host-telemetry",
        "off",
        cwd=tmp_path,
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert not any(alive(p) for p in live)
    assert not any(os.path.isdir(g) for g in groups)
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["accepted"]
    assert not (run_dir / OWNED_NAME).exists()  # all recorded things gone, the record too


@pytest.mark.timeout(120)
def test_resume_with_another_manifest_is_refused_before_touching_the_run(tmp_path: Path) -> None:
    first = tmp_path / "one"
    first.mkdir()
    manifest = hostile_manifest(first)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "metewand",
            "run",
            str(manifest),
            "--run-id",
            "r1",
            "--out",
            str(tmp_path / "runs"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--host-telemetry",
            "off",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    other_dir = tmp_path / "two"
    other_dir.mkdir()
    other = hostile_manifest(other_dir, evaluator="daemon")  # another benchmark
    run_dir = tmp_path / "runs" / "r1"
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "metewand",
            "run",
            str(other),
            "--resume",
            "r1",
            "--out",
            str(tmp_path / "runs"),
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "refusing to mix" in done.stderr and "Traceback" not in done.stderr
    after = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    assert after == before  # not a byte of the run changed


def test_sweep_never_hits_a_reused_pid_or_its_session(tmp_path: Path) -> None:
    """A record whose pid now belongs to another process (another start time) names nothing."""
    from metewand.measure import procfs
    from metewand.runtime.owned import sweep

    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        born = procfs.read_stat(stranger.pid).starttime_ticks
        record = {
            "kind": "process",
            "pid": stranger.pid,
            "session": stranger.pid,
            "starttime": born - 1,
        }  # the recorded process was an older one
        (tmp_path / OWNED_NAME).write_text(json.dumps(record) + "\n")
        report = sweep(tmp_path, wait_s=0.5)
        assert report.killed == [] and alive(stranger.pid)
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.timeout(180)
def test_clean_refuses_a_run_a_live_metewand_holds(tmp_path: Path) -> None:
    manifest = hostile_manifest(tmp_path, impl="hang_once")
    proc = _metewand(
        "run",
        str(manifest),
        "--run-id",
        "live",
        "--out",
        "runs",
        "--cache-dir",
        "cache",
        "--host-telemetry",
        "off",
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 60
        while not daemons(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        done = subprocess.run(
            [sys.executable, "-m", "metewand", "clean", str(tmp_path / "runs" / "live")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert "open by another metewand process" in done.stderr
        assert proc.poll() is None  # the live run was not touched
    finally:
        proc.send_signal(signal.SIGINT)  # its own interrupt path cleans up
        proc.communicate(timeout=60)
    assert not any(alive(p) for p in daemons(tmp_path))


def test_clean_by_run_id_of_a_finished_run_finds_nothing_to_remove(tmp_path: Path) -> None:
    """The --help example ``metewand clean RUN_ID --json`` (an id under ./runs)."""
    from compute_helpers import run

    summary = run(hostile_manifest(tmp_path), tmp_path, run_id="done1", host_sample_interval_s=None)
    assert summary.rows[0]["status"] == "accepted"
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "clean", "done1", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["killed"] == [] and report["groups_removed"] == []
    assert report["temp_dirs_removed"] == []  # a finished run leaves none


@pytest.mark.timeout(180)
def test_clean_without_run_sweeps_every_run_under_runs(tmp_path: Path) -> None:
    """The --help example ``metewand clean``: every run under ./runs; a damaged one is listed."""
    manifest, run_dir = killed_run(tmp_path)
    live, groups = _left(_recorded(run_dir), tmp_path)
    assert live and groups
    junk = tmp_path / "runs" / "junk"
    junk.mkdir()
    (junk / "run_manifest.json").write_text("{not json")
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "clean", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    reports = json.loads(done.stdout)
    assert set(reports) == {str(Path("runs") / "r1"), str(Path("runs") / "junk")}
    assert set(reports[str(Path("runs") / "r1")]["groups_removed"]) == set(groups)
    assert "not valid JSON" in reports[str(Path("runs") / "junk")]
    assert _left((live, groups), tmp_path) == ([], [])
