"""Foreign CPU on the real /proc: the benchmark's own CPU (its tree, children that exit, helpers
that leave the tree in its session) is its own; the sustained-load rule; doctor's look."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from browser_run_helpers import REPO
from foreign_helpers import BURNER_COMM, burner, named_pids, orphan_burner
from metewand import canonical
from metewand.cli.main import cli
from metewand.measure.foreign import ForeignCpuTracker
from metewand.measure.host import HostTelemetry
from metewand.measure.host_gate import GateThresholds, evaluate_gate, foreign_cpu_outcome

# Busy for ~0.15 s of CPU, ten times over, each in a fresh process the parent waits for: their
# CPU reaches the benchmark only through the parent's cutime once they are gone.
CHURN = """
import subprocess, sys, time
burn = "import time\\nend = time.process_time() + 0.15\\nwhile time.process_time() < end: pass"
for _ in range(10):
    subprocess.run([sys.executable, "-c", burn], check=True)
end = time.process_time() + 0.5
while time.process_time() < end:
    pass
"""
# A session leader whose helper double-forks out of the tree (as Chromium's crash handler does)
# and burns CPU there while the leader lives.
ESCAPE = """
import os, sys, time
if os.fork() == 0:
    if os.fork() == 0:
        print(os.getpid(), flush=True)
        end = time.monotonic() + 3
        while time.process_time() < 0.6 and time.monotonic() < end:
            pass
        print(time.process_time(), flush=True)
    os._exit(0)
