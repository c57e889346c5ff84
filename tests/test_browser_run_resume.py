"""Acceptance 5: a run killed with kill -9 halfway; --resume finishes it and leaves no engine
process behind (engines carry the run marker, walked in /proc)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from browser_run_helpers import REPO, cli, lexbench_or_skip, manifest_of, rows_of
from metewand.suites.browser.leftovers import marked_processes, run_processes
from watchdog_helpers import kill_runner_and_watchdog

TASKS = (
    "pw_raw_runtime_evaluateprimitives",
    "pw_raw_dom_describenode",
    "pw_raw_dom_getboxmodel",
    "pw_raw_accessibility_getfullaxtree",
    "pw_raw_css_getcomputedstylefornode",
)


def _args(corpus: Path, out: Path) -> list[str]:
    args = [
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        "chrome,lightpanda",
        "--k",
        "2",
        "--out",
        str(out),
        "--run-id",
        "killed",
        "--no-progress",
    ]
    for task in TASKS:
        args += ["--task", task]
    return args


def _wait_rows(results: Path, at_least: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= at_least:
            return
        assert proc.poll() is None, "the run ended before it could be killed"
        time.sleep(0.05)
    raise AssertionError("the run produced no rows in time")


def test_kill_9_then_resume_finishes_and_leaves_no_engine(tmp_path: Path) -> None:
    corpus = lexbench_or_skip()
    out = tmp_path / "runs"
    run_dir = out / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "metewand", *_args(corpus, out)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    try:
        _wait_rows(run_dir / "results.jsonl", 5, proc)
        kill_runner_and_watchdog(proc.pid)  # else the watchdog leaves nothing to sweep
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    orphans = marked_processes("killed")
    assert orphans, "kill -9 of the runner should orphan its engines (the point of the test)"
    assert manifest_of(run_dir)["state"] == "running"
    before = len(rows_of(run_dir))
    assert 5 <= before < 20

    done = cli("browser", "run", "--resume", str(run_dir), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "left by an earlier run" in done.stderr
    rows = rows_of(run_dir)
    assert len(rows) == len(TASKS) * 2 * 2
    assert len({r["key"] for r in rows}) == len(rows)
    assert manifest_of(run_dir)["state"] == "complete"
    assert (run_dir / "scores.json").is_file()
    assert run_processes(run_dir, "killed") == []
    for pid in orphans:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_jobs_2_runs_the_same_attempt_set(tmp_path: Path) -> None:
    corpus = lexbench_or_skip()
    keys = {}
    for jobs in ("1", "2"):
        args = [
            "browser",
            "run",
            "--tasks",
            str(corpus),
            "--engines",
            "chrome,lightpanda",
            "--k",
            "1",
            "--jobs",
            jobs,
            "--out",
            str(tmp_path),
            "--run-id",
            f"j{jobs}",
            "--no-progress",
            "--task",
            TASKS[0],
            "--task",
            TASKS[1],
            "--task",
            TASKS[2],
        ]
        done = cli(*args)
        assert done.returncode == 0, done.stderr
        rows = rows_of(tmp_path / f"j{jobs}")
        keys[jobs] = {(r["key"], r["order"]["round"], r["order"]["position"]) for r in rows}
        workers = {r["engine_process"]["worker"] for r in rows}
        assert workers == ({0} if jobs == "1" else {0, 1})
        assert run_processes(tmp_path / f"j{jobs}", f"j{jobs}") == []
    assert keys["1"] == keys["2"] and len(keys["1"]) == 6


def test_sigint_marks_interrupted_exit_130_no_engine_left(tmp_path: Path) -> None:
    corpus = lexbench_or_skip()
    out = tmp_path / "runs"
    args = _args(corpus, out)
    args[args.index("killed")] = "sigint"
    stderr = tmp_path / "stderr.txt"  # said on a failure: an exit other than 130 was seen once
    with stderr.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "metewand", *args],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        )
    try:
        _wait_rows(out / "sigint" / "results.jsonl", 3, proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130, stderr.read_text(errors="replace")[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert manifest_of(out / "sigint")["state"] == "interrupted"
    assert run_processes(out / "sigint", "sigint") == []
    assert not (out / "sigint" / ".staging").exists() or not any(
        (out / "sigint" / ".staging").iterdir()
    )
