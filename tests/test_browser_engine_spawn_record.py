"""An engine is recorded in the run directory as soon as it is spawned, not once it is ready:
a runner killed with ``kill -9`` while an engine starts up leaves a process that ``--resume``
(``kill_leftovers``) still finds by its recorded session, even when the process no longer shows
the run marker in its environment (Chromium overwrites that memory with its process title).

The engine here is a stand-in that drops the marker and never becomes ready: real Chromium
offers no deterministic window between spawn and readiness to kill the runner in."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from browser_run_helpers import ABOUT_BLANK_TASK, REPO, tiny_corpus
from metewand.runtime.owned import sweep
from metewand.suites.browser.leftovers import PID_FILE, kill_leftovers, run_processes
from watchdog_helpers import kill_runner_and_watchdog


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:  # a thread may end between the listing and the read
            found += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_engine_killed_runner_left_during_startup_is_found_and_killed(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"tiny.json": ABOUT_BLANK_TASK})
    stand_in = tmp_path / "engine.sh"
    stand_in.write_text("#!/bin/sh\nexec env -i /bin/sleep 300\n")
    stand_in.chmod(0o755)
    out = tmp_path / "runs"
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "metewand",
            "browser",
            "run",
            "--tasks",
            str(corpus),
            "--engines",
            "chrome",
            "--out",
            str(out),
            "--run-id",
            "r",
            "--no-progress",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO / "src"), "METEWAND_CHROME_BIN": str(stand_in)},
    )
    engine_pid = None
    try:
        deadline = time.monotonic() + 60
        while engine_pid is None and time.monotonic() < deadline:
            assert runner.poll() is None, "the runner ended before its engine started"
            sleepers = [c for c in _children(runner.pid) if "sleep" in _cmdline(c)]
            engine_pid = sleepers[0] if sleepers else None
            time.sleep(0.05)
        assert engine_pid is not None, "the stand-in engine never started"
        time.sleep(0.5)  # well inside the 20 s readiness wait
        kill_runner_and_watchdog(runner.pid)  # else the watchdog leaves nothing to sweep
        runner.wait()
        run_dir = out / "r"
        assert (run_dir / PID_FILE).is_file(), "the spawned engine was not recorded"
        assert engine_pid in run_processes(run_dir, "r")
        assert engine_pid in kill_leftovers(run_dir, "r")
        deadline = time.monotonic() + 10
        while _alive(engine_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(engine_pid)
        records = [json.loads(line) for line in (run_dir / PID_FILE).read_text().splitlines()]
        roots = [Path(d) for r in records for d in r["private_dirs"]]
        assert roots and not any(root.exists() for root in roots)  # its private root went too
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        if engine_pid is not None and _alive(engine_pid):
            os.kill(engine_pid, signal.SIGKILL)
        if (out / "r").is_dir():
            sweep(out / "r")  # the engine's accounting group (marks on), as `--resume` would


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
