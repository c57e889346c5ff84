"""What foreign-CPU telemetry adds to each host sample, in CPU of the sampling thread.

Issue 17's target: the extra ``/proc/stat`` and accounting-group reads per sample cost < 1 ms
CPU. Measured here against the host sample as it was before (load, memory, vmstat, PSI and the
benchmark's descendant walk), in the same run:

- ``/proc/stat``: the machine's busy ticks (one open, one line);
- group reads: the member pids of ``--groups`` real accounting groups, each holding a sleeping
  process (what ``HostTelemetry(member_pids=...)`` asks per sample in a browser run);
- process scan: ``/proc/PID/stat`` of every visible process, the part that names the foreign
  processes and keeps the benchmark's CPU continuous (it grows with the number of processes on
  the host, so it is reported apart, with that number);
- the whole foreign observation (all of the above plus the bookkeeping).

Each figure is the median thread CPU over ``--samples`` repetitions; the ratios divide by the
sample-before-this-change in the same run.

Then the process scan two ways, each file opened per scan (``procfs.read_all_cpu``) and each kept
open from one scan to the next (``procfs.StatFiles``, what the tracker uses), back to back and
after ``--rest-ms`` asleep (the sampler's thread wakes every couple of seconds, with cold caches:
``--rested`` repetitions of each, alternating).

    .venv/bin/python benchmarks/foreign_cpu_cost.py [--samples 200] [--groups 4] [--rested 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

from metewand.measure import procfs
from metewand.measure.accounting import TreeAccounting, open_accounting
from metewand.measure.foreign import ForeignCpuTracker, read_machine_busy_ticks
from metewand.measure.host import take_sample

TARGET_MS = 1.0


def cpu_ms(action: Callable[[], Any], samples: int) -> float:
    """Median thread CPU of one call, in ms (a warm-up call first: caches, imports)."""
    action()
    spent = []
    for _ in range(samples):
        before = time.thread_time_ns()
        action()
        spent.append(time.thread_time_ns() - before)
    return statistics.median(spent) / 1e6


def rested_cpu_ms(
    actions: dict[str, Callable[[], Any]], rounds: int, rest_s: float
) -> dict[str, float]:
    """Median thread CPU of each action when its thread has slept ``rest_s`` before it, the
    actions taking turns (so a drift of the host's speed falls on all of them)."""
    spent: dict[str, list[int]] = {name: [] for name in actions}
    for _ in range(rounds):
        for name, action in actions.items():
            time.sleep(rest_s)
            before = time.thread_time_ns()
            action()
            spent[name].append(time.thread_time_ns() - before)
    return {name: statistics.median(values) / 1e6 for name, values in spent.items()}


def open_groups(count: int) -> tuple[list[TreeAccounting], list[subprocess.Popen[bytes]]]:
    groups, sleepers = [], []
    for index in range(count):
        group = open_accounting(label=f"mw-foreign-bench-{os.getpid()}-{index}")
        preexec = group.preexec_join()
        sleeper = subprocess.Popen(["sleep", "600"], preexec_fn=preexec)  # noqa: PLW1509
        group.attach(sleeper.pid)
        groups.append(group)
        sleepers.append(sleeper)
    return groups, sleepers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--rested", type=int, default=40)
    parser.add_argument("--rest-ms", type=float, default=500.0)
    args = parser.parse_args()
    groups, sleepers = open_groups(args.groups)
    try:
        report(args.samples, groups)
        report_scans(args.samples, args.rested, args.rest_ms / 1000)
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()
        for group in groups:
            group.close()


def report(samples: int, groups: list[TreeAccounting]) -> None:
    root = os.getpid()

    def members() -> list[int]:
        return [pid for group in groups for pid in group.pids()]

    tracker = ForeignCpuTracker(root, members)
    backends = sorted({g.backend for g in groups})
    figures = {
        "host sample before this change": cpu_ms(lambda: take_sample(root, 0, None), samples),
        "/proc/stat busy ticks": cpu_ms(read_machine_busy_ticks, samples),
        f"group member reads ({len(groups)} groups, {backends})": cpu_ms(members, samples),
        "process scan (/proc/PID/stat of all)": cpu_ms(procfs.read_all_stats, samples),
        "whole foreign observation": cpu_ms(tracker.observe, samples),
    }
    baseline = figures["host sample before this change"]
    processes = len(procfs.read_all_stats())
    print(f"median thread CPU per host sample over {samples} samples; {processes} processes")
    for name, value in figures.items():
        print(f"  {name:<48} {value:7.3f} ms  ({value / baseline:5.2f}x the old sample)")
    extra = figures["/proc/stat busy ticks"] + figures[next(k for k in figures if "group" in k)]
    verdict = "met" if extra < TARGET_MS else "NOT met"
    print(
        f"/proc/stat + group reads: {extra:.3f} ms per sample (target < {TARGET_MS} ms: {verdict})"
    )
    per_process = figures["process scan (/proc/PID/stat of all)"] / max(1, processes) * 1000
    print(f"process scan: {per_process:.1f} us per visible process")


def report_scans(samples: int, rounds: int, rest_s: float) -> None:
    kept = procfs.StatFiles()
    try:
        scans = {"each file opened": procfs.read_all_cpu, "kept open": kept.read_all_cpu}
        warm = {name: cpu_ms(scan, samples) for name, scan in scans.items()}
        rested = rested_cpu_ms(scans, rounds, rest_s)
    finally:
        kept.close()
    processes = len(procfs.read_all_cpu())
    print(
        f"process scan ({processes} processes), ms of thread CPU: back to back | after "
        f"{rest_s * 1000:.0f} ms asleep"
    )
    for name in scans:
        print(
            f"  {name:<18} {warm[name]:7.3f} ({warm[name] / warm['each file opened']:4.2f}x) | "
            f"{rested[name]:7.3f} ({rested[name] / rested['each file opened']:4.2f}x)"
        )


if __name__ == "__main__":
    main()
