"""Adapter start-up per driver path on Chrome, attempts per minute, per-attempt vs long-lived.

    .venv/bin/python benchmarks/adapter_startup.py [--tasks DIR] [--reps N] [--sample N]
        [--drivers a,b]

One real Chromium (engine registry flags) and the fixture server on the peer corpus serve every
measurement, taken in the same run:

- baseline = in-process raw CDP: metewand's own ``CdpClient`` connects to the browser websocket,
  sends ``Browser.getVersion`` and closes (the engine work every adapter's start-up contains);
- start-to-ready = the wall time of an *empty* attempt in a fresh adapter process (payload with
  no steps or checks): process start, interpreter and client-library load, the ``/json/version``
  gate, the driver's connect, the live gate, disconnect, exit (an upper bound on readiness);
- median attempt = the median wall time over ``--sample`` tasks spread over the driver's subset
  (sorted, every k-th), each run once per round in a fresh process (``per_attempt``) and once in
  one served process per round (``long_lived``; its first, start-up-carrying exchange is an empty
  attempt that is not counted); attempts/min = 60 / median;
- share = start-to-ready / per-attempt median (the issue's threshold for a long-lived adapter is
  0.5).

Medians over ``--reps`` (default 3) rounds, drivers interleaved, so host drift hits all alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driver_bench import DEFAULT_CORPUS, Bench, bench, run_task

from metewand.suites.browser.adapter_server import open_adapter
from metewand.suites.browser.cdp import CdpClient
from metewand.suites.browser.driver_registry import (
    DRIVER_PATHS,
    DriverMissing,
    FoundDriver,
    resolve_driver,
)

SHIPPED = [k for k, p in DRIVER_PATHS.items() if p.adapter]
EMPTY = {
    "task_id": "empty",
    "driver": {"kind": "none", "steps": [], "checks": []},
    "scene": {"kind": "self_hosted_fixture", "url": "/l1/core"},
}


@dataclass
class Figures:
    ready: list[float] = field(default_factory=list)
    per_attempt: list[float] = field(default_factory=list)
    long_lived: list[float] = field(default_factory=list)
    fails: dict[str, int] = field(default_factory=lambda: {"per_attempt": 0, "long_lived": 0})


def sample_tasks(corpus: Path, key: str, n: int) -> list[dict[str, Any]]:
    files = sorted((corpus / "tasks" / DRIVER_PATHS[key].subset_dirs[0]).glob("*.json"))
    step = max(1, len(files) // n)
    return [json.loads(f.read_text()) for f in files[::step][:n]]


async def baseline_ms(ws_url: str) -> float:
    started = time.perf_counter()
    async with await CdpClient.connect(ws_url, timeout=10) as client:
        await client.send("Browser.getVersion", timeout=10)
    return (time.perf_counter() - started) * 1000


async def one_round(
    found: FoundDriver, tasks: list[dict[str, Any]], b: Bench, work: Path, n: int, out: Figures
) -> None:
    key = found.path.key
    fresh = open_adapter(found.command)
    out.ready.append((await run_task(fresh, b, key, EMPTY, work, n)).wall_ns / 1e6)
    for task in tasks:
        run = await run_task(fresh, b, key, task, work, n)
        out.per_attempt.append(run.wall_ns / 1e6)
        out.fails["per_attempt"] += run.classification().status != "pass"
    served = open_adapter(found.command, "long_lived", log_path=work / key / f"served-{n}.log")
    try:
        await run_task(served, b, key, EMPTY, work, n)  # start-up, not counted
        for task in tasks:
            run = await run_task(served, b, key, task, work, n)
            out.long_lived.append(run.wall_ns / 1e6)
            out.fails["long_lived"] += run.classification().status != "pass"
    finally:
        await served.close()


async def measure(corpus: Path, keys: list[str], reps: int, sample: int, work: Path) -> None:
    async with bench("chrome", corpus, work) as b:
        drivers: dict[str, FoundDriver] = {}
        for key in keys:
            found = resolve_driver(key)
            if isinstance(found, DriverMissing):
                print(f"{key}: skipped ({found.reason}: {found.detail})")
            else:
                drivers[key] = found
        tasks = {key: sample_tasks(corpus, key, sample) for key in drivers}
        figures = {key: Figures() for key in drivers}
        base_runs: list[float] = []
        for n in range(reps):
            base_runs.append(await baseline_ms(b.endpoint.browser_ws))
            for key, found in drivers.items():
                await one_round(found, tasks[key], b, work, n, figures[key])
        report(statistics.median(base_runs), figures, drivers, sample)


def report(
    baseline: float, figures: dict[str, Figures], drivers: dict[str, FoundDriver], sample: int
) -> None:
    print(f"baseline (in-process raw CDP connect + Browser.getVersion): median {baseline:.1f} ms")
    print(
        f"{'driver':<24} {'version':<8} {'ready':>6} {'x base':>6} {'attempt':>8} {'share':>6} "
        f"{'att/min':>8} {'served':>7} {'att/min':>8} {'gain':>5} {'fails':>7}"
    )
    for key, f in figures.items():
        ready, per, served = (statistics.median(x) for x in (f.ready, f.per_attempt, f.long_lived))
        fails = f"{f.fails['per_attempt']}/{f.fails['long_lived']}"
        print(
            f"{key:<24} {drivers[key].version:<8} {ready:>6.0f} {ready / baseline:>6.0f} "
            f"{per:>8.0f} {ready / per:>6.2f} {60000 / per:>8.1f} {served:>7.0f} "
            f"{60000 / served:>8.1f} {per / served:>5.2f} {fails:>7}"
        )
    print(f"(ms; {sample} tasks per driver per round; fails = per-attempt/long-lived non-passes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sample", type=int, default=6)
    parser.add_argument("--drivers", default=",".join(SHIPPED))
    args = parser.parse_args()
    keys = [k for k in args.drivers.split(",") if k]
    unknown = [k for k in keys if k not in SHIPPED]
    if unknown:
        raise SystemExit(
            f"unknown driver path(s): {', '.join(unknown)}; choose from {', '.join(SHIPPED)}"
        )
    with tempfile.TemporaryDirectory(prefix="mw-adapter-startup-") as work:
        asyncio.run(measure(args.tasks, keys, args.reps, args.sample, Path(work)))


if __name__ == "__main__":
    main()
