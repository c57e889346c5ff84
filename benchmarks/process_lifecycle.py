"""Exit notice and the CPU of waiting: the former polling waits against measure.process's pidfd.

Two figures, each as a ratio against the pidfd wait measured in the same run (the methods are
interleaved trial by trial, so a loaded host loads them alike):

- exit-notice latency: a sleeping child is SIGKILLed; how long until the wait returns. Methods:
  ``poll-20ms`` (the browser engine's former teardown wait, and the adapters', owned sweep's and
  session sweep's loops at 5-20 ms), ``Popen.wait`` (``subprocess``'s own timed wait: sleeps
  doubling up to 50 ms, compute's former fallback and build wait), ``pidfd`` (``Process.wait_exited``)
  and ``pidfd-asyncio`` (``Process.wait_exited_async``);
- CPU of waiting: the waiting thread's CPU time and voluntary wake-ups over a wait of
  ``--wait-s`` on a child that does not exit.

Run: ``.venv/bin/python benchmarks/process_lifecycle.py [--trials 30] [--wait-s 2]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from metewand.measure.process import Process

Wait = Callable[[Process, float], bool]


def poll_20ms(proc: Process, limit_s: float) -> bool:
    """The former engine teardown wait: ``Popen.poll()`` every 20 ms."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            return True
        time.sleep(0.02)
    return proc.popen.poll() is not None


def popen_wait(proc: Process, limit_s: float) -> bool:
    try:
        proc.popen.wait(limit_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def pidfd(proc: Process, limit_s: float) -> bool:
    return proc.wait_exited(limit_s)


def pidfd_asyncio(proc: Process, limit_s: float) -> bool:
    return asyncio.run(proc.wait_exited_async(limit_s))


METHODS: dict[str, Wait] = {
    "poll-20ms": poll_20ms,
    "Popen.wait": popen_wait,
    "pidfd": pidfd,
    "pidfd-asyncio": pidfd_asyncio,
}


def exit_latency(wait: Wait) -> float:
    proc = Process.start(["sleep", "300"])
    try:
        time.sleep(0.02)  # settled into its sleep
        killed = time.perf_counter()
        os.kill(proc.pid, signal.SIGKILL)
        assert wait(proc, 5.0)
        return time.perf_counter() - killed
    finally:
        proc.kill()
        proc.close()


def _wakeups() -> int:
    status = Path(f"/proc/self/task/{threading.get_native_id()}/status").read_text()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


def waiting_cost(wait: Wait, wait_s: float) -> tuple[float, int]:
    """(CPU seconds, voluntary wake-ups) of the waiting thread over ``wait_s`` of no exit."""
    proc = Process.start(["sleep", "300"])
    try:
        cpu, wakes = time.thread_time(), _wakeups()
        assert not wait(proc, wait_s)
        return time.thread_time() - cpu, _wakeups() - wakes
    finally:
        proc.kill()
        proc.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--wait-s", type=float, default=2.0)
    parser.add_argument("--cost-trials", type=int, default=3)
    args = parser.parse_args()
    latencies: dict[str, list[float]] = {name: [] for name in METHODS}
    for _ in range(args.trials):
        for name, wait in METHODS.items():
            latencies[name].append(exit_latency(wait))
    costs: dict[str, list[tuple[float, int]]] = {name: [] for name in METHODS}
    for _ in range(args.cost_trials):
        for name, wait in METHODS.items():
            costs[name].append(waiting_cost(wait, args.wait_s))
    base = statistics.median(latencies["pidfd"])
    base_cpu = statistics.median(c for c, _ in costs["pidfd"])
    print(f"load average {os.getloadavg()[0]:.1f}; {args.trials} kills per method, interleaved")
    print(
        f"{'method':<14} {'median ms':>10} {'p90 ms':>8} {'× pidfd':>8}"
        f" {'wait CPU ms':>12} {'wake-ups':>9} {'CPU × pidfd':>12}"
    )
    for name in METHODS:
        values = sorted(latencies[name])
        median = statistics.median(values)
        p90 = values[int(0.9 * (len(values) - 1))]
        cpu = statistics.median(c for c, _ in costs[name])
        wakes = statistics.median(w for _, w in costs[name])
        cpu_ratio = f"{cpu / base_cpu:12.1f}" if base_cpu > 0 else f"{'(pidfd 0)':>12}"
        print(
            f"{name:<14} {median * 1e3:10.2f} {p90 * 1e3:8.2f} {median / base:8.1f}"
            f" {cpu * 1e3:12.3f} {wakes:9.0f} {cpu_ratio}"
        )
    print(f"(wait CPU and wake-ups: one thread waiting {args.wait_s:g} s on a child that runs on)")


if __name__ == "__main__":
    main()
