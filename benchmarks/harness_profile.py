"""Where the harness's own CPU goes during a run's attempts: the top functions by self CPU time
(issue 24 item 1), from cProfile with a thread CPU clock in every thread.

    .venv/bin/python benchmarks/harness_profile.py --subset l1.raw_cdp --per-subset 25 \
        [--engine chrome] [--adapter-mode per-attempt] [--top 15]

``metewand browser run`` runs inside this process with a ``cProfile.Profile`` in each of its
threads (the main thread, the executor's slot thread, the slot's event-loop thread, host
telemetry, pidfd watchers: ``threading.setprofile`` starts one in every thread as it starts),
each timed by ``time.thread_time_ns``: a function's self time is CPU time its thread spent in
it, not wall time, so a thread waiting for a core on a loaded host adds nothing. Attempts are
marked by wrapping ``AttemptRunner.run``: the window runs from the second attempt's start to the
last attempt's end (the first carries the engine's launch), the profiles are read at both ends
and subtracted. Prints the process's CPU per attempt over the window (the kernel's figure,
profiler overhead included: cProfile slows call-heavy code, so shares are what to read), the
top ``--top`` functions by self CPU and the same grouped by module.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "lexbench"
OWN_FILE = Path(__file__).name  # cProfile names this file's functions by its path, however run


class ThreadProfiles:
    """One cProfile per thread, CPU-timed; read all at once."""

    def __init__(self, clock: str = "cpu") -> None:
        self.timer = time.thread_time_ns if clock == "cpu" else time.perf_counter_ns
        self.profiles: list[cProfile.Profile] = []
        self.lock = threading.Lock()

    def _new(self) -> cProfile.Profile:
        profile = cProfile.Profile(self.timer, 1e-9)
        with self.lock:
            self.profiles.append(profile)
        return profile

    def start(self) -> None:
        def starter(frame: Any, event: str, arg: Any) -> None:
            self._new().enable()  # replaces this hook in the new thread

        threading.setprofile(starter)
        self._new().enable()  # this (main) thread

    def stop(self) -> None:
        threading.setprofile(None)  # type: ignore[arg-type]

    def read(self) -> Counter[str]:
        """Self CPU (ns) per Python function over every thread so far, the built-ins it called
        (C functions: reads, writes, encoders) folded into it: a built-in's time is its
        caller's work."""
        selfs: Counter[str] = Counter()
        with self.lock:
            profiles = list(self.profiles)
        for profile in profiles:
            for entry in profile.getstats():
                if isinstance(entry.code, str):
                    continue  # counted under its callers
                label = _label(entry.code)
                selfs[label] += int(entry.inlinetime * 1e9)
                for sub in entry.calls or ():
                    if isinstance(sub.code, str):  # its own time, not what it called back
                        selfs[label] += int(sub.inlinetime * 1e9)
        return selfs

    def read_inclusive(self) -> Counter[str]:
        """Inclusive CPU (ns) of metewand's own functions (recursion counted once)."""
        totals: Counter[str] = Counter()
        with self.lock:
            profiles = list(self.profiles)
        for profile in profiles:
            for entry in profile.getstats():
                if not isinstance(entry.code, str) and "metewand/" in entry.code.co_filename:
                    totals[_label(entry.code)] += int(entry.totaltime * 1e9)
        return totals


