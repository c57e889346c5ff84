"""A browser run's host telemetry every 2 s (the default) against every 1 s: same tree, runs
alternating (as ``event_loop_ab.py``, whose runner this uses).

    .venv/bin/python benchmarks/host_interval_ab.py --per-subset 25 --rounds 3

Each sample scans the ``stat`` of every process on the host (foreign CPU), so the interval sets
what host telemetry costs the harness per attempt. Prints per run the harness process's own CPU
per attempt (from outside, first row to last), the telemetry thread's own CPU per attempt (the
run's ``host_summary.json`` ``sampler_cpu_ms`` over its rows: the whole run, start-up included),
the wall between attempts, and the ratio 2 s / 1 s of the medians.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import event_loop_ab as ab
import harness_vs_peer as hvp

VARIANTS: dict[str, ab.Variant] = {
    "2 s": ({}, ["--host-sample-interval-s", "2"]),
    "1 s": ({}, ["--host-sample-interval-s", "1"]),
}
DEFAULT_CELLS = [("l1.raw_cdp", "per-attempt"), ("l1.playwright", "per-attempt")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-subset", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--subset", action="append", choices=sorted(hvp.SUBSETS))
    parser.add_argument("--mode", choices=hvp.MODES, help="with --subset (default: per-attempt)")
    parser.add_argument("--engines", default="chrome")
    args = parser.parse_args()
    cells = [(s, args.mode or "per-attempt") for s in args.subset] if args.subset else DEFAULT_CELLS
    work = Path(tempfile.mkdtemp(prefix="mw-host-interval-ab-"))
    print(f"work dir {work}; load average {os.getloadavg()[0]:.2f}")
    for subset, mode in cells:
        for engine in args.engines.split(","):
            ab.cell(args, subset, engine, mode, work, VARIANTS)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
