"""PSS scan cost on a live headless-Chromium tree, and sampler CPU share at a 100 ms interval.

Usage: .venv/bin/python benchmarks/pss_scan.py [--reps 200] [--seconds 8] [--chromium PATH]

Figures are printed as ratios against baselines measured in the same run:
  1. per-process cost of metewand's scan vs a naive sequential read of smaps_rollup
     (wall and CPU, medians over --reps alternating repetitions; target: ratio <= 0.5);
  2. sampler CPU (sampler thread + PSS readers) / the subject tree's CPU, while Chromium runs a
     JavaScript busy loop (target: < 2%).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence

from metewand.measure import procfs
from metewand.measure.accounting import TreeAccounting, open_accounting
from metewand.measure.pss import PssScanner
from metewand.measure.sampler import Sampler

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
BUSY_PAGE = "data:text/html,<script>const end=Date.now()+{ms};while(Date.now()<end){{}}</script>"


def naive_scan(pids: Sequence[int]) -> int:
    """The obvious implementation: text-mode open, read everything, split lines, one by one."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as handle:
                for line in handle.read().splitlines():
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def launch(
    chromium: str, url: str, accounting: TreeAccounting, profile: str
) -> subprocess.Popen[bytes]:
    argv = [chromium, *FLAGS, f"--user-data-dir={profile}", url]
    proc = subprocess.Popen(
        argv,
        preexec_fn=accounting.preexec_join(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    accounting.attach(proc.pid)
    return proc


def settle(accounting: TreeAccounting, minimum: int = 4, timeout: float = 20) -> list[int]:
    deadline, last, stable_since = time.monotonic() + timeout, -1, time.monotonic()
    while time.monotonic() < deadline:
        pids = accounting.pids()
        if len(pids) != last:
            last, stable_since = len(pids), time.monotonic()
        elif len(pids) >= minimum and time.monotonic() - stable_since > 1.5:
            return pids
        time.sleep(0.1)
    return accounting.pids()


def bench_scan(pids: list[int], reps: int) -> dict[str, float]:
    scanner = PssScanner()
    walls: dict[str, list[float]] = {"naive": [], "metewand": []}
    cpus: dict[str, list[float]] = {"naive": [], "metewand": []}
    scanner.scan(pids)  # warm the reader threads
    for _ in range(reps):
        start_wall, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
        naive_scan(pids)
        walls["naive"].append((time.perf_counter_ns() - start_wall) / len(pids))
        cpus["naive"].append((time.thread_time_ns() - start_cpu) / len(pids))
        start_wall, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
        scan = scanner.scan(pids)
        walls["metewand"].append((time.perf_counter_ns() - start_wall) / len(pids))
        own_cpu = time.thread_time_ns() - start_cpu
        cpus["metewand"].append((own_cpu + scan.pool_cpu_ns) / len(pids))
    scanner.close()
    med = {
        f"{k}_{kind}": statistics.median(v)
        for kind, d in (("wall", walls), ("cpu", cpus))
        for k, v in d.items()
    }
    return med


def bench_sampler_share(
    chromium: str, seconds: float, interval_ms: int, pss_every: int
) -> dict[str, float]:
    accounting = open_accounting("auto", label="bench-sampler")
    with tempfile.TemporaryDirectory() as profile:
        proc = launch(
            chromium, BUSY_PAGE.format(ms=int(seconds * 1000) + 5000), accounting, profile
        )
        time.sleep(1.0)  # let the renderer start its loop
        cpu_before = accounting.cpu().total.value or 0
        sampler = Sampler(accounting, interval_ms=interval_ms, pss_every=pss_every)
        sampler.start()
        time.sleep(seconds)
        summary = sampler.stop()
        cpu_after = accounting.cpu().total.value or 0
        accounting.kill()
        proc.wait()
        accounting.close()
    subject_cpu = cpu_after - cpu_before
    return {
        "backend": accounting.backend,  # type: ignore[dict-item]
        "subject_cpu_ms": subject_cpu / 1e6,
        "sampler_cpu_ms": summary.sampler_cpu_ns / 1e6,
        "ticks": summary.tick_count,
        "pss_scans": summary.pss_sample_count,
        "share": summary.sampler_cpu_ns / subject_cpu if subject_cpu else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--pss-every", type=int, default=5)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()

    accounting = open_accounting("auto", label="bench-scan")
    with tempfile.TemporaryDirectory() as profile:
        proc = launch(args.chromium, "about:blank", accounting, profile)
        try:
            pids = settle(accounting)
            rss = sum((procfs.read_status(p).vm_rss_bytes or 0) for p in pids)
            print(
                f"chromium tree: {len(pids)} processes, {rss / 2**20:.0f} MiB RSS, "
                f"backend {accounting.backend}, {os.cpu_count()} CPUs"
            )
            med = bench_scan(pids, args.reps)
        finally:
            accounting.kill()
            proc.wait()
            accounting.close()
    print(f"scan cost per process, median of {args.reps} alternating reps:")
    print(
        f"  wall: naive {med['naive_wall'] / 1e3:.1f} us, metewand {med['metewand_wall'] / 1e3:.1f} us"
        f"  -> ratio {med['metewand_wall'] / med['naive_wall']:.2f} (target <= 0.5)"
    )
    print(
        f"  cpu : naive {med['naive_cpu'] / 1e3:.1f} us, metewand {med['metewand_cpu'] / 1e3:.1f} us"
        f"  -> ratio {med['metewand_cpu'] / med['naive_cpu']:.2f}"
    )
    share = bench_sampler_share(args.chromium, args.seconds, args.interval_ms, args.pss_every)
    print(
        f"sampler at {args.interval_ms} ms over {args.seconds:.0f} s ({share['backend']}): "
        f"{share['ticks']} ticks, {share['pss_scans']} PSS scans, sampler CPU "
        f"{share['sampler_cpu_ms']:.1f} ms vs subject CPU {share['subject_cpu_ms']:.0f} ms"
        f"  -> share {share['share'] * 100:.2f}% (target < 2%)"
    )


if __name__ == "__main__":
    main()