def _label(code: Any) -> str:
    filename = code.co_filename
    for marker in ("site-packages/", "lib/python3.11/", "src/"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
            break
    return f"{code.co_qualname} ({filename})"


class AttemptWindow:
    """Wraps ``AttemptRunner.run``: profiles and process CPU at the second attempt's start and
    at the last planned attempt's end (read only there: a read costs as much as an attempt)."""

    def __init__(self, profiles: ThreadProfiles, planned: int, inclusive: bool = False) -> None:
        self.profiles = profiles
        self.planned = planned
        self.inclusive = inclusive  # read inclusive times too (as costly again: only when asked)
        self.started = 0
        self.ended = 0
        self.first: tuple[Counter[str], int] | None = None
        self.last: tuple[Counter[str], int] | None = None
        self.first_inclusive: Counter[str] = Counter()
        self.last_inclusive: Counter[str] = Counter()

    def install(self) -> None:
        from metewand.suites.browser.attempt_runner import AttemptRunner

        original: Callable[..., Any] = AttemptRunner.run
        window = self

        async def run(runner: Any, planned: Any) -> Any:
            window.started += 1
            if window.started == 2:
                window.first = (window.profiles.read(), time.process_time_ns())
                if window.inclusive:
                    window.first_inclusive = window.profiles.read_inclusive()
            row = await original(runner, planned)
            window.ended += 1
            if window.ended == window.planned:
                window.last = (window.profiles.read(), time.process_time_ns())
                if window.inclusive:
                    window.last_inclusive = window.profiles.read_inclusive()
            return row

        AttemptRunner.run = run  # type: ignore[method-assign,assignment]

    def result(self) -> tuple[Counter[str], int, int]:
        """Self CPU per function over the window, the process's CPU over it, attempts in it."""
        if self.first is None or self.last is None:
            raise SystemExit("fewer than two attempts ran: no window to profile")
        selfs = self.last[0]
        selfs.subtract(self.first[0])
        selfs = +selfs
        # This script's own reads of the profiles run inside the window (the first one ends
        # there): they are the measurement's cost, not the harness's, so they leave both figures.
        own = {label: ns for label, ns in selfs.items() if label.endswith(f"/{OWN_FILE})")}
        for label in own:
            del selfs[label]
        return selfs, self.last[1] - self.first[1] - sum(own.values()), self.planned - 1


def module_of(label: str) -> str:
    """The module part of a ``function (file)`` label: metewand's package path, else the file's
    first path part (the standard library's file, a package's name)."""
    inside = label.rsplit("(", 1)[-1].rstrip(")")
    return inside.rsplit("/", 1)[0] if inside.startswith("metewand/") else inside.split("/")[0]


def print_shares(heading: str, weights: Counter[str], ms_per_attempt: float, top: int) -> None:
    """The top ``top`` labels and the top modules by weight, each as ms per attempt and share
    (``ms_per_attempt``: what the whole weight stands for, per attempt)."""
    total = sum(weights.values())
    print(heading)
    for label, weight in weights.most_common(top):
        share = weight / total
        print(f"  {share * ms_per_attempt:7.2f} ms/att {100 * share:5.1f}%  {label}")
    modules: Counter[str] = Counter()
    for label, weight in weights.items():
        modules[module_of(label)] += weight
    print("by module:")
    for module, weight in modules.most_common(12):
        share = weight / total
        print(f"  {share * ms_per_attempt:7.2f} ms/att {100 * share:5.1f}%  {module}")


def task_ids(subset: str, count: int) -> list[str]:
    """The first ``count`` task ids of an L1/L2 subset of the corpus, by id."""
    layer, folder = subset.split(".", 1)
    found = sorted(p.stem for p in (CORPUS / "tasks" / layer.upper() / folder).glob("*.json"))
    return found[:count]


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options both profilers take: which attempts to run, and how many lines to print."""
    parser.add_argument("--subset", default="l1.raw_cdp")
    parser.add_argument("--per-subset", type=int, default=25)
    parser.add_argument("--engine", default="chrome")
    parser.add_argument("--adapter-mode", default="per-attempt")
    parser.add_argument("--top", type=int, default=15)


def report(selfs: Counter[str], process_ns: int, attempts: int, top: int) -> None:
    total = sum(selfs.values())
    print(
        f"process CPU over the window: {process_ns / 1e6 / attempts:.1f} ms per attempt "
        f"({attempts} attempts, profiler overhead included); profiled self CPU "
        f"{total / 1e6 / attempts:.1f} ms per attempt"
    )
    print_shares(f"top {top} by self CPU:", selfs, total / 1e6 / attempts, top)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="wall: where the wall time of synchronous calls goes (fsync, reads)",
    )
    parser.add_argument("--inclusive", type=int, default=0, help="also the top N inclusive")
    args = parser.parse_args()
    tasks = task_ids(args.subset, args.per_subset)
    load = os.getloadavg()
    from metewand.cli.main import cli

    profiles = ThreadProfiles(args.clock)
    window = AttemptWindow(profiles, len(tasks), inclusive=args.inclusive > 0)
    window.install()
    with tempfile.TemporaryDirectory(prefix="mw-harness-profile-") as tmp:
        argv = [
            "browser",
            "run",
            "--tasks",
            str(CORPUS),
            "--subset",
            args.subset,
            *(a for t in tasks for a in ("--task", t)),
            "--engines",
            args.engine,
            "--k",
            "1",
            "--adapter-mode",
            args.adapter_mode,
            "--out",
            tmp,
            "--run-id",
            "profiled",
            "--no-progress",
            "--quiet",
        ]
        profiles.start()
        try:
            cli(argv, prog_name="metewand", standalone_mode=False)
        except SystemExit as exc:  # the command's own exit: its status is the run's verdict
            if exc.code not in (0, 1, None):
                raise
        finally:
            profiles.stop()
    print(
        f"{args.subset} x {args.engine}, adapter mode {args.adapter_mode}; load average "
        f"{load[0]:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    report(*window.result(), args.top)
    inclusive = window.last_inclusive
    inclusive.subtract(window.first_inclusive)
    attempts = window.planned - 1
    print(f"top {args.inclusive} metewand functions by inclusive CPU:")
    for label, ns in (+inclusive).most_common(args.inclusive):
        print(f"  {ns / 1e6 / attempts:7.2f} ms/att  {label}")


if __name__ == "__main__":
    main()
