"""What starting a child inside its accounting groups costs the parent: a ``preexec_fn`` join
(a full fork of the parent) against ``measure.gate`` (a vforked shell moved into the groups),
in a parent holding ``--heap-mb`` of live Python objects that it keeps touching, as a harness
does between attempts.

    .venv/bin/python benchmarks/spawn_cost.py [--heap-mb 80] [--spawns 30]

Per method, alternating blocks: the parent's own CPU per spawn (getrusage, children excluded)
and wall per spawn, the command being ``true`` in fresh accounting groups each time; then the
ratio gate/preexec from the same run. Also prints what touching the heap alone costs.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import time

from metewand.measure import gate
from metewand.measure.accounting import CgroupAccounting, open_accounting

PAGE = 4096


def own_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1000


def touch(heap: list[bytearray]) -> None:
    for block in heap:
        block[0] ^= 1


def spawn(method: str) -> None:
    accounting = open_accounting("auto", label="spawn-cost")
    try:
        if not isinstance(accounting, CgroupAccounting):
            raise SystemExit(f"no cgroups here (backend {accounting.backend})")
        if method == "gate":
            joined = gate.start_joined(["true"], accounting, env=None, cwd=None)
            joined.wait(None)
            joined.close()
        else:
            child = subprocess.Popen(
                ["true"], preexec_fn=accounting.preexec_join(), start_new_session=True
            )
            child.wait()  # it joined its groups itself, in the forked copy of this process
    finally:
        accounting.close()


def block(method: str, heap: list[bytearray], spawns: int) -> tuple[float, float]:
    cpu, wall = own_cpu_ms(), time.perf_counter()
    for _ in range(spawns):
        spawn(method)
        touch(heap)
    return (own_cpu_ms() - cpu) / spawns, (time.perf_counter() - wall) * 1000 / spawns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heap-mb", type=int, default=80)
    parser.add_argument("--spawns", type=int, default=30)
    args = parser.parse_args()
    heap = [bytearray(PAGE) for _ in range(args.heap_mb * (1 << 20) // PAGE)]
    results: dict[str, list[tuple[float, float]]] = {"preexec": [], "gate": []}
    for order in (("preexec", "gate"), ("gate", "preexec")):
        for method in order:
            results[method].append(block(method, heap, args.spawns))
    cpu = own_cpu_ms()
    for _ in range(args.spawns):
        touch(heap)
    touching = (own_cpu_ms() - cpu) / args.spawns
    print(f"parent heap {args.heap_mb} MB, {args.spawns} spawns per block, two blocks per method")
    means = {}
    for method, blocks in results.items():
        cpu_ms = sum(b[0] for b in blocks) / len(blocks)
        wall_ms = sum(b[1] for b in blocks) / len(blocks)
        means[method] = cpu_ms
        print(f"  {method:8} parent CPU {cpu_ms:6.2f} ms, wall {wall_ms:6.2f} ms per spawn")
    print(f"  touching the heap alone: {touching:.2f} ms of CPU per round")
    print(f"ratio gate/preexec, parent CPU per spawn: {means['gate'] / means['preexec']:.2f}")


if __name__ == "__main__":
    main()
