"""Report generation time against the time to merely parse results.jsonl (target: < 5x).

Writes a synthetic profiled browser run of 20,000 rows (2,000 tasks x 2 engines x k=5), then
times (a) parsing results.jsonl with the run store's reader and (b) `generate` of scores.json,
scorecard.md and report.html from the run directory (which includes its own parse). Each is the
median of --repeat runs, in one process, after one warm-up (imports and font cache excluded).

    .venv/bin/python benchmarks/report_speed.py [--tasks 2000] [--k 5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from metewand.compare import synthetic
from metewand.compare.generate import generate
from metewand.runtime.store import read_results


def timed(fn: object, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="metewand-report-speed-") as tmp:
        run = synthetic.write_browser_run(Path(tmp) / "speed_run", n_tasks=args.tasks, k=args.k)
        results = run / "results.jsonl"
        rows = len(read_results(results).rows)
        generate(run, ["md", "json", "html"])  # warm-up: matplotlib fonts, imports
        parse_s = timed(lambda: read_results(results), args.repeat)
        report_s = timed(lambda: generate(run, ["md", "json", "html"]), args.repeat)
        size = (run / "report.html").stat().st_size
    print(f"rows: {rows}  results.jsonl parse: {parse_s:.3f} s  report: {report_s:.3f} s")
    print(f"report.html: {size / 1024:.0f} KiB")
    print(f"ratio report/parse: {report_s / parse_s:.2f}x (target < 5x)")


if __name__ == "__main__":
    main()
