"""Issue 27 item 14: nothing outlives its runner. ``kill -9`` of ``run``, ``browser run`` (raw CDP
and a served adapter) and ``measure`` mid-work, and nothing else: within 10 s no process of theirs
is alive and none of their accounting groups is left, without any later command (the runner's
watchdog, ``measure.watchdog``). With the watchdog killed as well, the next metewand that starts
work removes the orphan groups within 10 s, and so does ``metewand clean --orphans``. Real
processes, real cgroups, real Chromium."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from browser_run_helpers import REPO, configured_adapters, lexbench_or_skip
from metewand.suites.browser.driver_registry import DRIVER_PATHS
from test_adapter_resume_sweep import KEY, STUCK_SERVED_ADAPTER, TASK, _noted, _wait_stuck
from test_compute_hostile import daemons, hostile_manifest
from watchdog_helpers import (
    groups_made_by,
    kill_runner_and_watchdog,
    tree_of,
    wait_all_gone,
    wait_groups_gone,
)

T = TypeVar("T")
LIMIT_S = 10.0
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}


def _start(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "metewand", *args],
        cwd=cwd,
        env=env or ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _until(
    found: Callable[[], T], runner: subprocess.Popen[bytes], what: str, timeout_s: float = 120
) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        assert runner.poll() is None, f"the runner ended before {what}"
        time.sleep(0.02)
    raise AssertionError(f"never saw {what}")


def _kill_and_expect_nothing_left(runner: subprocess.Popen[bytes]) -> dict[int, int]:
    """kill -9 of the runner alone; everything it started (its watchdog included) and every
    group it made are gone within LIMIT_S. Returns the tree it had."""
    tree = tree_of(runner.pid)
    groups = groups_made_by(runner.pid)
    assert len(tree) >= 2 and groups, (tree, groups)  # a watchdog and real work, in groups
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    left, took = wait_all_gone(tree, LIMIT_S)
    assert left == [], f"alive {took:.1f} s after the runner: {left}"
    assert wait_groups_gone(groups, LIMIT_S) == []
    return tree


@pytest.mark.timeout(180)
def test_a_killed_compute_run_leaves_no_worker_daemon_or_group(tmp_path: Path) -> None:
    manifest = hostile_manifest(tmp_path, impl="hang_once")  # a hung worker with a setsid daemon
    runner = _start(
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
    _until(lambda: daemons(tmp_path), runner, "the worker's daemon")
    tree = _kill_and_expect_nothing_left(runner)
    assert set(daemons(tmp_path)) <= set(tree)  # the daemon was in the tree and is gone


@pytest.mark.timeout(120)
def test_a_killed_measure_leaves_no_subject_and_no_group(tmp_path: Path) -> None:
    started = tmp_path / "started"
    script = f"sleep 300 & setsid sleep 301 & touch {started}; wait"
    runner = _start("measure", "--runs", "3", "--", "sh", "-c", script, cwd=tmp_path)
    _until(started.exists, runner, "the subject")
    _kill_and_expect_nothing_left(runner)


@pytest.mark.timeout(180)
@pytest.mark.engines
def test_a_killed_browser_run_leaves_no_engine_process_or_group(tmp_path: Path) -> None:
    runner = _start(
        "browser",
        "run",
        "--engines",
        "chrome",
        "--task",
        "own_slow_page",
        "--k",
        "5",
        "--out",
        str(tmp_path / "runs"),
        "--run-id",
        "b1",
        "--no-progress",
        cwd=REPO,
    )
    results = tmp_path / "runs" / "b1" / "results.jsonl"
    _until(lambda: results.exists() and results.read_text().count("\n") >= 1, runner, "a row")
    roots = _private_roots(tmp_path / "runs" / "b1")
    assert roots and all(os.path.isdir(root) for root in roots)  # the live engine's profile
    tree = _kill_and_expect_nothing_left(runner)
    assert len(tree) >= 3  # the watchdog, Chromium and its helpers
    # the watchdog removed the killed engine's profile and TMPDIR: no --resume needed for that
    deadline = time.monotonic() + LIMIT_S  # the dirs go last, after the kills and the groups
    while any(os.path.exists(root) for root in roots) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [root for root in roots if os.path.exists(root)] == []


def _private_roots(run_dir: Path) -> list[str]:
    """The engine launches' private roots this run recorded, still on disk."""
    lines = (run_dir / "engine_pids.jsonl").read_text().splitlines()
    named = [root for line in lines for root in json.loads(line).get("private_dirs", [])]
    return [root for root in named if os.path.isdir(root)]


