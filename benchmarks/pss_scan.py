"""PSS scan cost on a live headless-Chromium tree, and sampler CPU share at a 100 ms interval.

Usage: .venv/bin/python benchmarks/pss_scan.py [--reps 100] [--gap-ms 100] [--seconds 8]

Chromium runs a page that keeps one core busy in JavaScript and allocates and drops arrays, so the
tree's memory keeps moving. Figures are ratios against baselines measured in the same run:
  1. per-process cost of a scan: a naive sequential read of smaps_rollup, metewand's full scan
     (every member walked) and metewand's reuse scan, labelled "default" below (members whose
     stat signals did not move keep their last PSS; the sampler uses it only with pss_reuse=True), alternating, --gap-ms apart as a sampler would see them; medians of
     wall and CPU (pool threads included). Target: ratio <= 0.5.
  2. the default scan's error: |default total - full total| taken back to back at each rep, next
     to |naive total - full total| (what the tree itself moves in the same few milliseconds), and
     how far the default total falls outside the bracket of the full scan before it and the
     naive read after it.
  3. sampler CPU (sampler thread + caller side + reader pool) / the subject tree's CPU at a
     100 ms interval: default settings, then with pss_reuse=True, then the former fixed full
     scans every 5 ticks, one after the other on the same tree. Target: < 2%.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from metewand.measure import procfs
from metewand.measure.accounting import TreeAccounting, open_accounting
from metewand.measure.pss import PssScanner
from metewand.measure.sampler import Sampler
from metewand.suites.browser import engines
from metewand.suites.browser.engines import ResolvedEngine

ACTIVE_PAGE = (
    "data:text/html,<script>let keep=[],n=0;function work(){{const end=Date.now()+80;"
    "while(Date.now()<end){{}}n++;if(n%5==0)keep.push(new Array(200000).fill(n));"
    "if(keep.length>30)keep=[];if(Date.now()<{until})setTimeout(work,0)}}work()</script>"
)


def active_page(seconds: float) -> str:
    return ACTIVE_PAGE.format(until=int(time.time() * 1000 + seconds * 1000))


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
    chrome: ResolvedEngine, url: str, accounting: TreeAccounting, profile: str
) -> subprocess.Popen[bytes]:
    """Chrome as a run launches it (the engines registry's flags), opening ``url`` first."""
    argv = chrome.argv(0, Path(profile), start_url=url)
    tmp = Path(profile) / "engine-tmp"  # Chromium's singleton dir lands here, not in /tmp
    tmp.mkdir(exist_ok=True)
    proc = subprocess.Popen(
        argv,
        env=chrome.environment(tmp_dir=tmp),
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


def _timed(scan: Callable[[], Any], scanner: PssScanner | None) -> tuple[Any, int, int]:
    """(result, wall ns, CPU ns of this thread plus the scanner's reader threads)."""
    pool = scanner.pool_threads_cpu_ns() if scanner else 0
    start_wall, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
    result = scan()
    wall, cpu = time.perf_counter_ns() - start_wall, time.thread_time_ns() - start_cpu
    if scanner:
        cpu += scanner.pool_threads_cpu_ns() - pool
    return result, wall, cpu


def bench_scan(lister: Callable[[], list[int]], reps: int, gap_ms: int) -> dict[str, Any]:
    full = PssScanner()
    default = PssScanner(reuse_unchanged=True)
    modes = ("naive", "full", "default")
    walls: dict[str, list[float]] = {m: [] for m in modes}
    cpus: dict[str, list[float]] = {m: [] for m in modes}
    errors: list[int] = []
    drifts: list[int] = []
    outside: list[int] = []  # how far the default total lies outside [full, naive] of its rep
    walked = reused = 0
    full.scan(lister())  # warm the reader threads
    default.scan(lister())
    for _ in range(reps):
        time.sleep(gap_ms / 1000)
        pids = lister()
        # full, default, naive: the default scan sits between two complete reads of the tree.
        full_scan, wall, cpu = _timed(partial(full.scan, pids), full)
        walls["full"].append(wall / len(pids))
        cpus["full"].append(cpu / len(pids))
        default_scan, wall, cpu = _timed(partial(default.scan, pids), default)
        walls["default"].append(wall / len(pids))
        cpus["default"].append(cpu / len(pids))
        naive_total, wall, cpu = _timed(partial(naive_scan, pids), None)
        walls["naive"].append(wall / len(pids))
        cpus["naive"].append(cpu / len(pids))
        walked, reused = walked + default_scan.walked_count, reused + default_scan.reused_count
        if full_scan.total_bytes is not None and default_scan.total_bytes is not None:
            before, now = full_scan.total_bytes, default_scan.total_bytes
            errors.append(abs(now - before))
            drifts.append(abs(naive_total - before))
            low, high = min(before, naive_total), max(before, naive_total)
            outside.append(max(low - now, now - high, 0))
    full.close()
    default.close()
    out: dict[str, Any] = {f"{m}_wall": statistics.median(walls[m]) for m in modes}
    out.update({f"{m}_cpu": statistics.median(cpus[m]) for m in modes})
    out.update(errors=errors, drifts=drifts, outside=outside, walked=walked, reused=reused)
    out["total"] = full_scan.total_bytes
    return out


def run_sampler(accounting: TreeAccounting, seconds: float, **kwargs: Any) -> dict[str, Any]:
    cpu_before = accounting.cpu().total.value or 0
    sampler = Sampler(accounting, **kwargs)
    sampler.start()
    time.sleep(seconds)
    summary = sampler.stop()
    subject_cpu = (accounting.cpu().total.value or 0) - cpu_before
    return {
        "subject_cpu_ms": subject_cpu / 1e6,
        "sampler_cpu_ms": summary.sampler_cpu_ns / 1e6,
        "ticks": summary.tick_count,
        "pss_scans": summary.pss_sample_count,
        "triggers": summary.pss_triggers,
        "walked": summary.pss_walked_processes,
        "reused": summary.pss_reused_processes,
        "peak_mib": (summary.pss_peak.value or 0) / 2**20,
        "share": summary.sampler_cpu_ns / subject_cpu if subject_cpu else float("nan"),
    }


def bench_sampler_share(chrome: ResolvedEngine, seconds: float, interval_ms: int) -> dict[str, Any]:
    accounting = open_accounting("auto", label="bench-sampler")
    with tempfile.TemporaryDirectory() as profile:
        proc = launch(chrome, active_page(2 * seconds + 20), accounting, profile)
        try:
            settle(accounting)
            default = run_sampler(accounting, seconds, interval_ms=interval_ms)
            reuse = run_sampler(accounting, seconds, interval_ms=interval_ms, pss_reuse=True)
            fixed = run_sampler(
                accounting,
                seconds,
                interval_ms=interval_ms,
                pss_every=5,
                pss_policy="fixed",
                pss_reuse=False,
            )
        finally:
            accounting.kill()
            proc.wait()
            accounting.close()
    return {"backend": accounting.backend, "default": default, "reuse": reuse, "fixed": fixed}


def _mib(values: Sequence[int], pick: Callable[[Sequence[int]], float]) -> str:
    return f"{pick(values) / 2**20:.2f} MiB" if values else "n/a"


def report_scan(med: dict[str, Any], reps: int, gap_ms: int) -> None:
    print(f"scan cost per process, median of {reps} alternating reps {gap_ms} ms apart:")
    for kind in ("wall", "cpu"):
        naive = med[f"naive_{kind}"]
        print(
            f"  {kind:4}: naive {naive / 1e3:7.1f} us | full {med[f'full_{kind}'] / 1e3:7.1f} us"
            f" (ratio {med[f'full_{kind}'] / naive:.2f}) | default "
            f"{med[f'default_{kind}'] / 1e3:7.1f} us (ratio {med[f'default_{kind}'] / naive:.2f})"
        )
    total = med["walked"] + med["reused"]
    print(f"  default mode walked {med['walked']} of {total} member reads, reused {med['reused']}")
    errors, drifts = med["errors"], med["drifts"]
    print(
        f"  default vs full total (PSS {(med['total'] or 0) / 2**20:.0f} MiB): abs error median "
        f"{_mib(errors, statistics.median)}, max {_mib(errors, max)}; naive vs full (tree drift "
        f"in the same ms): median {_mib(drifts, statistics.median)}, max {_mib(drifts, max)}"
    )
    outside = med["outside"]
    print(
        f"  default total outside the [full, naive] bracket of its rep: median "
        f"{_mib(outside, statistics.median)}, max {_mib(outside, max)}, in "
        f"{sum(1 for e in outside if e)} of {len(outside)} reps"
    )


def report_share(share: dict[str, Any], interval_ms: int, seconds: float) -> None:
    labels = {
        "default": "default settings (changes, no reuse)",
        "reuse": "changes + pss_reuse=True",
        "fixed": "former: fixed, full scan every 5 ticks",
    }
    for name, label in labels.items():
        r = share[name]
        print(
            f"sampler at {interval_ms} ms, {label}, {seconds:.0f} s ({share['backend']}): "
            f"{r['ticks']} ticks, {r['pss_scans']} PSS scans {r['triggers']}, "
            f"{r['walked']} walks / {r['reused']} reused, PSS peak {r['peak_mib']:.0f} MiB; "
            f"sampler CPU {r['sampler_cpu_ms']:.1f} ms vs subject CPU {r['subject_cpu_ms']:.0f} ms"
            f"  -> share {r['share'] * 100:.2f}%" + (" (target < 2%)" if name == "default" else "")
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--gap-ms", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--chromium", default=None, help="default: the engines registry's chrome")
    args = parser.parse_args()
    chrome = engines.resolve("chrome", args.chromium)
    if not isinstance(chrome, ResolvedEngine):
        raise SystemExit(f"chrome not found: {chrome.detail}")

    accounting = open_accounting("auto", label="bench-scan")
    with tempfile.TemporaryDirectory() as profile:
        budget = args.reps * (args.gap_ms / 1000 + 0.2) + 30
        proc = launch(chrome, active_page(budget), accounting, profile)
        try:
            pids = settle(accounting)
            rss = sum((procfs.read_status(p).vm_rss_bytes or 0) for p in pids)
            print(
                f"chromium tree: {len(pids)} processes, {rss / 2**20:.0f} MiB RSS, backend "
                f"{accounting.backend}, {len(os.sched_getaffinity(0))} CPUs in the affinity mask"
            )
            med = bench_scan(accounting.pids, args.reps, args.gap_ms)
        finally:
            accounting.kill()
            proc.wait()
            accounting.close()
    report_scan(med, args.reps, args.gap_ms)
    share = bench_sampler_share(chrome, args.seconds, args.interval_ms)
    report_share(share, args.interval_ms, args.seconds)


if __name__ == "__main__":
    main()
