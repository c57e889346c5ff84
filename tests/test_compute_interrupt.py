"""Ctrl-C on a compute run: a real ``metewand run`` subprocess gets SIGINT by pid mid-run.

It must exit 130, mark the run interrupted, leave whole rows and whole artifact dirs only, kill
every worker process of the attempts in flight; ``metewand run --resume RUN`` (no MANIFEST)
finishes it with every planned key exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from compute_helpers import write_manifest
from metewand.suites.compute.manifest_load import load
from metewand.suites.compute.plan_expand import build_plan

# A worker whose execute sleeps as long as a file of the test says (so the same manifest hangs
# in the first run and is quick on resume) and keeps a child process that must die with it.
SLEEPY = """
import subprocess, sys, time
from pathlib import Path
from metewand.worker import Evaluator, Implementation

here, marker, name = Path(sys.argv[1]), sys.argv[2], sys.argv[3]

def implementation():
    impl = Implementation()

    @impl.execute
    def execute(state, result_dir):
        seconds = float((here / f"sleep_{name}").read_text())
        if seconds > 1:
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
        time.sleep(seconds)
        return {"answer": 42}

    return impl

def evaluator():
    ev = Evaluator()

    @ev.evaluate
    def evaluate(request, result):
        return {"correct": True}

    return ev

role = implementation if sys.argv[4] == "impl" else evaluator
raise SystemExit(role().serve())
"""


# an experiment a run can leave out with --experiment slow
QUICK_EXPERIMENT = """
[[experiments]]
name = "quick"
problem = "answer"
implementations = ["a"]
repetitions = 3
"""


def _manifest(tmp_path: Path, marker: str, extra: str = "") -> Path:
    script = tmp_path / "sleepy.py"
    script.write_text(SLEEPY)
    (tmp_path / "sleep_a").write_text("0.1")
    (tmp_path / "sleep_b").write_text("60")  # the attempt in flight when SIGINT comes
    argv = f'"{tmp_path}", "{marker}"'
    impls = "".join(
        f"""
[implementations.{name}]
runner = "python"
entrypoint = "{script}"
args = [{argv}, "{name}", "impl"]
problems = ["answer"]
"""
        for name in ("a", "b")
    )
    return write_manifest(
        tmp_path,
        f"""
[problems.answer]
evaluator = {{ runner = "python", entrypoint = "{script}", args = [{argv}, "e", "eval"] }}
result_schema = {{ type = "object", required = ["answer"] }}
metric_schema = {{ type = "object", required = ["correct"] }}
"""
        + impls
        + """
[execution_policies.patient]
timeout = "120 s"

[[experiments]]
name = "slow"
problem = "answer"
implementations = ["a", "b"]
repetitions = 2
execution_policy = "patient"
"""
        + extra,
    )


def _metewand(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "metewand", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _rows(run_dir: Path) -> list[dict]:
    path = run_dir / "results.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _marked_pids(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


def _orphan_artifacts(run_dir: Path, keys: set[str]) -> list[str]:
    """Artifact dirs that are neither a row's dir, inside one, nor on the way to one."""
    orphans = []
    for path in (run_dir / "artifacts").rglob("*"):
        rel = str(path.relative_to(run_dir / "artifacts"))
        if not any(k == rel or k.startswith(rel + "/") or rel.startswith(k + "/") for k in keys):
            orphans.append(rel)
    return orphans


