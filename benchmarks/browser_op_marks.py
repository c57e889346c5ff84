"""What one driver-op mark costs (issue 16): an adapter's line on the mark channel, the harness's
event loop waking on it and reading the engine group's and its own counters.

A real Chromium in its own accounting group; for each driver path (a Node and a Python adapter),
one served adapter answers ``--reps`` triples of attempts of the same task: a fresh page, then
``--ops`` trivial ``evaluate`` ops (``1+1``), so the marks are the largest share of the attempt
they can be. Each triple runs the task once without marks (no key: the adapter writes nothing)
and once with each reader of the counters (``op_marks``: ``harness``, the loop reads them as each
line arrives; ``adapter``, the adapter reads the engine group's files at the op itself and the
harness reads the pipe once), in an order rotated per triple, so the arms meet the same host
drift and the same adapter and engine processes. The adapter writes ``ops + 3`` lines:
``driver_connect``, one per op, ``driver_close``. It prints per path and marked arm, as paired
differences from the unmarked attempt, divided by the marks written, each with a bootstrap 95% CI:

- the harness process's CPU (``getrusage``, over the exchange and the record's build): what the
  marks cost the harness;
- the adapter's CPU (its group's): what they cost the adapter;
- the adapter's exchange wall (payload written to result read): the whole cost per mark as the
  attempt feels it;

and, for the harness reader, the loop's own time per mark (``AttemptPhases.mark``).

Then, without a browser, the channel alone (``--channel-marks``): a Python and a Node writer
process, each writing one mark every 2 ms, each line carrying its writer's ``CLOCK_MONOTONIC``
(system-wide): the writer's cost of one line (its ``write`` timed in the writer) and the latency
from that write to the harness's counters being read (engine CPU spent in that latency is charged
to the op before: it bounds how sharp the attribution is).

    .venv/bin/python benchmarks/browser_op_marks.py --reps 40 --ops 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from metewand.measure.accounting import TreeAccounting, open_accounting
from metewand.suites.browser.adapter_attempt import engine_endpoint
from metewand.suites.browser.adapter_payload import AttemptIds, build_payload
from metewand.suites.browser.adapter_server import open_adapter
from metewand.suites.browser.driver_registry import DriverMissing, load_binding, resolve_driver
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.engines import Missing, resolve
from metewand.suites.browser.op_marks import MarkSink
from metewand.suites.browser.phase_marks import AttemptPhases

REPO = Path(__file__).resolve().parents[1]
CATALOG = REPO.parent / "shared" / "corpus" / "lexbench" / "config" / "browser_driver_bindings.json"
PATHS = {"chrome_remote_interface": "thin_chrome_remote_interface", "cdp_use": "thin_cdp_use"}
RESAMPLES = 2000
ARMS = ("off", "harness", "adapter")  # who reads the counters at a mark ("off": no marks)


class TimedPhases(AttemptPhases):
    """The suite's marks, each one's own wall recorded (on the thread that took it)."""

    def __init__(self, group: TreeAccounting, spent_ns: list[int]) -> None:
        super().__init__(group, "adapter_run", concurrent=False)
        self.spent_ns = spent_ns

    def mark(self, name: str | None) -> None:
        start = time.perf_counter_ns()
        super().mark(name)
        self.spent_ns.append(time.perf_counter_ns() - start)


def task(kind: str, ops: int) -> dict[str, Any]:
    steps = [{"op": "new_page"}] + [{"op": "evaluate", "expression": "1+1"}] * ops
    return {
        "task_id": f"op_marks_{kind}",
        "driver": {"kind": kind, "steps": steps, "checks": []},
        "scene": {"url": "/"},
        "timeouts": {"task_ms": 30000},
    }


def ci(values: list[float]) -> tuple[float, float, float]:
    rng = np.random.default_rng(16)
    data = np.asarray(values)
    boots = np.median(rng.choice(data, (RESAMPLES, len(data))), axis=1)
    low, high = np.percentile(boots, [2.5, 97.5])
    return float(np.median(data)), float(low), float(high)


async def measure_path(
    key: str, process: EngineProcess, group: TreeAccounting, args: argparse.Namespace, work: Path
) -> None:
    found = resolve_driver(key)
    if isinstance(found, DriverMissing):
        print(f"{key}: skipped ({found.detail})")
        return
    endpoint = await engine_endpoint("chrome", process)
    binding = load_binding(CATALOG, "chrome", found.path.catalog_key)
    payload = build_payload(
        task(PATHS[key], args.ops),
        key,
        endpoint,
        "http://127.0.0.1:9",
        AttemptIds("bench", 1, "s", str(work)),
        binding,
    )
    runner = open_adapter(found.command, "long_lived", f"adapter-{key}", work / f"{key}.log")
    figures: dict[str, dict[str, list[int]]] = {
        arm: {"wall": [], "adapter_cpu": [], "harness_cpu": []} for arm in ARMS
    }
    spent: list[int] = []
    written = args.ops + 3  # driver_connect, new_page, the evaluates, driver_close
    try:
        await runner.run(payload, 35.0, work / "warm.txt")  # start-up out of the figures
        for rep in range(args.reps):
            for arm in ARMS[rep % 3 :] + ARMS[: rep % 3]:
                run, harness_ns = await _attempt(runner, payload, arm, group, spent, work)
                if arm != "off":
                    counts = {"received": written, "refused": 0, "read_by": arm}
                    assert run.op_marks == counts, run.op_marks
                figures[arm]["wall"].append(run.wall_ns)
                assert run.cpu_ns is not None and run.cpu_ns.value is not None, run.cpu_ns
                figures[arm]["adapter_cpu"].append(run.cpu_ns.value)
                figures[arm]["harness_cpu"].append(harness_ns)
    finally:
        await runner.close()
    _print_path(key, args.reps, written, figures, spent)


async def _attempt(
    runner: Any,
    payload: dict[str, Any],
    arm: str,
    group: TreeAccounting,
    spent: list[int],
    work: Path,
) -> tuple[Any, int]:
    """One attempt in ``arm``, and the harness process's CPU over it and its record's build."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    phases = None if arm == "off" else TimedPhases(group, spent)
    sink = None
    if phases is not None:
        phases.begin()
        sink = phases.sink() if arm == "adapter" else MarkSink(phases.mark)
    run = await runner.run(payload, 35.0, work / "stderr.txt", sink)
    assert run.outcome == "result", (run.outcome, run.detail)
    if phases is not None:
        phases.finish()
        phases.to_json()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return run, int(cpu_s * 1e9)


