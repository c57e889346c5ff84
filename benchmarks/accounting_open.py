"""What opening (and closing) one tree's accounting groups costs the harness: with the cgroup
layout probed at every open (the behaviour before ``detect_layout_cached``: a mkdir and rmdir in
every hierarchy) against the layout kept while this process's mounts and groups read the same.

    .venv/bin/python benchmarks/accounting_open.py [--opens 200]

A compute attempt opens two (worker and evaluator), a per-attempt browser adapter one. Alternating
blocks of each way in one run; prints the harness's own CPU and wall per open and the ratio
cached/probed.
"""

from __future__ import annotations

import argparse
import time

from metewand.measure.accounting import open_accounting
from metewand.measure.cgroups import detect_layout


def one_open(probe_each_time: bool) -> None:
    layout = detect_layout() if probe_each_time else None  # None: the cached layout
    open_accounting("auto", label="open-cost", layout=layout).close()


def block(probe_each_time: bool, opens: int) -> tuple[float, float]:
    cpu, wall = time.process_time_ns(), time.perf_counter_ns()
    for _ in range(opens):
        one_open(probe_each_time)
    return (time.process_time_ns() - cpu) / opens / 1e6, (
        time.perf_counter_ns() - wall
    ) / opens / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opens", type=int, default=200)
    args = parser.parse_args()
    backend = open_accounting("auto", label="open-cost")
    backend.close()
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for order in ((True, False), (False, True), (True, False), (False, True)):
        for probe in order:
            results[probe].append(block(probe, args.opens // 4))
    print(f"backend {backend.backend}, {args.opens // 4} opens per block, four blocks per way")
    means = {}
    for probe, blocks in results.items():
        cpu = sum(b[0] for b in blocks) / len(blocks)
        wall = sum(b[1] for b in blocks) / len(blocks)
        means[probe] = (cpu, wall)
        name = "probed" if probe else "cached"
        print(f"  {name}: harness CPU {cpu:.3f} ms, wall {wall:.3f} ms per open + close")
    (pcpu, pwall), (ccpu, cwall) = means[True], means[False]
    print(f"ratio cached/probed: CPU {ccpu / pcpu:.2f}, wall {cwall / pwall:.2f}")


if __name__ == "__main__":
    main()
