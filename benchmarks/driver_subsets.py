"""Pass rates of whole driver subsets through their adapters, outside `browser run`.

    .venv/bin/python benchmarks/driver_subsets.py --engine chrome [--tasks DIR]
        [--drivers playwright,puppeteer,...] [--mode per_attempt|long_lived] [--show-failures]

One real engine (registry flags) and the fixture server on the peer corpus; every task of each
driver path's subsets (``DriverPath.subset_dirs``) runs once (k=1) through ``run_adapter`` and is
classified from its own ``driver.checks``, in a fresh adapter process per attempt or (``--mode
long_lived``) one served adapter per driver path. Prints per driver path and subset the statuses, and the
adapter tree's median CPU and peak memory per attempt (the driver's cost apart from the engine's).
This is not a ``browser run``: no server-side grading, no resource profile, no result rows.
``metewand browser run --subset l1.<driver> ...`` runs the same tasks with all of those (see
benchmarks/README.md for the figures); this script stays as the adapter-only check.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from collections import Counter
from pathlib import Path

from driver_bench import DEFAULT_CORPUS, bench, run_task

from metewand.suites.browser.adapter_server import MODES, open_adapter
from metewand.suites.browser.adapters import AdapterRun
from metewand.suites.browser.driver_registry import DRIVER_PATHS, DriverMissing, resolve_driver

SHIPPED = [k for k, p in DRIVER_PATHS.items() if p.adapter]


def summarize(key: str, subset: str, runs: list[tuple[str, AdapterRun]], show: bool) -> None:
    statuses = Counter(run.classification().status for _, run in runs)
    passed = statuses.get("pass", 0)
    cpu = [r.cpu_ns.value for _, r in runs if r.cpu_ns and r.cpu_ns.value is not None]
    peak = [
        r.peak_memory_bytes.value
        for _, r in runs
        if r.peak_memory_bytes and r.peak_memory_bytes.value
    ]
    wall = statistics.median(r.wall_ns for _, r in runs) / 1e6 if runs else 0.0
    cost = (
        f"driver cpu {statistics.median(cpu) / 1e6:.0f} ms, peak {statistics.median(peak) / 2**20:.0f} MiB"
        if cpu and peak
        else "driver cost unavailable (no accounting group)"
    )
    print(
        f"{key:<24} {subset:<28} {passed:>3}/{len(runs):<3} {dict(statuses)}  {cost}, "
        f"median attempt {wall:.0f} ms"
    )
    if show:
        for task_id, run in runs:
            c = run.classification()
            if c.status != "pass":
                print(f"    {task_id}: {c.status} {c.reason[:160]}")


async def main_async(
    engine_name: str, corpus: Path, keys: list[str], mode: str, show: bool, work: Path
) -> None:
    async with bench(engine_name, corpus, work) as b:
        for key in keys:
            found = resolve_driver(key)
            if isinstance(found, DriverMissing):
                print(f"{key:<24} unsupported: {found.reason}: {found.detail}")
                continue
            runner = open_adapter(found.command, mode, log_path=work / key / "served.log")
            try:
                for subset in found.path.subset_dirs:
                    runs = []
                    for file in sorted((corpus / "tasks" / subset).glob("*.json")):
                        task = json.loads(file.read_text())
                        runs.append((task["task_id"], await run_task(runner, b, key, task, work)))
                    summarize(key, subset, runs, show)
            finally:
                await runner.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="chrome")
    parser.add_argument("--tasks", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--drivers", default=",".join(SHIPPED))
    parser.add_argument("--mode", choices=MODES, default="per_attempt")
    parser.add_argument("--show-failures", action="store_true")
    args = parser.parse_args()
    keys = [k for k in args.drivers.split(",") if k]
    unknown = [k for k in keys if k not in DRIVER_PATHS]
    if unknown:
        raise SystemExit(
            f"unknown driver path(s): {', '.join(unknown)}; choose from {', '.join(DRIVER_PATHS)}"
        )
    with tempfile.TemporaryDirectory(prefix="mw-driver-subsets-") as work:
        asyncio.run(
            main_async(args.engine, args.tasks, keys, args.mode, args.show_failures, Path(work))
        )


if __name__ == "__main__":
    main()
