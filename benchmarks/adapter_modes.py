"""Pass rates and attempts per minute of driver subsets in ``metewand browser run``, per adapter
mode, the per-attempt mode being the baseline measured in the same invocation.

    .venv/bin/python benchmarks/adapter_modes.py --subset l1.agent_browser_scenarios \\
        --subset l1.stagehand --engine chrome [--tasks DIR] [--limit N]

For each subset, one ``browser run`` (k=1, --jobs 1) per mode, the two modes back to back so they
meet the same host load. attempts/min is the rows over the span from the first attempt's start
to the last one's end (engine launch before the first attempt not counted); the driver's CPU is
the median of the rows' ``driver_resources.cpu_total_ms``. Prints one line per subset × mode and
the long-lived / per-attempt throughput ratio; ``not_passed`` names each other row and its reason.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus" / "lexbench"
MODES = ("per-attempt", "long-lived")


def _run(corpus: Path, subset: str, engine: str, mode: str, out: Path, tasks: list[str]) -> Path:
    run_id = f"{subset}-{engine}-{mode}"
    args = [a for t in tasks for a in ("--task", t)]
    command = [
        sys.executable,
        "-m",
        "metewand",
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--subset",
        subset,
        "--engines",
        engine,
        "--k",
        "1",
        "--jobs",
        "1",
        "--adapter-mode",
        mode,
        "--out",
        str(out),
        "--run-id",
        run_id,
        "--no-progress",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    if done.returncode not in (0, 1):  # 1: some infra/crash row, still a result to count
        sys.exit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return out / run_id


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    span_s = (
        max(_when(r["finished_at"]) for r in rows) - min(_when(r["started_at"]) for r in rows)
    ).total_seconds()
    cpu = [
        r["driver_resources"]["cpu_total_ms"]
        for r in rows
        if (r.get("driver_resources") or {}).get("cpu_total_ms") is not None
    ]
    return {
        "rows": len(rows),
        "passed": sum(r["status"] == "pass" for r in rows),
        "statuses": dict(Counter(r["status"] for r in rows)),
        "attempts_per_min": round(len(rows) / span_s * 60, 1) if span_s > 0 else None,
        "driver_cpu_ms_median": round(statistics.median(cpu), 1) if cpu else None,
        "modes": sorted({str(r.get("adapter_mode")) for r in rows}),
        "not_passed": sorted(
            f"{r['task_id']}: {r['status']}: {str(r.get('reason'))[:160]}"
            for r in rows
            if r["status"] != "pass"
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--subset", action="append", required=True)
    parser.add_argument("--engine", default="chrome")
    parser.add_argument("--task", action="append", default=[], help="only these task ids")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mw-adapter-modes-") as tmp:
        for subset in args.subset:
            found = {}
            for mode in MODES:
                run_dir = _run(args.tasks, subset, args.engine, mode, Path(tmp), args.task)
                found[mode] = summary = summarize(_rows(run_dir))
                print(f"{subset} {args.engine} {mode}: {json.dumps(summary)}", flush=True)
            base, served = (found[m]["attempts_per_min"] for m in MODES)
            if base and served:
                print(
                    f"{subset} {args.engine}: long-lived / per-attempt attempts/min = "
                    f"{served / base:.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
