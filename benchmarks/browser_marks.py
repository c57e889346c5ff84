"""What the browser suite's phase marks cost per attempt (issue 16), and an A/B of marks on/off.

One real run of the built-in suite (``--resource-profile baseline``: every engine in its
accounting group, each attempt's collection wall recorded, no sampler), ``--k`` attempts per task
x engine. Within the run, marks are on in half of each task x engine's attempts and off in the
other half, alternating (on when attempt + task index is even), so both arms meet the same host
drift, the same engine processes and the same order; this is the interleaved design that
benchmarks/interleaved_calibration.py showed cancels a drifting host, where two separate runs
measured the drift instead (+20% against -1%). It reports:

- reads per marked attempt, counted (every engine-group and harness snapshot is counted and
  timed inside the attempts), the median cost of one read, and reads x read cost per attempt
  (the snapshots are decoded when the row is built, after the attempt);
- the A/B: per task x engine, attempt 2i against 2i+1 (one on, one off): the median over pairs of
  ``on/off - 1`` for ``duration_ms`` (integer ms: a 1 ms step is ~0.3-0.5% of an attempt, so a
  single pair is coarse; the median over many is not) and for ``collection_wall_ms`` (µs), with
  bootstrap 95% CIs, and the median of each arm. Target: both medians within 0.5%.

    .venv/bin/python benchmarks/browser_marks.py --k 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from metewand.suites.browser import attempt_runner, phase_marks
from metewand.suites.browser.run_config import ResourceOptions, RunConfig, builtin_suite_dir
from metewand.suites.browser.runner import run_browser
from metewand.suites.browser.tasks import load_corpus

RESAMPLES = 2000
TARGET_PCT = 0.5


class ReadLog:
    """Wraps both readers the marks use: counts and times every read, by scope."""

    def __init__(self) -> None:
        self.walls_ns: dict[str, list[int]] = {"engine": [], "harness": []}

    def timed(self, scope: str, read: Callable[[], Any]) -> Callable[[], Any]:
        def timed_read() -> Any:
            start = time.perf_counter_ns()
            value = read()
            self.walls_ns[scope].append(time.perf_counter_ns() - start)
            return value

        return timed_read

    def install(self) -> None:
        """Time every snapshot the marks take (decoding happens when the row is built, after
        the attempt, and is not a mark's cost)."""
        log, probe_of, harness = self, phase_marks.probe_of, phase_marks.HarnessProbe

        class Timed:
            def __init__(self, probe: Any, scope: str) -> None:
                self.probe, self.peak_method = probe, probe.peak_method
                self.snap = log.timed(scope, probe.snap)
                self.decode, self.close = probe.decode, probe.close

        phase_marks.probe_of = lambda group: Timed(probe_of(group), "engine")  # type: ignore[assignment]
        phase_marks.HarnessProbe = lambda: Timed(harness(), "harness")  # type: ignore[assignment, misc]


def alternate_marks(task_order: dict[str, int]) -> None:
    """Marks on in half of every task x engine's attempts (the run's config has them on)."""
    original = attempt_runner.AttemptRunner._phases

    def phases(self: Any, planned: Any, process: Any) -> Any:
        if (planned.attempt + task_order[planned.task.task_id]) % 2:
            return None
        return original(self, planned, process)

    attempt_runner.AttemptRunner._phases = phases  # type: ignore[method-assign]


def pct_ci(values: list[float]) -> tuple[float, float, float]:
    rng = np.random.default_rng(16)
    data = np.asarray(values)
    boots = np.median(rng.choice(data, (RESAMPLES, len(data))), axis=1)
    return (
        float(np.median(data)),
        float(np.percentile(boots, 2.5)),
        float(np.percentile(boots, 97.5)),
    )


def verdict(low: float, high: float) -> str:
    """What the CI says about the target (a median alone inside it says nothing)."""
    if low >= -TARGET_PCT and high <= TARGET_PCT:
        return f"within the {TARGET_PCT}% target"
    if low > TARGET_PCT:
        return f"beyond the {TARGET_PCT}% target"
    return f"the CI is wider than the ±{TARGET_PCT}% target: this run cannot tell"


def pairs(rows: list[dict[str, Any]], field: str) -> list[float]:
    """``on/off - 1`` in % for attempts 2i-1 and 2i (from 1) of each task x engine, both passing."""
    by_key = {(r["task_id"], r["engine"], r["attempt"]): r for r in rows}
    out = []
    for (task, engine, attempt), row in by_key.items():
        other = by_key.get((task, engine, attempt + 1))
        if attempt % 2 == 0 or other is None or {row["status"], other["status"]} != {"pass"}:
            continue
        on, off = (row, other) if "phases" in row else (other, row)
        if "phases" not in on or "phases" in off:
            continue
        a, b = on.get(field), off.get(field)
        if isinstance(a, int | float) and isinstance(b, int | float) and b > 0:
            out.append((a / b - 1) * 100)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="chrome,lightpanda")
    parser.add_argument("--k", type=int, default=4, help="attempts per task x engine (even)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, help="keep the run under this dir")
    args = parser.parse_args()
    if args.k % 2:
        sys.exit("--k must be even: every on attempt has its off neighbour")
    log = ReadLog()
    log.install()
    suite = builtin_suite_dir()
    # marks asked for explicitly: a baseline run's default is none (half are switched off below)
    config = RunConfig(
        str(suite),
        tuple(args.engines.split(",")),
        k=args.k,
        seed="marks",
        jobs=args.jobs,
        phase_marks=True,
        resource=ResourceOptions(profile="baseline", cold_start_samples=0),
    )
    with tempfile.TemporaryDirectory(prefix="browser_marks_") as tmp:
        order = {t.task_id: i for i, t in enumerate(load_corpus(suite).tasks)}
        alternate_marks(order)
        started = time.monotonic()
        out = args.keep or Path(tmp)
        result = run_browser(config, out, f"marks-{int(time.time())}", echo=lambda _t: None)
        wall_s = time.monotonic() - started
        assert result.run_dir is not None, result
        rows = [json.loads(x) for x in (result.run_dir / "results.jsonl").read_text().splitlines()]
    report(args, log, rows, wall_s)


def report(
    args: argparse.Namespace, log: ReadLog, rows: list[dict[str, Any]], wall_s: float
) -> None:
    marked = [r for r in rows if "phases" in r]
    print(
        f"browser_marks: engines {args.engines}, k {args.k}, jobs {args.jobs}, "
        f"{len(rows)} attempts ({len(marked)} marked) in {wall_s:.0f} s"
    )
    per_attempt_ns = 0.0
    for scope, walls in log.walls_ns.items():
        reads = len(walls) / max(1, len(marked))
        median = statistics.median(walls) if walls else 0
        per_attempt_ns += sum(walls) / max(1, len(marked))
        print(
            f"  {scope} reads: {reads:.1f} per marked attempt, median {median / 1e3:.1f} µs "
            f"(p95 {np.percentile(walls, 95) / 1e3:.1f} µs)"
        )
    durations = [r["duration_ms"] for r in marked if r["status"] == "pass"]
    share = per_attempt_ns / 1e6 / statistics.median(durations) * 100 if durations else None
    print(
        f"  marks' cost per attempt (sum of its reads): {per_attempt_ns / 1e6:.3f} ms"
        + (f", {share:.2f}% of the median marked attempt's duration" if share else "")
    )
    for field in ("duration_ms", "collection_wall_ms"):
        values = pairs(rows, field)
        if not values:
            print(f"  {field}: no complete on/off pairs")
            continue
        median, low, high = pct_ci(values)
        print(
            f"  {field} on vs off: median Δ {median:+.3f}% [95% CI {low:+.3f}, {high:+.3f}] "
            f"over {len(values)} pairs ({verdict(low, high)})"
        )
        for arm, keep in (("on", True), ("off", False)):
            arm_values = [
                r[field]
                for r in rows
                if ("phases" in r) is keep
                and r["status"] == "pass"
                and isinstance(r.get(field), int | float)
            ]
            print(
                f"    {arm}: median {statistics.median(arm_values):.3f} ms "
                f"({len(arm_values)} attempts)"
            )


if __name__ == "__main__":
    main()
