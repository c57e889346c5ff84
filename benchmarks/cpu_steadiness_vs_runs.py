"""Does ``metewand doctor``'s CPU-steadiness figure predict the noise of a real comparison?

The probe (``measure.cpu_steadiness``) times fixed work in slices and reports the log SD of one
measurement. Its sample sizes assume an interleaved A/B's pairs scatter by sqrt(2) times that.
This script checks the assumption on the sorting example: the probe, then an interleaved A/A
run of the example (``--ab-baseline`` pointing at an identical copy), then the probe again. It
prints, per group, the SD of the pairs' log(NEW/BASE) of CPU time divided by sqrt(2): each
measurement's own log SD, the figure the probe stands for. The two are printed side by side,
with their ratio.

    .venv/bin/python benchmarks/cpu_steadiness_vs_runs.py [--rounds 2] [--experiment NAME]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from metewand.measure import cpu_steadiness

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "sorting"


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def ab_run(work: Path, run_id: str, experiment: str | None) -> Path:
    tree, twin = work / "tree", work / "twin"
    for copy in (tree, twin):
        if not copy.exists():
            shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("runs"))
    args = [sys.executable, "-m", "metewand", "run", str(tree / "metewand.toml")]
    args += ["--ab-baseline", str(twin), "--run-id", run_id, "--out", str(work / "runs")]
    args += ["--cache-dir", str(work / "cache"), "--quiet", "--no-history", "--no-report"]
    if experiment:
        args += ["--experiment", experiment]
    subprocess.run(args, check=True)
    return work / "runs" / run_id


def per_measurement_log_sd(run_dir: Path) -> dict[str, float]:
    """Per group: SD of the pairs' log(NEW/BASE) of cpu_time_ns, over sqrt(2)."""
    pairs: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        cpu = row["observation"]["timing"].get("cpu_time_ns") if row.get("observation") else None
        if not cpu or not row.get("ab"):
            continue
        params = ",".join(f"{k}={v}" for k, v in sorted(row["dataset_parameters"].items()))
        group = f"{row['experiment']} {params} {row['implementation']}"
        pairs[group][row["ab"]["pair"]][row["ab"]["side"]] = cpu
    out = {}
    for group, by_pair in sorted(pairs.items()):
        ratios = [math.log(p["new"] / p["base"]) for p in by_pair.values() if len(p) == 2]
        if len(ratios) >= 3:
            out[group] = statistics.stdev(ratios) / math.sqrt(2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="probe, A/A run, probe: this often")
    parser.add_argument("--experiment", default=None, help="only this experiment of the example")
    args = parser.parse_args()
    print(f"host load {load()}; {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="metewand-steadiness-") as tmp:
        for i in range(args.rounds):
            before = cpu_steadiness.probe()
            run = ab_run(Path(tmp), f"aa{i}", args.experiment)
            after = cpu_steadiness.probe()
            groups = per_measurement_log_sd(run)
            probe_sd = (before["log_sd"] + after["log_sd"]) / 2
            real = statistics.median(groups.values())
            print(
                f"round {i}: probe log SD {before['log_sd']:.3f} before, {after['log_sd']:.3f} "
                f"after; A/A per-measurement log SD median {real:.3f} over {len(groups)} groups "
                f"(range {min(groups.values()):.3f}-{max(groups.values()):.3f}); "
                f"probe / real {probe_sd / real:.2f}; load {load()}",
                flush=True,
            )
            for group, sd in groups.items():
                print(f"    {group:60s} {sd:.3f}")


if __name__ == "__main__":
    main()
