"""Issue 17, acceptance 3: does interleaved calibration cancel a host that drifts mid-run?

Three real browser runs of the built-in suite on Chrome (and any other --engines), k attempts:

1. interleaved (``--resource-profile engine --resource-calibration interleaved``), with a CPU
   burner switched on once half of the run's rows are written: the drift lands on both twins of
   every later pair alike, so Chrome's median duration Δ should stay near the observer's true cost.
2. + 3. the separate-runs A/B: a profiler-off run on the quiet host, then the profiled run with
   the burner on throughout (the drift falls on B only), calibrated against the first.

It prints Chrome's median duration Δ and collection-wall Δ from each mode, and the separate A/B's
error relative to the interleaved figure. The burner is ``--burners`` busy-loop processes (not
niced: they compete with the engine as another tenant would); they are killed by pid at the end.

    .venv/bin/python benchmarks/interleaved_calibration.py --k 5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from metewand.compare.generate import write_after_run
from metewand.suites.browser.run_config import ResourceOptions, RunConfig, builtin_suite_dir
from metewand.suites.browser.run_plan import build_plan
from metewand.suites.browser.runner import run_browser

BURN = "while True: pass"


class Burner:
    """Busy-loop processes, started on demand, stopped by their own pids."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.procs: list[subprocess.Popen[bytes]] = []
        self.started_at: float | None = None

    def start(self) -> None:
        if not self.procs:
            self.procs = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(self.count)]
            self.started_at = time.monotonic()

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self.procs = []


def _start_at_half(results: Path, planned: int, burner: Burner, done: threading.Event) -> None:
    """Switch the burner on once half the planned rows are in results.jsonl."""
    while not done.wait(0.2):
        lines = results.read_text().count("\n") if results.exists() else 0
        if lines >= planned // 2:
            burner.start()
            return


def _config(
    args: argparse.Namespace, profile: str, calibration: str, baseline: str | None
) -> RunConfig:
    resource = ResourceOptions(
        profile=profile,
        calibration=calibration,
        calibration_baseline=baseline,
        cold_start_samples=1,
        host_sample_interval_s=1.0,
    )
    return RunConfig(
        str(builtin_suite_dir()),
        tuple(args.engines.split(",")),
        k=args.k,
        seed="ilvbench",
        task_ids=tuple(args.tasks or ()),
        resource=resource,
    )


def _observer(run_dir: Path, engine: str) -> dict[str, Any]:
    write_after_run(run_dir)
    summary = json.loads((run_dir / "resource_summary.json").read_text())
    effect = summary["observer_effect"]
    figures = effect["by_engine"][engine]
    return {
        "mode": effect["calibration_mode"],
        "pairs": figures["matched_attempts"],
        "duration_pct": figures["median_duration_delta_pct"],
        "wall_pct": figures["median_collection_wall_delta_pct"],
        # interleaved only: pairs left out (a fresh process's first attempt, split processes)
        "left_out": {k: effect.get(f"pairs_{k}") for k in ("first_on_launch", "not_same_process")},
    }


def _run(config: RunConfig, out: Path, run_id: str) -> Path:
    result = run_browser(config, out, run_id, echo=lambda _t: None)
    if result.exit_code != 0 or result.run_dir is None:
        raise SystemExit(f"{run_id}: browser run exited {result.exit_code}")
    return result.run_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--engines", default="chrome")
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--tasks", nargs="*", help="task ids (default: the whole built-in suite)")
    args = parser.parse_args()
    engine = "chrome"
    burner = Burner(args.burners)
    with tempfile.TemporaryDirectory(prefix="mw-ilv-bench-") as tmp:
        out = Path(tmp)
        try:
            config = _config(args, "engine", "interleaved", None)
            planned = len(build_plan(config).attempts)
            done = threading.Event()
            watcher = threading.Thread(
                target=_start_at_half, args=(out / "ilv" / "results.jsonl", planned, burner, done)
            )
            watcher.start()
            try:
                interleaved = _observer(_run(config, out, "ilv"), engine)
            finally:
                done.set()
                watcher.join()
                switched_on = burner.started_at is not None
                burner.stop()
            base_dir = _run(_config(args, "baseline", "separate", None), out, "a")
            burner.start()
            try:
                profiled = _run(_config(args, "engine", "separate", str(base_dir)), out, "b")
            finally:
                burner.stop()
            separate = _observer(profiled, engine)
        finally:
            burner.stop()
    print(f"burner: {args.burners} busy-loop process(es); k={args.k}; engines {args.engines}")
    print(f"interleaved: burner switched on at half the rows: {switched_on}")
    print("| mode | Chrome pairs | median duration Δ % | median collection-wall Δ % |")
    print("|---|---|---|---|")
    for name, f in (
        ("interleaved, burner from halfway", interleaved),
        ("separate A/B, burner during B", separate),
    ):
        print(f"| {name} | {f['pairs']} | {f['duration_pct']:+.2f} | {f['wall_pct']:+.2f} |")
    print(f"interleaved pairs left out of the figures (all engines): {interleaved['left_out']}")
    gap = separate["duration_pct"] - interleaved["duration_pct"]
    print(f"separate A/B's duration Δ minus interleaved: {gap:+.2f} points")


if __name__ == "__main__":
    main()