def _interrupt_mid_run(proc: subprocess.Popen[str], run_dir: Path, marker: str) -> None:
    """SIGINT once a row is written and b's execute (with its grandchild) is under way."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        grandchild = any(b"time.sleep(60)" in _cmdline(pid) for pid in _marked_pids(marker))
        if grandchild and _rows(run_dir):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    os.kill(proc.pid, signal.SIGINT)


def _kill_all(proc: subprocess.Popen[str], marker: str) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in _marked_pids(marker):
        os.kill(pid, signal.SIGKILL)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_sigint_stops_cleanly_and_resume_finishes(tmp_path: Path) -> None:
    marker = f"mw-interrupt-{os.getpid()}-{tmp_path.name}"
    manifest = _manifest(tmp_path, marker)
    planned = {a.key for a in build_plan(load(str(manifest))).attempts}
    out = ["--out", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache")]
    run_dir = tmp_path / "runs" / "r"

    proc = _metewand("run", str(manifest), "--run-id", "r", *out, cwd=tmp_path)
    try:
        _interrupt_mid_run(proc, run_dir, marker)
        _, stderr = proc.communicate(timeout=30)  # b alone would sleep 60 s
    finally:
        _kill_all(proc, marker)  # only if the test already failed
    assert proc.returncode == 130, stderr
    assert "resume with --resume" in stderr
    assert _marked_pids(marker) == [], "a worker of an in-flight attempt survived the interrupt"
    state = json.loads((run_dir / "run_manifest.json").read_text())["state"]
    assert state == "interrupted"
    rows = _rows(run_dir)  # every line parses: nothing half-written
    assert 1 <= len(rows) < len(planned)
    keys = {row["key"] for row in rows}
    assert _orphan_artifacts(run_dir, keys) == [], "artifacts of an attempt that has no row"
    assert not any((run_dir / ".staging").glob("*")), "a staging dir was left behind"

    (tmp_path / "sleep_b").write_text("0.1")  # same manifest, quick this time
    resumed = _metewand("run", "--resume", "r", *out, "--no-progress", cwd=tmp_path)
    stdout, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stderr
    assert "attempts by status" in stderr  # the final summary table, even with --no-progress
    assert f"{len(rows)} already done" in stdout
    final = [row["key"] for row in _rows(run_dir)]
    assert sorted(final) == sorted(planned), "every planned key exactly once"
    manifest_data = json.loads((run_dir / "run_manifest.json").read_text())
    assert manifest_data["state"] == "complete"
    assert manifest_data["data"]["dataset_materializations"], "materialization receipts recorded"


def test_a_resume_keeps_the_experiments_the_run_was_started_with(tmp_path: Path) -> None:
    """``--experiment slow``, Ctrl-C, then ``--resume`` without the flag: the run finishes the
    slow experiment's attempts and never plans the other's; another selection is refused."""
    marker = f"mw-interrupt-sel-{os.getpid()}-{tmp_path.name}"
    manifest = _manifest(tmp_path, marker, QUICK_EXPERIMENT)
    whole = build_plan(load(str(manifest))).attempts
    slow = {a.key for a in whole if a.key.startswith("slow/")}
    assert slow and len(slow) < len(whole)
    out = ["--out", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache")]
    run_dir = tmp_path / "runs" / "r"

    proc = _metewand(
        "run", str(manifest), "--experiment", "slow", "--run-id", "r", *out, cwd=tmp_path
    )
    try:
        _interrupt_mid_run(proc, run_dir, marker)
        _, stderr = proc.communicate(timeout=30)
    finally:
        _kill_all(proc, marker)
    assert proc.returncode == 130, stderr
    before = (run_dir / "results.jsonl").read_bytes()

    (tmp_path / "sleep_b").write_text("0.1")
    other = _metewand("run", "--resume", "r", "--experiment", "quick", *out, cwd=tmp_path)
    _, stderr = other.communicate(timeout=60)
    assert other.returncode == 2, stderr
    assert "was run with --experiment slow; resuming with --experiment quick" in stderr
    assert (run_dir / "results.jsonl").read_bytes() == before, "a refused resume wrote rows"

    resumed = _metewand("run", "--resume", "r", *out, "--no-progress", cwd=tmp_path)
    _, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stderr
    assert sorted(row["key"] for row in _rows(run_dir)) == sorted(slow)
    data = json.loads((run_dir / "run_manifest.json").read_text())["data"]
    assert data["selected_experiments"] == ["slow"] and data["planned_attempts"] == len(slow)