@pytest.mark.timeout(240)
@pytest.mark.engines
def test_a_killed_run_with_a_stuck_served_adapter_leaves_nothing(tmp_path: Path) -> None:
    corpus = lexbench_or_skip()
    env = configured_adapters(tmp_path, STUCK_SERVED_ADAPTER, {KEY: "stuck"})
    env[DRIVER_PATHS[KEY].serve_env_variable] = ""  # served with the same argv
    runner = _start(
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
        "a1",
        "--no-progress",
        cwd=REPO,
        env=env,
    )
    pid_file = tmp_path / f"{KEY}_adapter.py.pids"
    stuck = _wait_stuck(pid_file, runner)  # the adapter and a grandchild that left its session
    tree = _kill_and_expect_nothing_left(runner)
    assert set(_noted(pid_file)) == set(stuck) and set(stuck) <= set(tree)


@pytest.mark.timeout(120)
def test_groups_left_by_a_runner_killed_with_its_watchdog_go_with_the_next_metewand(
    tmp_path: Path,
) -> None:
    started = tmp_path / "started"
    runner = _start("measure", "--", "sh", "-c", f"touch {started}; sleep 300", cwd=tmp_path)
    _until(started.exists, runner, "the subject")
    groups = groups_made_by(runner.pid)
    assert groups
    assert kill_runner_and_watchdog(runner.pid)
    runner.wait()
    time.sleep(0.5)
    assert [g for g in groups if os.path.isdir(g)] == groups  # nothing removed them yet
    # with the start-up sweep switched off (the suite's default) the next metewand leaves them
    assert _measure_true(tmp_path, "off").returncode == 0
    assert [g for g in groups if os.path.isdir(g)] == groups
    # on (a user's default), the next metewand that starts work removes them
    done = _measure_true(tmp_path, "on")
    assert done.returncode == 0, done.stderr
    assert wait_groups_gone(groups, LIMIT_S) == []


def _measure_true(cwd: Path, sweep: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metewand", "measure", "--", "true"],
        cwd=cwd,
        env={**ENV, "METEWAND_ORPHAN_SWEEP": sweep},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.timeout(120)
def test_clean_orphans_removes_groups_whose_creator_is_gone_and_no_others(tmp_path: Path) -> None:
    # alive for the whole test (killed below): a 60 s sleep ran out on a CI host at load 6
    live = _start("measure", "--", "sleep", "600", cwd=tmp_path)  # never touched
    try:
        live_groups = _until(lambda: groups_made_by(live.pid), live, "the live run's groups")
        started = tmp_path / "started"
        orphaned = _start("measure", "--", "sh", "-c", f"touch {started}; sleep 300", cwd=tmp_path)
        _until(started.exists, orphaned, "the subject")
        groups = groups_made_by(orphaned.pid)
        subject = tree_of(orphaned.pid)
        kill_runner_and_watchdog(orphaned.pid)
        orphaned.wait()
        done = subprocess.run(
            [sys.executable, "-m", "metewand", "clean", "--orphans", "--json"],
            cwd=tmp_path,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        # another metewand's watchdog starting meanwhile may have taken some: never others
        assert set(json.loads(done.stdout)["orphan_groups_removed"]) <= set(groups)
        assert wait_groups_gone(groups, LIMIT_S) == []
        assert wait_all_gone(subject, LIMIT_S)[0] == []  # the subject with its group
        assert live.poll() is None  # first: a finished run removes its own groups
        assert all(os.path.isdir(g) for g in live_groups)
    finally:
        live.kill()
        live.wait()


_GUARDING_RUNNER = """
import os, sys, time
from metewand.measure import watchdog
kept, released, linked = sys.argv[1:4]
for path in (kept, released, linked):
    watchdog.guard_dir(path)
watchdog.release_dir(released)  # removed by the runner itself: the watchdog must forget it
assert watchdog.ready(10.0)
print("guarded", flush=True)
time.sleep(300)
"""


@pytest.mark.timeout(60)
def test_the_watchdog_removes_guarded_dirs_but_not_released_ones_or_through_a_link(
    tmp_path: Path,
) -> None:
    kept = tmp_path / "an engine profile"  # a space in the path: the rest of the line is it
    released = tmp_path / "released"
    target = tmp_path / "not ours"
    for directory in (kept / "Default", released, target):
        directory.mkdir(parents=True)
    (kept / "Default" / "Cookies").write_text("x")
    (target / "keep.txt").write_text("x")
    linked = tmp_path / "link"
    linked.symlink_to(target, target_is_directory=True)
    runner = subprocess.Popen(
        [sys.executable, "-c", _GUARDING_RUNNER, str(kept), str(released), str(linked)],
        stdout=subprocess.PIPE,
        env=ENV,
    )
    assert runner.stdout is not None and runner.stdout.readline() == b"guarded\n"
    watchdog = tree_of(runner.pid)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    assert wait_all_gone(watchdog, LIMIT_S)[0] == []  # the watchdog finished its sweep
    assert not kept.exists()
    assert released.is_dir()  # forgotten, so never touched
    assert linked.is_symlink() and (target / "keep.txt").exists()
