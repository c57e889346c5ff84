"""What a thread pays to touch the kernel again after resting: the CPU of the first system call
after an idle pause, against the second one right after it (issue 24: why a harness's costs in
a run are many times their cost in a loop on this host).

For each pause it sleeps, then times ``os.stat`` twice on the thread's CPU clock, and prints
the medians. On a bare-metal host the two are close at every pause. On the 2-core sandbox of
2026-12-07 (a nested guest) the first call after a pause cost far more, and more the longer the
pause: stat's median went from ~2 µs warm to ~330 µs after 200 ms and ~670 µs after 1 s. A
harness's work between two browser attempts (after ~200 ms of the engine's turn) meets its code
and the kernel's in that state, so read in-run costs beside this figure.

    .venv/bin/python benchmarks/host_wake_cost.py [--repeats 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

PAUSES_S = (0.0005, 0.002, 0.01, 0.05, 0.2, 1.0)


def stat_cpu_us(path: str) -> float:
    started = time.thread_time_ns()
    os.stat(path)
    return (time.thread_time_ns() - started) / 1e3


def measure(pause_s: float, repeats: int, path: str) -> tuple[float, float]:
    first, second = [], []
    for _ in range(repeats):
        time.sleep(pause_s)
        first.append(stat_cpu_us(path))
        second.append(stat_cpu_us(path))
    return statistics.median(first), statistics.median(second)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20, help="per pause (1 s pauses: a third)")
    args = parser.parse_args()
    print("pause      first stat after it   second stat   (thread CPU, median)")
    for pause in PAUSES_S:
        repeats = max(3, args.repeats // 3) if pause >= 1.0 else args.repeats
        first, second = measure(pause, repeats, "/tmp")
        print(f"{pause * 1000:7.1f} ms {first:12.1f} us {second:14.1f} us")


if __name__ == "__main__":
    main()
