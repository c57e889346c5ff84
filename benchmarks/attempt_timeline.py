"""Where the wall and CPU between two browser attempts go, step by step (issue 24 item 2).

    .venv/bin/python benchmarks/attempt_timeline.py --subset l1.raw_cdp --engine lightpanda \
        [--per-subset 40] [--adapter-mode per-attempt] [--no-phase-marks]

Runs ``metewand browser run`` in this process with a clock read at the edges of each step of an
attempt's way through its slot: the driver (``duration_ms`` lies inside it), the observers' end,
the artifact dir's staging and publication, the row built and appended, the next attempt's
set-up. Each point notes ``time.perf_counter_ns``, the thread's own CPU clock and the thread, so
a step on one thread gets its wall and CPU, and a step that crosses threads shows the hand-over.
The wrappers cost about a microsecond a point; read the steps' shares, and judge a change by
``harness_vs_peer.py``'s figures, not by these.

It prints, per step from one driver's end to the next driver's start: attempts seen, median and
mean wall, median CPU; then the same inside the driver (raw CDP only: connect, page, steps,
close, end, artifacts); then each thread's CPU per attempt over the attempts after the first
(``/proc/self/task``, sampled every half second).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness_profile import CORPUS, task_ids

Point = tuple[int, int, int, str]  # perf_counter_ns, thread CPU ns, thread id, label
POINTS: list[Point] = []
TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def note(label: str) -> None:
    POINTS.append((time.perf_counter_ns(), time.thread_time_ns(), threading.get_ident(), label))


def _wrap(owner: Any, name: str, label: str) -> None:
    """Note ``label>`` and ``label<`` around ``owner.name`` (sync, async or a context manager's
    body, whichever it is)."""
    original = getattr(owner, name)
    if hasattr(original, "__code__") and original.__code__.co_flags & 0x80:  # a coroutine

        @functools.wraps(original)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            note(label + ">")
            try:
                return await original(*args, **kwargs)
            finally:
                note(label + "<")

        setattr(owner, name, timed_async)
        return

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        note(label + ">")
        try:
            return original(*args, **kwargs)
        finally:
            note(label + "<")

    setattr(owner, name, timed)


def _wrap_staging(store_class: Any) -> None:
    """The artifact dir: made (``staging>``..``staging<``), then published at the block's end."""
    original = store_class.artifact_dir

    @contextlib.contextmanager
    def timed(self: Any, key: str) -> Iterator[Path]:
        note("staging>")
        with original(self, key) as staging:
            note("staging<")
            yield staging
            note("publish>")
        note("publish<")

    store_class.artifact_dir = timed


def instrument() -> None:
    from metewand.runtime import store
    from metewand.suites.browser import adapter_attempt, adapters, attempt, attempt_runner, suite
    from metewand.suites.browser.adapter_attempt import AdapterDriver
    from metewand.suites.browser.observers.base import Observers

    _wrap(suite.BrowserSlot, "attempt", "slot.attempt")
    _wrap(attempt_runner.AttemptRunner, "run", "runner.run")
    _wrap(attempt.CdpStepsDriver, "run", "driver")
    _wrap(AdapterDriver, "run", "driver")
    _wrap(Observers, "begin", "observers.begin")
    _wrap(Observers, "end", "observers.end")
    _wrap(attempt_runner, "attempt_row", "row.built")
    _wrap(store.RunStore, "append", "row.appended")
    _wrap_staging(store.RunStore)
    for name, label in (
        ("new_page_target", "page.open"),
        ("_close_page", "page.close"),
        ("_end_attempt", "attempt.end"),
        ("write_artifacts", "artifacts.written"),
    ):
        _wrap(attempt, name, label)
    for name, label in (
        ("engine_endpoint", "endpoint"),
        ("_targets_before", "targets.before"),
        ("_targets_after", "targets.after"),
        ("grade_adapter_run", "graded"),
        ("_engine_checked", "engine.checked"),
        ("write_artifacts", "artifacts.written"),
    ):
        _wrap(adapter_attempt, name, label)
    for name, label in (
        ("_open_adapter_accounting", "adapter.group"),
        ("_start", "adapter.started"),
        ("_supervise", "adapter.ran"),
        ("_sweep", "adapter.swept"),
    ):
        _wrap(adapters, name, label)


