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

import event_loop_ab as ab

VARIANTS: dict[str, ab.Variant] = {
    "2 s": ({}, ["--host-sample-interval-s", "2"]),
    "1 s": ({}, ["--host-sample-interval-s", "1"]),
}
DEFAULT_CELLS = [("l1.raw_cdp", "per-attempt"), ("l1.playwright", "per-attempt")]


def main() -> None:
    ab.run_ab(__doc__.split("\n\n")[0], VARIANTS, DEFAULT_CELLS, 3, "chrome")


if __name__ == "__main__":
    main()
