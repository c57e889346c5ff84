"""Issue 12 item 2, browser side: a profiled browser run killed with -9 leaves its engines and
their accounting groups (v2 and v1); ``metewand clean RUN`` removes both, found by the run's
record (owned.jsonl) and marker. Real lightpanda, real cgroups, the built-in suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from browser_engine_fixtures import resolved_or_skip
from metewand.runtime.owned import OWNED_NAME
from metewand.suites.browser.leftovers import marked_processes
from watchdog_helpers import kill_runner_and_watchdog


def _recorded_groups(run_dir: Path) -> list[str]:
    path = run_dir / OWNED_NAME
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r["path"] for r in records if r.get("kind") == "group"]


def _running(binary: str, pids: list[int]) -> list[int]:
    found = []
    for pid in pids:
        try:
            if os.readlink(f"/proc/{pid}/exe") == binary:
                found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.timeout(240)
def test_clean_removes_a_killed_profiled_runs_engines_and_groups(tmp_path: Path) -> None:
    binary = str(resolved_or_skip("lightpanda").binary)
    run_id = f"bk{os.getpid()}"
    run_dir = tmp_path / "runs" / run_id
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "metewand",
            "browser",
            "run",
            "--engines",
            "lightpanda",
            "--k",
            "3",
            "--resource-profile",
            "engine",
            "--cold-start-samples",
            "1",
            "--resource-calibration",
            "peer-ab",
            "--host-telemetry",
            "off",
            "--no-progress",
            "--quiet",
            "--out",
            str(tmp_path / "runs"),
            "--run-id",
            run_id,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # an engine group is in use by a live engine
            # a warm attempts' group: a cold-start sample's engine stops by itself within the
            # second, so a kill that lands as it ends leaves no engine behind to sweep (ci104)
            live = [
                g
                for g in _recorded_groups(run_dir)
                if os.path.isdir(g) and f"-{run_id}-w" in os.path.basename(g)
            ]
            # the engine itself: a launch's gate shell carries the markers before it execs the
            # engine, and exits unrun when the runner dies first (measure.gate)
            if live and _running(binary, marked_processes(run_id)) and proc.poll() is None:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the profiled run never had a live engine in a recorded group")
        kill_runner_and_watchdog(proc.pid)  # else the watchdog leaves nothing to sweep
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    groups = [g for g in _recorded_groups(run_dir) if os.path.isdir(g)]
    assert groups and marked_processes(run_id)  # the kill left them behind
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "clean", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(groups) <= set(report["groups_removed"])
    assert not any(os.path.isdir(g) for g in groups)
    assert marked_processes(run_id) == []