os.wait()
time.sleep(3.5)
"""


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _bench_core_seconds(samples: list[dict[str, Any]]) -> float:
    figured = [s["foreign_cpu"] for s in samples if s.get("foreign_cpu")]
    return sum(f["bench_cpu_cores"] * f["interval_s"] for f in figured)


def test_exited_children_count_as_the_benchmarks_own_cpu() -> None:
    own_before, children_before = time.process_time(), _children_cpu_s()
    telemetry = HostTelemetry(0.2, os.getpid()).start()
    churn = subprocess.Popen([sys.executable, "-c", CHURN])
    churn.wait(timeout=60)
    time.sleep(0.3)
    telemetry.stop()
    spent = (time.process_time() - own_before) + (_children_cpu_s() - children_before)
    counted = _bench_core_seconds(telemetry.samples)
    # one clock tick per process per reading is the resolution; the window edges add a little
    assert abs(counted - spent) <= 0.1 * spent + 0.06, (counted, spent)
    assert spent > 1.5  # the churn really burned: ten 0.15 s children and 0.5 s of its own
    assert churn.pid not in named_pids(telemetry.samples)


def test_a_helper_that_leaves_the_tree_in_the_benchmarks_session_is_not_foreign() -> None:
    telemetry = HostTelemetry(0.2, os.getpid()).start()
    leader = subprocess.Popen(
        [sys.executable, "-c", ESCAPE], start_new_session=True, stdout=subprocess.PIPE
    )
    out, _ = leader.communicate(timeout=30)
    telemetry.stop()
    helper_pid, helper_cpu_s = out.split()
    # the double-forked burner left the tree but not the leader's session
    assert int(helper_pid) not in named_pids(telemetry.samples)
    # counted as the benchmark's, up to its last 0.2 s interval: it is reaped outside the tree
    assert _bench_core_seconds(telemetry.samples) > float(helper_cpu_s) - 0.25


# A session leader that waits for a line, then forks a burner in its own session and exits at
# once: the burner is never seen in the tree, and its leader is gone before the next look.
ORPHAN = orphan_burner(0.5, wait_for_line=True)


def test_a_helper_left_by_an_exited_session_leader_is_not_foreign() -> None:
    tracker = ForeignCpuTracker(os.getpid())
    leader = subprocess.Popen(
        [sys.executable, "-c", ORPHAN], start_new_session=True, stdin=subprocess.PIPE
    )
    try:
        time.sleep(0.3)  # the leader has started and waits
        assert tracker.observe() is None  # first look: the leader alone, in the tree
        assert leader.stdin is not None
        leader.stdin.write(b"go\n")
        leader.stdin.close()
        leader.wait(timeout=10)  # the leader is gone; its burner lives on in its session
        time.sleep(0.3)
        figures = tracker.observe()
        assert figures is not None
        named = {entry["pid"] for entry in figures["top_foreign"]}
        burners = [
            int(pid)
            for pid in os.listdir("/proc")
            if pid.isdigit() and _session_of(int(pid)) == leader.pid
        ]
        assert burners, "the burner should still be running in the leader's session"
        assert not set(burners) & named, (burners, figures["top_foreign"])
    finally:
        subprocess.run(["pkill", "-9", "-s", str(leader.pid)], check=False)


# A session leader that forks a burner in its own session and exits at once: started and gone
# between two looks, as a cold-start engine sample is between two host samples.
FLEETING = orphan_burner(0.5)


@pytest.mark.parametrize("claimed", [True, False])
def test_a_session_claimed_at_launch_is_the_benchmarks_though_no_look_saw_its_leader(
    claimed: bool,
) -> None:
    tracker = ForeignCpuTracker(os.getpid())
    assert tracker.observe() is None
    leader = subprocess.Popen([sys.executable, "-c", FLEETING], start_new_session=True)
    try:
        if claimed:
            tracker.claim_session(leader.pid)  # what the launcher does right after the spawn
        leader.wait(timeout=10)
        time.sleep(0.3)
        burners = [
            int(pid)
            for pid in os.listdir("/proc")
            if pid.isdigit() and _session_of(int(pid)) == leader.pid
        ]
        assert burners, "the burner should still be running in the leader's session"
        figures = tracker.observe()
        assert figures is not None
        named = {entry["pid"] for entry in figures["top_foreign"]}
        # unclaimed, the burner is foreign: no look saw its leader, which is what a claim mends
        assert bool(set(burners) & named) is not claimed, (burners, figures["top_foreign"])
    finally:
        subprocess.run(["pkill", "-9", "-s", str(leader.pid)], check=False)


def _session_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[3])  # state ppid pgrp session
    except (OSError, ValueError, IndexError):
        return None


def _sample(cores: float | None) -> dict[str, Any]:
    figures = None
    if cores is not None:
        top = [{"pid": 4242, "comm": "hog", "cpu_cores": cores}]
        figures = {"foreign_cpu_cores": cores, "top_foreign": top}
    return {"foreign_cpu": figures, "unavailable": {}}


def test_foreign_cpu_load_needs_sustained_samples_over_the_limit() -> None:
    th = GateThresholds()
    blips = [_sample(v) for v in (None, 0.5, 0.5, 0.0, 0.5, 0.5, 0.02)]
    assert foreign_cpu_outcome(blips, th).triggered is False
    sustained = [_sample(v) for v in (None, 0.05, 0.3, 0.2, 0.15, 0.0)]
    outcome = foreign_cpu_outcome(sustained, th)
    assert outcome.triggered is True and "hog[4242]" in outcome.detail
    assert outcome.figures["longest_run_samples"] == 3
    assert outcome.figures["top_foreign"][0]["pid"] == 4242
    looser = GateThresholds(foreign_cpu_max_cores=0.25)
    assert foreign_cpu_outcome(sustained, looser).triggered is False
    verdict = evaluate_gate([_sample(None)], th)  # telemetry recorded before this existed
    assert "foreign_cpu_load" in {u["condition"] for u in verdict["unevaluated"]}


def _doctor(*args: str) -> subprocess.CompletedProcess[str]:
    """doctor in its own process: the test's burner is then outside its tree."""
    return subprocess.run(
        [sys.executable, "-m", "metewand", "doctor", "--engines", "", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def test_doctor_names_a_busy_foreign_process() -> None:
    with burner(nice=0) as hog:
        result = _doctor("--json", "--foreign-look-s", "1.5")
    assert result.returncode in (0, 3), result.stderr
    look = canonical.loads(result.stdout)["foreign_cpu"]
    assert look["look_s"] == 1.5
    assert {"pid": hog.pid, "comm": BURNER_COMM} in [
        {"pid": t["pid"], "comm": t["comm"]} for t in look["top_foreign"]
    ]
    assert look["foreign_cpu_cores"] > 0.1  # at least the burner's share, whatever else runs
    text = CliRunner().invoke(cli, ["doctor", "--engines", "", "--foreign-look-s", "1"])
    assert "foreign CPU: " in text.output and " over a 1 s look" in text.output
    assert canonical.loads(_doctor("--json", "--foreign-look-s", "0").stdout)["foreign_cpu"] is None


@pytest.mark.engines
def test_browser_doctor_looks_before_launching_engines() -> None:
    args = ["browser", "doctor", "--engines", "chrome", "--foreign-look-s", "1"]  # --help example
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    first, second = result.output.splitlines()[:2]
    assert first.startswith("foreign CPU: ") and " over a 1 s look" in first
    assert second.startswith("chrome ")


def test_foreign_processes_started_during_the_run_are_counted_by_comm(tmp_path: Path) -> None:
    # the comm is the name of the file executed: a space and parentheses, from the first exec
    name = "mw (odd) one"
    (tmp_path / name).symlink_to(shutil.which("sleep") or "/bin/sleep")
    bench = subprocess.Popen(["sleep", "30"])  # the benchmark: this process alone
    others: list[subprocess.Popen[bytes]] = []
    try:
        telemetry = HostTelemetry(0.2, bench.pid).start()
        time.sleep(0.3)
        others = [subprocess.Popen([str(tmp_path / name), "3"]) for _ in range(3)]  # beside it
        time.sleep(0.8)
        summary = telemetry.stop()
    finally:
        for proc in [bench, *others]:
            proc.kill()
            proc.wait()
    started = summary["foreign_cpu"]["started_during_run"]
    counts = {c["comm"]: c["count"] for c in started["most_common_comm"]}
    assert counts.get(name) == 3, started
    assert started["count"] >= 3
