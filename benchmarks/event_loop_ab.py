"""The browser harness on uvloop against asyncio's own loop: same tree, runs alternating.

    .venv/bin/python benchmarks/event_loop_ab.py --per-subset 25 --rounds 4
    .venv/bin/python benchmarks/event_loop_ab.py --subset l1.raw_cdp --engines lightpanda

For each subset x engine x adapter mode, ``--rounds`` pairs of whole ``metewand browser run``s
(k=1, one job, the first ``--per-subset`` tasks of the subset), one with the default loop and
one with ``METEWAND_EVENT_LOOP=asyncio``, the order alternating pair by pair. Each run is
watched from outside as ``harness_vs_peer.py`` watches it: the harness process's own CPU
(utime + stime of every thread) from its first row to its last, per attempt, and the wall
between attempts. Prints each run, the medians per loop and the ratio uvloop / asyncio of the
medians (<= 1.00: the default loop is the lighter one), with the 1-minute load average.
``/proc``'s CPU counters tick at 10 ms, so one run's figure moves in steps of 10 ms / (rows-1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

import harness_vs_peer as hvp
import peer_harness

DEFAULT_CELLS = [
    ("l1.raw_cdp", "per-attempt"),
    ("l1.chrome_remote_interface", "per-attempt"),
    ("l1.playwright", "long-lived"),
]


def our_tasks(subset: str, n: int) -> list[str]:
    return sorted(p.stem for p in (hvp.CORPUS / "tasks" / hvp.SUBSETS[subset]).glob("*.json"))[:n]


Variant = tuple[dict[str, str], list[str]]  # (environment added, arguments added)
VARIANTS: dict[str, Variant] = {
    "uvloop": ({}, []),
    "asyncio": ({"METEWAND_EVENT_LOOP": "asyncio"}, []),
}


def one_run(
    variant: Variant, subset: str, engine: str, mode: str, tasks: list[str], work: Path, name: str
) -> dict[str, Any]:
    env = {k: v for k, v in peer_harness.environment().items() if k != "METEWAND_EVENT_LOOP"}
    env.update(variant[0])
    out = work / "runs"
    argv = [*hvp.ours_argv(subset, tasks, engine, mode, out, name, "1"), *variant[1]]
    seen = hvp.watch("ours", mode, argv, out / name / "results.jsonl", env, hvp.REPO, 0.005, 1800)
    figures = seen.figures()
    manifest = out / name / "run_manifest.json"
    said = (
        json.loads(manifest.read_text())["runner"].get("event_loop") if manifest.exists() else None
    )
    summary = out / name / "host_summary.json"
    sampler = json.loads(summary.read_text()).get("sampler_cpu_ms") if summary.exists() else None
    rows = figures.get("rows") or 0
    per_attempt = sampler / rows if isinstance(sampler, (int, float)) and rows else None
    return {**figures, "event_loop": said, "sampler_cpu_ms_per_attempt": per_attempt}


def cell(
    args: argparse.Namespace,
    subset: str,
    engine: str,
    mode: str,
    work: Path,
    variants: dict[str, Variant] = VARIANTS,
) -> dict[str, tuple[float, float]]:
    """Alternating runs of each variant; the medians per variant (harness CPU, between)."""
    names = list(variants)
    tasks = our_tasks(subset, args.per_subset)
    got: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    print(f"\n{subset} x {engine}, {mode}: {len(tasks)} tasks", flush=True)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            label = f"{subset.replace('.', '_')}_{engine}_{mode}_{name}_{r}".replace(" ", "")
            run = one_run(variants[name], subset, engine, mode, tasks, work, label)
            got[name].append(run)
            cpu, between = run.get("harness_cpu_ms"), run.get("between_ms")
            sampler = run.get("sampler_cpu_ms_per_attempt")
            print(
                f"  {name:8} round {r}: exit {run['exit']}, {run['rows']} rows, harness CPU "
                f"{hvp._ms(cpu)} ms/attempt (host telemetry {hvp._ms(sampler)}), between "
                f"{hvp._ms(between)} ms, duration {run['duration_ms']} ms, load {run['load']} "
                f"({run['event_loop']})",
                flush=True,
            )
    medians: dict[str, tuple[float, float]] = {}
    for name in names:
        cpu = [r["harness_cpu_ms"] for r in got[name] if r.get("harness_cpu_ms") is not None]
        between = [r["between_ms"] for r in got[name] if r.get("between_ms") is not None]
        if cpu and between:
            medians[name] = (statistics.median(cpu), statistics.median(between))
            print(
                f"  {name:8} medians: harness CPU {medians[name][0]:.2f} ms, "
                f"between {medians[name][1]:.2f} ms"
            )
    if len(medians) == len(names):
        (a_cpu, a_between), (b_cpu, b_between) = medians[names[0]], medians[names[1]]
        print(
            f"  {names[0]} / {names[1]}: harness CPU {a_cpu / b_cpu:.3f}, "
            f"between {a_between / b_between:.3f}"
        )
    return medians


def run_ab(
    description: str,
    variants: dict[str, Variant],
    default_cells: list[tuple[str, str]],
    rounds: int,
    engines: str,
) -> None:
    """Parse the A/B's arguments and run each cell (subset x mode) on each engine."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--per-subset", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--subset", action="append", choices=sorted(hvp.SUBSETS))
    parser.add_argument("--mode", choices=hvp.MODES, help="with --subset (default: per-attempt)")
    parser.add_argument("--engines", default=engines)
    args = parser.parse_args()
    cells = [(s, args.mode or "per-attempt") for s in args.subset] if args.subset else default_cells
    work = Path(tempfile.mkdtemp(prefix="mw-ab-"))
    print(f"work dir {work}; load average {os.getloadavg()[0]:.2f}")
    for subset, mode in cells:
        for engine in args.engines.split(","):
            cell(args, subset, engine, mode, work, variants)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


def main() -> None:
    run_ab(__doc__.split("\n\n")[0], VARIANTS, DEFAULT_CELLS, 4, "chrome,lightpanda")


if __name__ == "__main__":
    main()