def _print_path(
    key: str, reps: int, written: int, figures: dict[str, dict[str, list[int]]], spent: list[int]
) -> None:
    off = figures["off"]
    print(
        f"{key}: {reps} triples, {written} marks per marked attempt; unmarked attempt's median "
        f"exchange {statistics.median(off['wall']) / 1e6:.1f} ms, harness CPU "
        f"{statistics.median(off['harness_cpu']) / 1e6:.2f} ms, adapter CPU "
        f"{statistics.median(off['adapter_cpu']) / 1e6:.1f} ms"
    )
    for arm in ARMS[1:]:
        parts = []
        for figure in ("harness_cpu", "adapter_cpu", "wall"):
            per_mark = [
                (on - no) / written / 1000
                for on, no in zip(figures[arm][figure], off[figure], strict=True)
            ]
            median, low, high = ci(per_mark)
            parts.append(f"{figure} {median:+.1f} µs [{low:+.1f}, {high:+.1f}]")
        print(f"  read by the {arm}, per mark, marked - unmarked: " + "; ".join(parts))
    if spent:
        print(
            f"  the loop's own time per mark (harness reader): median "
            f"{statistics.median(spent) / 1000:.1f} µs, p90 {np.percentile(spent, 90) / 1000:.1f} µs"
        )


