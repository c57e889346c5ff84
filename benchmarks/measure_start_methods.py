"""How `metewand measure` starts a command: the spawn server against the fork with a pre-exec join.

Both start methods run the same command (default `true`) in alternating blocks of runs in one
process, each run in its own fresh accounting groups (``run_measured`` as a series runs it).
Printed per method, as medians over all runs: the cost of one whole run to metewand (wall
around ``run_measured``: groups, start, sampling, reading, removal), and what the run's groups
were charged (CPU, peak memory) next to the command's own wall time. The fork path's child runs
Python after joining its groups, so its CPU lands on the command; the spawn server's work
between its moves lands there instead. Ratios are spawn server / fork.

    .venv/bin/python benchmarks/measure_start_methods.py [--runs 30] [--blocks 4] [-- CMD ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass

from metewand.measure.cgroups import CgroupLayout, detect_layout
from metewand.measure.proc_events import ProcEvents, open_events
from metewand.measure.pss import PssScanner
from metewand.measure.spawner import Spawner
from metewand.measure.subject import run_measured

FIELDS = ("wall_time_ns", "cpu_time_ns", "peak_memory_bytes", "process_count_peak")


@dataclass
class Tools:
    """What a series shares between its runs."""

    events: ProcEvents | None
    scanner: PssScanner
    layout: CgroupLayout


def block(
    argv: list[str], runs: int, spawner: Spawner | None, tools: Tools, out: dict[str, list[int]]
) -> None:
    for _ in range(runs):
        started = time.perf_counter_ns()
        report = run_measured(
            argv,
            discard_output=True,
            spawner=spawner,
            events=tools.events,
            scanner=tools.scanner,
            layout=tools.layout,
        )
        out.setdefault("run_cost_ns", []).append(time.perf_counter_ns() - started)
        for name in FIELDS:
            value = report.measurements[name].value
            if value is not None:
                out.setdefault(name, []).append(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("command", nargs="*", default=["true"])
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}; command: {args.command}")
    sys.setswitchinterval(0.0001)  # as a series runs
    tools = Tools(open_events(), PssScanner(), detect_layout())
    results: dict[str, dict[str, list[int]]] = {"spawn_server": {}, "fork_preexec": {}}
    with Spawner() as spawner:
        block(args.command, 3, spawner, tools, {})  # warm both paths up, unrecorded
        block(args.command, 3, None, tools, {})
        for index in range(args.blocks):
            order = ["spawn_server", "fork_preexec"]
            for method in order if index % 2 == 0 else reversed(order):
                chosen = spawner if method == "spawn_server" else None
                block(args.command, args.runs, chosen, tools, results[method])
    tools.scanner.close()
    if tools.events is not None:
        tools.events.close()
    for name, unit, scale in (
        ("run_cost_ns", "ms", 1e6),
        ("wall_time_ns", "ms", 1e6),
        ("cpu_time_ns", "ms", 1e6),
        ("peak_memory_bytes", "KiB", 1024),
        ("process_count_peak", "", 1),
    ):
        medians = {m: statistics.median(results[m][name]) for m in results if results[m].get(name)}
        shown = ", ".join(f"{m} {v / scale:.3f} {unit}" for m, v in medians.items())
        ratio = medians["spawn_server"] / medians["fork_preexec"] if len(medians) == 2 else None
        print(f"{name:18} {shown}" + (f"  (ratio {ratio:.2f})" if ratio is not None else ""))
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
