"""Where the harness's own CPU goes during a run's attempts, by sampling (issue 24 item 1).

    .venv/bin/python benchmarks/harness_sample.py --subset l1.raw_cdp --per-subset 25 \
        [--engine chrome] [--adapter-mode per-attempt] [--top 15] [--rate 250]

``harness_profile.py`` (cProfile) times every call, which inflates call-heavy code: canonical
JSON's value check is 15% of a raw-CDP attempt under cProfile and ~2% timed directly. A sampling
profiler does not: py-spy (the dev extra) reads the stacks of the running ``metewand browser run``
from outside, ``--nonblocking`` (the run is never paused) and ``--gil`` (only the thread holding
the GIL: Python code running, not a thread waiting on a socket or a lock).

Sampling starts once the second row has landed (start-up, corpus load and the first engine launch
left out) and stops when the last planned row lands (the report and teardown left out). Over that
window the script polls the process's CPU (utime + stime of all its threads, /proc/PID/stat) and
prints: attempts in the window, CPU per attempt, the top ``--top`` functions by self samples (the
innermost Python frame holding the GIL) as a share and as ms per attempt (share x CPU per
attempt: approximate, since CPU spent outside the GIL, in system calls, is not sampled), and the
same by module. Per-attempt adapters are processes of their own and are not in these figures.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from harness_profile import CORPUS, add_run_arguments, print_shares, task_ids

METEWAND = Path(sys.executable).parent / "metewand"
TICKS = os.sysconf("SC_CLK_TCK")
_LINE_NO = re.compile(r":\d+\)$")


def process_cpu_s(pid: int) -> float:
    """utime + stime of every thread of ``pid`` (seconds)."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rows_landed(results: Path) -> int:
    try:
        with open(results, "rb") as handle:
            return handle.read().count(b"\n")
    except FileNotFoundError:
        return 0


def leaf_counts(raw: Path) -> Counter[str]:
    """Samples per innermost frame, ``function (file)``, from py-spy's raw (collapsed) output."""
    leaves: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            leaves[_LINE_NO.sub(")", stack.rsplit(";", 1)[-1])] += int(count)
    return leaves


def sample_run(args: argparse.Namespace, out: Path) -> tuple[Counter[str], float, int]:
    """(self samples per function, CPU seconds, attempts) over the sampled window."""
    tasks = task_ids(args.subset, args.per_subset)
    if len(tasks) < 3:  # sampling starts at the second row and needs one more after it
        raise SystemExit(f"{args.subset}: fewer than 3 tasks under {CORPUS}")
    results = out / "sample" / "results.jsonl"
    run = subprocess.Popen(
        [METEWAND, "browser", "run", "--tasks", str(CORPUS), "--subset", args.subset]
        + [a for t in tasks for a in ("--task", t)]
        + ["--engines", args.engine, "--k", "1", "--adapter-mode", args.adapter_mode]
        + ["--out", str(out), "--run-id", "sample", "--quiet", "--no-history"],
    )
    while rows_landed(results) < 2:
        if run.poll() is not None:
            raise SystemExit(f"the run ended (exit {run.returncode}) before its second row")
        time.sleep(0.02)
    raw = out / "pyspy.txt"
    spy = subprocess.Popen(
        [args.py_spy, "record", "--pid", str(run.pid), "--gil"]
        + ([] if args.blocking else ["--nonblocking"])
        + ["--format", "raw", "--rate", str(args.rate), "--output", str(raw)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    first_rows, first_cpu = rows_landed(results), process_cpu_s(run.pid)
    last_cpu = first_cpu
    while rows_landed(results) < len(tasks) and run.poll() is None:
        last_cpu = process_cpu_s(run.pid)
        time.sleep(0.01)
    spy.send_signal(signal.SIGINT)  # py-spy writes what it has and exits
    spy.wait(60)
    if run.wait(600) != 0:
        raise SystemExit(f"the run exited {run.returncode}")
    attempts = rows_landed(results) - first_rows
    return leaf_counts(raw), last_cpu - first_cpu, attempts


def report(leaves: Counter[str], cpu_s: float, attempts: int, top: int) -> None:
    per_attempt_ms = cpu_s * 1000 / attempts
    print(
        f"{attempts} attempts sampled; harness process CPU {per_attempt_ms:.1f} ms per attempt; "
        f"{sum(leaves.values())} samples holding the GIL"
    )
    print_shares(f"top {top} by self samples:", leaves, per_attempt_ms, top)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_arguments(parser)
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument(
        "--blocking",
        action="store_true",
        help="pause the run for each sample (exact stacks; the run slows down)",
    )
    parser.add_argument("--py-spy", default=shutil.which("py-spy", path=str(METEWAND.parent)))
    args = parser.parse_args()
    if not args.py_spy:
        raise SystemExit("py-spy not found beside this interpreter: pip install py-spy")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="mw-harness-sample-") as tmp:
        leaves, cpu_s, attempts = sample_run(args, Path(tmp))
    print(
        f"{args.subset} x {args.engine}, adapter mode {args.adapter_mode}; load average "
        f"{load:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    if attempts < 1 or not leaves:
        raise SystemExit("nothing was sampled")
    report(leaves, cpu_s, attempts, args.top)


if __name__ == "__main__":
    main()
