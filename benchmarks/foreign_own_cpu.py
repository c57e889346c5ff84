"""Does a real run's own CPU ever read as foreign? Closure against an independent counter.

Issue 17 acceptance 2 asks that the benchmark's own CPU never counts as foreign (a quiet host
showing a median foreign CPU < 0.05 cores). A shared host is never quiet, so this script checks
the part that does not depend on the other tenants: it runs ``metewand browser run`` (built-in
suite, chrome; with ``--profile engine`` chrome and lightpanda, whose accounting groups are made
under the CLI's group) or ``metewand run`` (a compute manifest) inside a cgroup2 group of its own, polls that group's ``cpu.stat`` every
20 ms on the same monotonic clock the telemetry stamps its samples with, and compares, interval
by interval, the group's CPU (everything the run spent, exits and double forks included) with the
telemetry's ``bench_cpu_cores``. Their difference is the run's own CPU the telemetry missed, which
``foreign_cpu_cores`` would then have carried.

    .venv/bin/python benchmarks/foreign_own_cpu.py [--suite browser|compute] [--interval 0.5]
        [--profile off|engine]
"""

from __future__ import annotations

import argparse
import bisect
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from metewand import canonical
from metewand.measure.accounting import TreeAccounting, open_accounting

ROOT = Path(__file__).resolve().parent.parent
COMPUTE_MANIFEST = ROOT / "examples" / "sorting" / "metewand.toml"


class GroupPoller:
    """(monotonic_ns, group CPU ns) every 20 ms, from a thread."""

    def __init__(self, group: TreeAccounting) -> None:
        self.group = group
        self.points: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            value = self.group.cpu().total.value
            if value is not None:
                self.points.append((time.monotonic_ns(), value))

    def __enter__(self) -> GroupPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, t_ns: int) -> float:
        """Group CPU at ``t_ns``, interpolated between the polls around it."""
        times = [t for t, _ in self.points]
        i = bisect.bisect_left(times, t_ns)
        if i == 0 or i >= len(self.points):
            raise ValueError("time outside the polled window")
        (t0, v0), (t1, v1) = self.points[i - 1], self.points[i]
        return v0 + (v1 - v0) * (t_ns - t0) / max(1, t1 - t0)


def command(suite: str, out: Path, interval: float, profile: str) -> list[str]:
    base = [sys.executable, "-m", "metewand"]
    common = ["--out", str(out), "--run-id", "closure", "--no-progress"]
    common += ["--host-sample-interval-s", str(interval)]
    if suite == "browser":
        # engine profile: the engines' accounting groups are created under the CLI's own group
        # (this script's), whose cpu.stat still counts them
        engines = "chrome" if profile == "off" else "chrome,lightpanda"
        browser = ["browser", "run", "--engines", engines, "--k", "1"]
        return [*base, *browser, "--resource-profile", profile, *common]
    cache = ["--cache-dir", str(out / "cache")]
    return [*base, "run", str(COMPUTE_MANIFEST), *common, *cache]


def closure(samples: list[dict[str, Any]], poller: GroupPoller) -> list[tuple[float, float]]:
    """(group cores, telemetry bench cores) for every interval inside the polled window."""
    pairs = []
    for before, after in zip(samples, samples[1:], strict=False):
        figures = after.get("foreign_cpu")
        if not figures:
            continue
        t0, t1 = before["monotonic_ns"], after["monotonic_ns"]
        try:
            group_ns = poller.at(t1) - poller.at(t0)
        except ValueError:
            continue
        pairs.append((group_ns / (t1 - t0), figures["bench_cpu_cores"]))
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=("browser", "compute"), default="browser")
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--profile", choices=("off", "engine"), default="off")
    args = parser.parse_args()
    group = open_accounting("cgroup2", label=f"mw-foreign-closure-{os.getpid()}")
    try:
        with tempfile.TemporaryDirectory(prefix="mw-closure-") as tmp:
            argv = command(args.suite, Path(tmp), args.interval, args.profile)
            with GroupPoller(group) as poller:
                done = subprocess.run(
                    argv, preexec_fn=group.preexec_join(), cwd=ROOT, capture_output=True
                )  # noqa: PLW1509
            if done.returncode not in (0, 1):
                sys.exit(f"run failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
            run_dir = Path(tmp) / "closure"
            lines = (run_dir / "host_telemetry.jsonl").read_bytes().splitlines()
            samples = [canonical.loads(line) for line in lines]
            report(f"{args.suite} (profile {args.profile})", closure(samples, poller), samples)
    finally:
        group.close()


def report(suite: str, pairs: list[tuple[float, float]], samples: list[dict[str, Any]]) -> None:
    missed = [g - b for g, b in pairs]
    foreign = [s["foreign_cpu"]["foreign_cpu_cores"] for s in samples if s.get("foreign_cpu")]
    print(f"{suite} run, {len(pairs)} intervals compared")
    print(
        f"  run's own CPU (its cgroup): median {statistics.median(g for g, _ in pairs):.3f} cores"
    )
    print(
        f"  telemetry's benchmark CPU:  median {statistics.median(b for _, b in pairs):.3f} cores"
    )
    print(
        f"  own CPU missed (would read as foreign): median {statistics.median(missed):+.4f}, "
        f"max {max(missed):+.4f}, min {min(missed):+.4f} cores"
    )
    total_group = sum(g for g, _ in pairs)
    total_missed = sum(missed)
    print(f"  missed over the run: {total_missed / max(total_group, 1e-9) * 100:+.2f}% of its CPU")
    longest = run = 0
    for value in missed:  # what the gate would see from the run alone on a quiet host
        run = run + 1 if value > 0.10 else 0
        longest = max(longest, run)
    print(f"  longest run of intervals missing > 0.10 cores: {longest} (the gate trips at 3)")
    print(f"  foreign CPU this run saw (other tenants): median {statistics.median(foreign):.3f}")


if __name__ == "__main__":
    main()
