"""Attempts per minute of the sorting example before and after a change, in one run (ABAB).

Issue #14 step 2 made a compute unit on Dask a *pairing group* (one case's implementations for
one repetition); the local executor must keep its worker units and its speed. This script runs
``metewand run examples/sorting/metewand.toml`` alternately from a BASE and a NEW source tree
(both unpacked with ``git archive``: a run from a git checkout also pays ``git rev-parse`` and
``git status`` for its provenance, which a copy does not), with the same interpreter and a shared
warm dataset cache, and prints attempts per minute per side, the ratio of the medians and the
median of the per-pair ratios (robust to load that drifts between pairs). With ``--dask-local N``
both sides run on a local Dask cluster.

    git archive 3229293 src | tar -x -C /tmp/base
    git archive HEAD src | tar -x -C /tmp/new
    .venv/bin/python benchmarks/compute_pairing.py --base-src /tmp/base/src \\
        --new-src /tmp/new/src --pairs 10
    .venv/bin/python benchmarks/compute_pairing.py --base-src /tmp/base/src \\
        --new-src /tmp/new/src --pairs 8 --dask-local 2

attempts/min = rows / whole-command wall (interpreter start, planning and the end-of-run table
included), so it is what a user waits for.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "examples" / "sorting" / "metewand.toml"


def one_run(
    src: Path, out: Path, cache: Path, run_id: str, dask_local: int | None
) -> tuple[float, float]:
    """attempts/min and the CPU seconds of the whole command's process tree (every waited-for
    descendant: workers, evaluators, builds; less noisy than wall on a loaded host)."""
    env = dict(os.environ, PYTHONPATH=str(src))
    command = [
        sys.executable,
        "-m",
        "metewand",
        "run",
        str(MANIFEST),
        "--run-id",
        run_id,
        "--out",
        str(out),
        "--cache-dir",
        str(cache),
        "--no-progress",
    ]
    if dask_local:
        command += ["--executor", "dask", "--dask-local", str(dask_local)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{run_id}: exit {done.returncode}\n{done.stderr[-2000:]}")
    lines = (out / run_id / "results.jsonl").read_text().splitlines()
    accepted = sum(json.loads(line)["status"] == "accepted" for line in lines)
    if accepted != len(lines):
        raise SystemExit(f"{run_id}: {len(lines) - accepted} attempts not accepted")
    return len(lines) / wall * 60, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-src", type=Path, required=True, help="BASE's src directory")
    parser.add_argument("--new-src", type=Path, default=ROOT / "src", help="NEW's src directory")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--dask-local", type=int, default=None)
    args = parser.parse_args()
    sides = {"BASE": args.base_src.resolve(), "NEW": args.new_src.resolve()}
    rates: dict[str, list[float]] = {name: [] for name in sides}
    cpus: dict[str, list[float]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory(prefix="mw-pairing-") as tmp:
        out, cache = Path(tmp) / "runs", Path(tmp) / "cache"
        one_run(sides["NEW"], out, cache, "warm", args.dask_local)  # datasets and build cached
        for pair in range(args.pairs):
            order = ("BASE", "NEW") if pair % 2 == 0 else ("NEW", "BASE")  # ABBA
            for name in order:
                rate, cpu = one_run(sides[name], out, cache, f"{name}-{pair}", args.dask_local)
                rates[name].append(rate)
                cpus[name].append(cpu)
                print(f"pair {pair} {name}: {rate:.0f} attempts/min, {cpu:.2f} CPU s", flush=True)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    paired = statistics.median(n / b for n, b in zip(rates["NEW"], rates["BASE"], strict=True))
    where = f"--dask-local {args.dask_local}" if args.dask_local else "local executor"
    print(
        f"{where}: BASE median {medians['BASE']:.0f}, NEW median {medians['NEW']:.0f} "
        f"attempts/min; NEW/BASE of the medians = {medians['NEW'] / medians['BASE']:.3f}, "
        f"median of the per-pair ratios = {paired:.3f}"
    )
    cpu = {name: statistics.median(values) for name, values in cpus.items()}
    cpu_paired = statistics.median(n / b for n, b in zip(cpus["NEW"], cpus["BASE"], strict=True))
    print(
        f"{where}: CPU per run BASE median {cpu['BASE']:.2f} s, NEW median {cpu['NEW']:.2f} s; "
        f"median of the per-pair NEW/BASE = {cpu_paired:.3f}"
    )


if __name__ == "__main__":
    main()
