"""The observer's floor on a browser run: what the baseline and end scans cost a Chromium attempt
when nothing else runs, against that attempt's collection window without a profiler.

Usage: .venv/bin/python benchmarks/observer_floor.py [--reps 30] [--baseline-run RUN] [--readers 1,2,4]

1. Collection windows without a profiler: the median Chrome ``collection_wall_ms`` of a run with
   ``--resource-profile baseline`` (``--baseline-run RUN``, or a fresh one-attempt run of the
   built-in suite made here).
2. The observer's critical path per attempt on an idle tree: Chromium launched as a run launches
   it, one page open, inside an accounting group; ``Sampler.start()`` (peak reset, CPU read,
   baseline scan) and ``Sampler.stop()`` (end scan), called as the profiler calls them, with its
   reader threads; medians of wall and CPU over ``--reps``.
3. Floor = (start + stop) / window: the median collection-wall overhead a profiled run cannot go
   below while it takes two full scans per attempt on this host, and the window that would keep
   it at 5%. The per-process walk costs say where a scan's time goes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pss_scan import launch, settle

from metewand.measure import procfs
from metewand.measure.accounting import TreeAccounting, open_accounting
from metewand.measure.pss import PssScanner, read_rollup
from metewand.measure.sampler import Sampler
from metewand.suites.browser import engines
from metewand.suites.browser.engines import ResolvedEngine
from metewand.suites.browser.profiler import PSS_READERS

PAGE = (
    "data:text/html,<title>floor</title><h1>Metewand</h1><ul id=list>"
    + "<li>item</li>" * 50
    + "</ul><script>window.data=Array.from({length:20000},(_, i)=>({i,s:'x'+i}))</script>"
)


def baseline_windows(run_dir: Path | None) -> tuple[list[float], str]:
    """Chrome collection windows of a baseline-profile run (made here when none is given)."""
    if run_dir is None:
        out = Path(tempfile.mkdtemp(prefix="observer-floor-"))
        command = [
            sys.executable,
            "-m",
            "metewand",
            "browser",
            "run",
            "--engines",
            "chrome",
            "--k",
            "1",
            "--resource-profile",
            "baseline",
            "--cold-start-samples",
            "0",
            "--host-telemetry",
            "off",
            "--out",
            str(out),
            "--run-id",
            "floor",
            "--quiet",
        ]
        subprocess.run(command, check=True)
        run_dir = out / "floor"
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    walls = [
        float(r["collection_wall_ms"])
        for r in rows
        if r.get("engine") == "chrome" and isinstance(r.get("collection_wall_ms"), int | float)
    ]
    if not walls:
        raise SystemExit(f"{run_dir}: no chrome rows with collection_wall_ms (a baseline run?)")
    return walls, str(run_dir)


def observer_path(
    accounting: TreeAccounting, reps: int, readers: list[int]
) -> dict[int, dict[str, list[float]]]:
    """Walls and CPU (ms) of Sampler.start() and Sampler.stop() on the idle tree, per reader
    count; the counts take turns rep by rep, so drift of the host falls on each alike."""
    scanners = {n: PssScanner(workers=n) for n in readers}
    out: dict[int, dict[str, list[float]]] = {
        n: {"start": [], "stop": [], "cpu": []} for n in readers
    }
    try:
        for rep in range(reps):
            for n in readers[rep % len(readers) :] + readers[: rep % len(readers)]:
                _one_attempt(accounting, scanners[n], out[n])
    finally:
        for scanner in scanners.values():
            scanner.close()
    return out


def _one_attempt(
    accounting: TreeAccounting, scanner: PssScanner, out: dict[str, list[float]]
) -> None:
    time.sleep(0.15)
    accounting.reset_memory_peak()
    t0 = time.perf_counter()
    accounting.cpu()
    sampler = Sampler(accounting, 500, scanner=scanner)
    sampler.start()
    t1 = time.perf_counter()
    time.sleep(0.05)
    t2 = time.perf_counter()
    summary = sampler.stop()
    t3 = time.perf_counter()
    out["start"].append((t1 - t0) * 1000)
    out["stop"].append((t3 - t2) * 1000)
    out["cpu"].append(summary.sampler_cpu_ns / 1e6)


def walk_costs(pids: list[int], reps: int = 10) -> list[tuple[float, float, int]]:
    """(median walk CPU ms, RSS MiB, pid) per member, the costliest first."""
    costs = []
    for pid in pids:
        times = []
        for _ in range(reps):
            start = time.thread_time_ns()
            read_rollup(pid)
            times.append((time.thread_time_ns() - start) / 1e6)
        try:
            rss = (procfs.read_status(pid).vm_rss_bytes or 0) / 2**20
        except procfs.ProcessGone:
            continue
        costs.append((statistics.median(times), rss, pid))
    return sorted(costs, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--baseline-run", type=Path, default=None)
    parser.add_argument("--chromium", default=None, help="default: the engines registry's chrome")
    parser.add_argument(
        "--readers",
        default=str(PSS_READERS),
        help=f"comma-separated reader-thread counts to compare (default: the profiler's {PSS_READERS})",
    )
    args = parser.parse_args()
    readers = [int(n) for n in args.readers.split(",")]
    chrome = engines.resolve("chrome", args.chromium)
    if not isinstance(chrome, ResolvedEngine):
        raise SystemExit(f"chrome not found: {chrome.detail}")
    windows, source = baseline_windows(args.baseline_run)
    accounting = open_accounting("auto", label="bench-floor")
    with tempfile.TemporaryDirectory() as profile:
        proc = launch(chrome, PAGE, accounting, profile)
        try:
            pids = settle(accounting)
            costs = walk_costs(pids)
            paths = observer_path(accounting, args.reps, readers)
        finally:
            accounting.kill()
            proc.wait()
            accounting.close()
    report(windows, source, costs, paths, args.reps)


def report(
    windows: list[float],
    source: str,
    costs: list[tuple[float, float, int]],
    paths: dict[int, dict[str, list[float]]],
    reps: int,
) -> None:
    window = statistics.median(windows)
    walk_cpu = sum(c for c, _, _ in costs)
    print(f"baseline run {source}: {len(windows)} chrome windows, median {window:.1f} ms")
    print(
        f"chromium tree: {len(costs)} processes, {sum(r for _, r, _ in costs):.0f} MiB RSS; "
        f"one full walk {walk_cpu:.1f} ms CPU (costliest: "
        + ", ".join(f"{c:.2f} ms/{r:.0f} MiB" for c, r, _ in costs[:3])
        + ")"
    )
    for readers, path in paths.items():
        start, stop = statistics.median(path["start"]), statistics.median(path["stop"])
        cpu = statistics.median(path["cpu"])
        floor = (start + stop) / window * 100
        print(
            f"{readers} readers, idle tree, {reps} reps: start {start:.2f} ms + stop "
            f"{stop:.2f} ms = {start + stop:.2f} ms wall, {cpu:.1f} ms CPU; floor {floor:.2f}% "
            f"of the median window (5% needs windows of {(start + stop) / 0.05:.0f} ms, "
            f"{(start + stop) / 0.05 / window:.2f}x)"
        )


if __name__ == "__main__":
    main()
