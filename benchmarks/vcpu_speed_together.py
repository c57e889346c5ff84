"""Do this machine's CPUs slow down together? The question behind duet benchmarking.

Duet benchmarking (Bulej, Horky, Tuma, Farquet, Prokopec, ICPE 2020) runs the two versions of a
comparison at the same time on one cloud VM, so that whatever slows the VM slows both, and compares
them pair by pair. It pays only when the interference is common to the CPUs. This script measures
that directly: one process pinned to each of two CPUs runs the same fixed work (the loop of
``metewand.measure.cpu_steadiness``, calibrated to ``--slice-ms``) in slices that start at the same
wall-clock moments, and prints per slice length:

- each CPU's log SD of the slice times (one measurement's spread);
- the correlation of the two CPUs' log slice times;
- the SD of the log ratio of a *concurrent* pair (CPU 0 against CPU 1, same moment), against
  that of a *sequential* pair (two consecutive slices on CPU 0), the interleaved design.

Duet helps when the concurrent pair's SD is well below the sequential one's.

``--processes N`` also asks whether a process keeps its speed: the same fixed work run twice,
50 ms apart, in each of N fresh Python processes, and the correlation of the two runs' log times
across processes (how much a speed reading taken just before an attempt could explain).

    .venv/bin/python benchmarks/vcpu_speed_together.py --slices 150 --slice-ms 20,80 --processes 40
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from metewand.measure.cpu_steadiness import calibrate, spin


def _on_cpu(
    cpu: int, iterations: int, start_at: float, period_s: float, slices: int, out: Any
) -> None:
    os.sched_setaffinity(0, {cpu})
    spin(iterations)  # caches warm after the migration; not kept
    times = []
    for k in range(slices):
        while time.time() < start_at + k * period_s:  # the same wall-clock start on both CPUs
            pass
        begin = time.thread_time_ns()
        spin(iterations)
        times.append(math.log(time.thread_time_ns() - begin))
    out.put((cpu, times))


def measure(cpus: tuple[int, int], slice_ms: float, slices: int) -> dict[str, float]:
    iterations = calibrate(int(slice_ms * 1e6))
    period_s = 2.5 * slice_ms / 1000  # room for a slow slice before the next one starts
    fork = mp.get_context("fork")
    queue: Any = fork.Queue()
    start_at = time.time() + 0.3
    procs = [
        fork.Process(target=_on_cpu, args=(cpu, iterations, start_at, period_s, slices, queue))
        for cpu in cpus
    ]
    for proc in procs:
        proc.start()
    found = dict(queue.get() for _ in procs)
    for proc in procs:
        proc.join()
    a, b = found[cpus[0]], found[cpus[1]]
    concurrent = [x - y for x, y in zip(a, b, strict=True)]
    sequential = [a[i + 1] - a[i] for i in range(0, len(a) - 1, 2)]
    return {
        "slice_ms": slice_ms,
        "log_sd_cpu_a": statistics.stdev(a),
        "log_sd_cpu_b": statistics.stdev(b),
        "correlation": statistics.correlation(a, b),
        "concurrent_pair_sd": statistics.stdev(concurrent),
        "sequential_pair_sd": statistics.stdev(sequential),
    }


TWICE = """
import math, time
from metewand.measure.cpu_steadiness import spin
out = []
for _ in range(2):
    begin = time.process_time_ns()
    spin({iterations})
    out.append(math.log(time.process_time_ns() - begin))
    time.sleep(0.05)
print(*out)
"""


def persistence(processes: int, work_ms: float) -> dict[str, float]:
    """Correlation across fresh processes of two runs of fixed work inside each one."""
    code = TWICE.format(iterations=calibrate(int(work_ms * 1e6)))
    runs = [
        [
            float(v)
            for v in subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout.split()
        ]
        for _ in range(processes)
    ]
    first, second = [r[0] for r in runs], [r[1] for r in runs]
    return {
        "correlation": statistics.correlation(first, second),
        "median_ms": math.exp(statistics.median(first)) / 1e6,
        "between_process_sd": statistics.stdev(first),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slices", type=int, default=150)
    parser.add_argument("--slice-ms", default="20,80", help="comma-separated slice lengths")
    parser.add_argument("--processes", type=int, default=0, help="fresh processes (0: skip)")
    args = parser.parse_args()
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        raise SystemExit(f"needs two usable CPUs; this process may use {usable}")
    cpus = (usable[0], usable[1])
    print(f"CPUs {cpus}, {args.slices} slices each; load average {os.getloadavg()[0]:.2f}")
    print("| slice | log SD, CPU a / b | correlation | concurrent pair SD | sequential pair SD |")
    print("|---|---|---|---|---|")
    for slice_ms in (float(s) for s in args.slice_ms.split(",")):
        r = measure(cpus, slice_ms, args.slices)
        print(
            f"| {r['slice_ms']:g} ms | {r['log_sd_cpu_a']:.3f} / {r['log_sd_cpu_b']:.3f} | "
            f"{r['correlation']:.2f} | {r['concurrent_pair_sd']:.3f} | "
            f"{r['sequential_pair_sd']:.3f} |"
        )
    if args.processes:
        p = persistence(args.processes, 60.0)
        print(
            f"{args.processes} fresh processes, 60 ms of work twice in each: correlation "
            f"{p['correlation']:.2f}, median {p['median_ms']:.1f} ms, log SD between processes "
            f"{p['between_process_sd']:.3f}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
