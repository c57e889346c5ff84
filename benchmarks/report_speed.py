"""Report generation time against the time to merely parse results.jsonl (target: < 5x).

Writes a synthetic profiled browser run of 20,000 rows (2,000 tasks x 2 engines x k=5), then
times (a) parsing results.jsonl with the run store's reader and (b) `generate` of scores.json,
scorecard.md and report.html from the run directory (which includes its own parse), in one
process, after one warm-up (imports and font cache excluded). Each repetition times a parse and
a report back to back, so both see the same host load; the figures printed are the medians over
--repeat repetitions, and the ratio is the median of the per-repetition ratios (a loaded, shared
host moves both times together, so their ratio is steadier than either time).

    .venv/bin/python benchmarks/report_speed.py [--tasks 2000] [--k 5] [--repeat 3]

``--suite compute`` writes a synthetic compute run instead: 20,000 attempt rows over 200 cases
(2 implementations x 50 repetitions per case), and the report includes every per-case
statistic (bootstrap CIs of 7 metrics per case x implementation, per-case ratios against
--reference, the scaling and phase charts):

    .venv/bin/python benchmarks/report_speed.py --suite compute [--cases 200] [--repetitions 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from metewand.compare.generate import generate
from metewand.runtime.store import read_results

# the synthetic run writer is test code (tests/synthetic_runs.py), shared with the report tests
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import synthetic_runs as synthetic  # noqa: E402


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--suite", choices=("browser", "compute"), default="browser")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--repetitions", type=int, default=50)
    args = parser.parse_args()
    formats = ["md", "json", "html"] + (["csv"] if args.suite == "compute" else [])
    reference = "python" if args.suite == "compute" else None
    with tempfile.TemporaryDirectory(prefix="metewand-report-speed-") as tmp:
        if args.suite == "compute":
            run = synthetic.write_compute_run(
                Path(tmp) / "speed_run", attempts=args.repetitions, cases=args.cases
            )
        else:
            run = synthetic.write_browser_run(Path(tmp) / "speed_run", n_tasks=args.tasks, k=args.k)
        results = run / "results.jsonl"
        rows = len(read_results(results).rows)

        def report() -> None:
            generate(run, formats, reference_implementation=reference)

        report()  # warm-up: matplotlib fonts, imports
        parses, reports = [], []
        for _ in range(max(1, args.repeat)):
            parses.append(timed(lambda: read_results(results)))
            reports.append(timed(report))
        size = (run / "report.html").stat().st_size
    parse_s, report_s = statistics.median(parses), statistics.median(reports)
    ratios = [r / p for r, p in zip(reports, parses, strict=True)]
    print(
        f"rows: {rows}  repetitions: {len(parses)}  median results.jsonl parse: {parse_s:.3f} s"
        f"  median report: {report_s:.3f} s"
    )
    print(f"report.html: {size / 1024:.0f} KiB")
    print(
        f"ratio report/parse: {statistics.median(ratios):.2f}x median of repetitions "
        f"(range {min(ratios):.2f}-{max(ratios):.2f}x; target < 5x)"
    )


if __name__ == "__main__":
    main()