class ThreadClock:
    """Each thread's CPU (by name), read every half second from /proc/self/task."""

    def __init__(self) -> None:
        self.readings: list[tuple[int, dict[str, int]]] = []
        threading.Thread(target=self._run, name="timeline-clock", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(0.5)
            reading = {}
            for thread in threading.enumerate():
                with contextlib.suppress(OSError, IndexError):
                    with open(f"/proc/self/task/{thread.native_id}/stat") as handle:
                        fields = handle.read().rsplit(")", 1)[1].split()
                    reading[thread.name] = (int(fields[11]) + int(fields[12])) * TICK_NS
            self.readings.append((time.perf_counter_ns(), reading))


Steps = dict[str, list[tuple[float, float]]]


def _steps(points: list[Point], start: str, end: str) -> tuple[Steps, list[float]]:
    """(wall ms, CPU ms or NaN across threads) of each step from ``start`` to the next ``end``,
    keyed ``a -> b``, and each such stretch's whole wall; from the second attempt on (the
    first launches the engine)."""
    steps: Steps = defaultdict(list)
    totals = []
    starts = [i for i, p in enumerate(points) if p[3] == start]
    for i in starts[1:]:
        j = next((k for k in range(i + 1, len(points)) if points[k][3] == end), None)
        if j is None:
            continue
        totals.append((points[j][0] - points[i][0]) / 1e6)
        for a, b in zip(points[i:j], points[i + 1 : j + 1], strict=True):
            same = a[2] == b[2]
            cpu = (b[1] - a[1]) / 1e6 if same else float("nan")
            key = f"{a[3]} -> {b[3]}" + ("" if same else " (other thread)")
            steps[key].append(((b[0] - a[0]) / 1e6, cpu))
    return steps, totals


def print_steps(title: str, found: tuple[Steps, list[float]]) -> None:
    steps, totals = found
    if not totals:
        return
    print(title)
    print(f"  {'step':58s} {'n':>4s} {'wall med':>9s} {'wall mean':>9s} {'CPU med':>8s}")
    for key, values in steps.items():
        walls = [w for w, _ in values]
        cpus = [c for _, c in values if c == c]  # NaN: a hand-over between threads
        cpu = f"{statistics.median(cpus):8.3f}" if cpus else f"{'-':>8s}"
        print(
            f"  {key:58s} {len(values):4d} {statistics.median(walls):9.3f} "
            f"{statistics.mean(walls):9.3f} {cpu}"
        )
    print(
        f"  {'the whole stretch':58s} {len(totals):4d} {statistics.median(totals):9.3f} "
        f"{statistics.mean(totals):9.3f}"
    )


def print_threads(points: list[Point], clock: ThreadClock) -> None:
    starts = [p[0] for p in points if p[3] == "driver>"]
    if len(starts) < 3 or len(clock.readings) < 2:
        print("threads: too few attempts or clock readings")
        return
    first = min(clock.readings, key=lambda r: abs(r[0] - starts[1]))
    last = min(clock.readings, key=lambda r: abs(r[0] - starts[-1]))
    attempts = sum(first[0] <= s <= last[0] for s in starts)
    print(f"each thread's CPU per attempt ({attempts} attempts between two clock readings):")
    for name in sorted(set(first[1]) | set(last[1])):
        spent = last[1].get(name, 0) - first[1].get(name, 0)
        print(f"  {name:30s} {spent / 1e6 / max(attempts, 1):7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--subset", default="l1.raw_cdp")
    parser.add_argument("--per-subset", type=int, default=40)
    parser.add_argument("--engine", default="chrome")
    parser.add_argument("--adapter-mode", default="per-attempt")
    parser.add_argument("--no-phase-marks", action="store_true")
    parser.add_argument("--json", type=Path, help="write every point here")
    args = parser.parse_args()
    os.environ.setdefault("LIGHTPANDA_DISABLE_TELEMETRY", "true")
    instrument()
    clock = ThreadClock()
    from metewand.cli.entry import main as metewand

    with tempfile.TemporaryDirectory(prefix="mw-timeline-") as out:
        argv = ["metewand", "browser", "run", "--tasks", str(CORPUS), "--subset", args.subset]
        for task in task_ids(args.subset, args.per_subset):
            argv += ["--task", task]
        argv += ["--engines", args.engine, "--k", "1", "--jobs", "1", "--seed", "timeline"]
        argv += ["--adapter-mode", args.adapter_mode, "--out", out, "--run-id", "timeline"]
        argv += ["--no-progress", "--quiet"]
        argv += ["--no-phase-marks"] if args.no_phase_marks else []
        sys.argv = argv
        with contextlib.suppress(SystemExit):
            metewand()
    points = list(POINTS)
    print(f"{args.subset} x {args.engine}, {args.adapter_mode}; ms")
    between = _steps(points, "driver<", "driver>")
    print_steps("from one driver's end to the next driver's start:", between)
    print_steps("inside the driver:", _steps(points, "driver>", "driver<"))
    print_threads(points, clock)
    if args.json:
        args.json.write_text(json.dumps(points))


if __name__ == "__main__":
    main()
