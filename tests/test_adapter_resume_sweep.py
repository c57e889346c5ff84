"""A served (long-lived) adapter stuck mid-attempt outlives a runner killed with -9: it never
reads the end of its stdin, and it carries no engine marker. Its process (pid, start time,
session) and its accounting groups are in the run's owned.jsonl, so ``--resume`` sweeps it, its
session and what left the session but stayed in its group (issue #15 follow-up). Real Chromium,
a real configured served adapter that hangs, a real ``kill -9`` and a real ``--resume``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from browser_run_helpers import REPO, alive, configured_adapters, lexbench_or_skip, rows_of
from metewand.runtime.owned import OWNED_NAME, sweep
from metewand.suites.browser.driver_registry import DRIVER_PATHS
from metewand.suites.browser.leftovers import kill_leftovers
from watchdog_helpers import kill_runner_and_watchdog

pytestmark = [pytest.mark.engines, pytest.mark.slow]

KEY, TASK = "chromedp", "sc_nav_title_read__chromedp"
# Served mode (one payload per stdin line); every attempt gets stuck after noting its pid and
# that of a grandchild that left the adapter's session (only its accounting group holds it).
STUCK_SERVED_ADAPTER = """#!{python}
import json, os, subprocess, sys, time
def note(pid):
    with open(__file__ + ".pids", "a") as f:
        f.write(f"{{pid}}\\n")
for line in sys.stdin:
    json.loads(line)
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    note(child.pid)
    note(os.getpid())
    time.sleep(600)
"""


def _noted(pid_file: Path) -> list[int]:
    return [int(p) for p in pid_file.read_text().split()] if pid_file.exists() else []


def _owned(run_dir: Path) -> list[dict[str, object]]:
    path = run_dir / OWNED_NAME
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def _wait_stuck(pid_file: Path, runner: subprocess.Popen[bytes]) -> list[int]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if len(noted := _noted(pid_file)) >= 2:
            return noted
        assert runner.poll() is None, "the run ended before its adapter got stuck"
        time.sleep(0.02)
    raise AssertionError("the served adapter never got its payload")


def test_a_served_adapter_stuck_when_the_runner_is_killed_is_swept_by_resume(
    tmp_path: Path,
) -> None:
    corpus = lexbench_or_skip()
    env = configured_adapters(tmp_path, STUCK_SERVED_ADAPTER, {KEY: "stuck"})
    env[DRIVER_PATHS[KEY].serve_env_variable] = ""  # served with the same argv
    pid_file = tmp_path / f"{KEY}_adapter.py.pids"
    run_dir = tmp_path / "runs" / "stuck"
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "metewand",
            "browser",
            "run",
            "--tasks",
            str(corpus),
            "--task",
            TASK,
            "--engines",
            "chrome",
            "--adapter-mode",
            "long-lived",
            "--out",
            str(tmp_path / "runs"),
            "--run-id",
            "stuck",
            "--timeout-scale",
            "0.1",
            "--no-progress",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        grandchild, adapter = _wait_stuck(pid_file, runner)
        kill_runner_and_watchdog(runner.pid)  # else the watchdog leaves nothing to sweep
        runner.wait(10)
        assert alive(adapter) and alive(grandchild), "the kill must leave the adapter stuck"
        records = _owned(run_dir)
        assert any(r["kind"] == "process" and r["pid"] == adapter for r in records)
        groups = [str(r["path"]) for r in records if r["kind"] == "group"]
        adapter_groups = [g for g in groups if f"adapter-{KEY}" in g and os.path.isdir(g)]
        assert adapter_groups, groups  # the served adapter's own group, recorded before made

        # the resumed attempt's adapter gets stuck too and meets its deadline: a timeout row
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "metewand",
                "browser",
                "run",
                "--resume",
                str(run_dir),
                "--no-progress",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]  # a timeout is a result (exit 0)
        (row,) = rows_of(run_dir)
        assert row["status"] == "timeout" and row["adapter_mode"] == "long_lived", row["reason"]
        assert not alive(adapter) and not alive(grandchild)
        assert not any(os.path.isdir(g) for g in adapter_groups)
        assert not [pid for pid in _noted(pid_file) if alive(pid)]  # the resumed one's too
    finally:
        if runner.poll() is None:
            runner.kill()
        # a failed run of this test leaves nothing behind: sleepers, engines (by marker and by
        # recorded session: Chromium's browser process rewrites its environment), groups
        for pid in _noted(pid_file):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        kill_leftovers(run_dir, "stuck")
        sweep(run_dir)