PY_WRITER = """
import os, sys, time
fd, n = int(sys.argv[1]), int(sys.argv[2])
costs = []
for i in range(n):
    line = f"op{i}:t{time.monotonic_ns()}\\n".encode()
    start = time.perf_counter_ns()
    os.write(fd, line)
    costs.append(time.perf_counter_ns() - start)
    time.sleep(0.002)
costs.sort()
print(costs[len(costs) // 2])
"""
NODE_WRITER = """
const fs = require('fs');
const [fd, n] = [Number(process.argv[1]), Number(process.argv[2])];  // node -e: no script path
const costs = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
(async () => {
  for (let i = 0; i < n; i++) {
    const line = `op${i}:t${process.hrtime.bigint()}\\n`;
    const start = process.hrtime.bigint();
    fs.writeSync(fd, line);
    costs.push(Number(process.hrtime.bigint() - start));
    await sleep(2);
  }
  costs.sort((a, b) => a - b);
  console.log(costs[Math.floor(costs.length / 2)]);
})();
"""


async def channel_latency(group: TreeAccounting, marks: int) -> None:
    """Each writer's per-line cost and the write-to-read latency of the harness's marks (read
    on this loop, which waits on the writer meanwhile, as a slot's loop waits on its adapter)."""
    from metewand.suites.browser.op_marks import MarkChannel

    for label, argv in (
        ("python", [sys.executable, "-c", PY_WRITER]),
        ("node", ["node", "-e", NODE_WRITER]),
    ):
        channel = MarkChannel()
        phases = AttemptPhases(group, "adapter_run", concurrent=False)
        phases.begin()
        latencies: list[int] = []

        def mark(
            name: str | None, phases: AttemptPhases = phases, latencies: list[int] = latencies
        ) -> None:
            phases.mark(name)  # both scopes' reads, then the moment they were done
            if name is not None and ":t" in name:
                latencies.append(time.monotonic_ns() - int(name.rsplit(":t", 1)[1]))

        listener = channel.listen(mark)
        child = await asyncio.create_subprocess_exec(
            *argv,
            str(channel.child_fd),
            str(marks),
            pass_fds=(channel.child_fd,),
            stdout=asyncio.subprocess.PIPE,
        )
        stdout, _ = await child.communicate()
        if child.returncode != 0:
            sys.exit(f"{label} writer: exit status {child.returncode}")
        counts = listener.finish()
        phases.finish()
        phases.close()
        channel.close()
        write_us = int(stdout.strip()) / 1000
        lat = np.asarray(latencies) / 1000
        print(
            f"channel, {label} writer: {counts['received']} marks; the writer's write() median "
            f"{write_us:.1f} µs; write to counters read: median {np.median(lat):.1f} µs, "
            f"p90 {np.percentile(lat, 90):.1f} µs, max {lat.max():.1f} µs"
        )


async def main_async(args: argparse.Namespace) -> None:
    found = resolve("chrome")
    if isinstance(found, Missing):
        sys.exit(f"chrome: {found.detail}")
    group = open_accounting(label=f"op-marks-bench-{os.getpid()}")
    with tempfile.TemporaryDirectory(prefix="browser_op_marks_") as tmp:
        process = EngineProcess(found, Path(tmp) / "logs", preexec_fn=group.preexec_join())
        await process.start()
        assert process.pid is not None
        group.attach(process.pid)
        try:
            for key in () if args.channel_only else PATHS:
                await measure_path(key, process, group, args, Path(tmp))
            await channel_latency(group, args.channel_marks)
        finally:
            await process.stop()
            group.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=40, help="triples of attempts per path")
    parser.add_argument("--ops", type=int, default=20, help="trivial evaluate ops per attempt")
    parser.add_argument("--channel-marks", type=int, default=500, help="marks per channel writer")
    parser.add_argument("--channel-only", action="store_true", help="the channel alone, no paths")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    asyncio.run(main_async(args))
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
