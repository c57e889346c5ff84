"""Per-attempt orchestration overhead of the compute runtime, against a bare process start.

For a no-op Python worker (the SDK) and a no-op C worker (protocol by hand), run N attempts
through ``run_fixed_dataset_outcome`` and compute

    overhead = total attempt wall - (worker startup + evaluator startup + prepare + execute
                                     + evaluation)

i.e. what the orchestrator adds around the workers' own phases (accounting groups, pipes, log
capture, validation, hashing, shutdown, tree kill). The same worker's bare process start is
measured in the same run with hyperfine (``--shell=none``; the worker exits at once without its
protocol descriptors) or, without hyperfine, by timing subprocess starts here.

    .venv/bin/python benchmarks/compute_overhead.py [--attempts 20]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from metewand.suites.compute.api import FixedDatasetResult, run_fixed_dataset_outcome

ROOT = Path(__file__).resolve().parent.parent
WORKERS = ROOT / "tests" / "workers"
PHASES = (
    "worker_startup_time_ns",
    "evaluator_startup_time_ns",
    "prepare_time_ns",
    "execute_request_time_ns",
    "evaluation_time_ns",
)


def bare_start_ms(argv: list[str], runs: int) -> tuple[float, str]:
    if shutil.which("hyperfine"):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            cmd = ["hyperfine", "-N", "-i", "-w", "3", "-r", str(runs), "--export-json", out.name]
            subprocess.run([*cmd, " ".join(argv)], check=True, capture_output=True)
            data = json.loads(Path(out.name).read_text())
        return statistics.median(data["results"][0]["times"]) * 1000, "hyperfine"
    times = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        subprocess.run(argv, capture_output=True, check=False)
        times.append((time.perf_counter_ns() - start) / 1e6)
    return statistics.median(times), "subprocess"


def overhead_ms(impl: list[str], attempts: int, tmp: Path) -> dict[str, float]:
    evaluator = [sys.executable, str(WORKERS / "fault_worker.py"), "eval"]
    totals, overheads = [], []
    for _ in range(attempts):
        start = time.monotonic_ns()
        outcome = run_fixed_dataset_outcome(str(tmp), impl, evaluator, private_root=str(tmp))
        total = time.monotonic_ns() - start
        if not isinstance(outcome, FixedDatasetResult):
            raise SystemExit(f"attempt failed: {outcome.code}: {outcome.message}")
        own = sum(int(outcome.measurements.measurement(p).value or 0) for p in PHASES)
        totals.append(total / 1e6)
        overheads.append((total - own) / 1e6)
    return {"total_ms": statistics.median(totals), "overhead_ms": statistics.median(overheads)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=20)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mw-overhead-"))
    try:
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise SystemExit("needs a C compiler")
        c_bin = tmp / "c_noop"
        subprocess.run([cc, "-O2", "-o", str(c_bin), str(WORKERS / "c_noop.c")], check=True)
        workers = {
            "python-sdk": [sys.executable, str(WORKERS / "fault_worker.py"), "impl"],
            "c": [str(c_bin)],
        }
        print(
            f"{'worker':12s} {'attempt':>10s} {'overhead':>10s} {'bare start':>11s} {'ratio':>7s}"
        )
        for name, argv in workers.items():
            data = tmp / f"data-{name}"
            data.mkdir()
            result = overhead_ms(argv, args.attempts, data)
            bare, how = bare_start_ms(argv, max(10, args.attempts))
            ratio = result["overhead_ms"] / bare
            print(
                f"{name:12s} {result['total_ms']:8.2f}ms {result['overhead_ms']:8.2f}ms "
                f"{bare:9.2f}ms {ratio:6.2f}x  (bare start via {how}, median of runs)"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
