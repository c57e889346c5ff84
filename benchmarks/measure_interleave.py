"""Error rates of `metewand measure`'s ratio against the first command: interleaved vs sequential.

Issue 22's claim, tested by its error rates rather than one example: with several commands,
`measure` runs them interleaved (rounds in a seeded random order) and reads NEW/BASE per round,
so drift of the host between the commands cancels; `--no-interleave` runs them one after the
other (hyperfine's design) and compares medians, whose intervals cannot see that drift.

Conditions, each `--trials` independent `metewand measure --runs R -- A -- B` invocations:
- A/A: B is A (the same CPU burn, spelled differently): a "slower"/"faster" verdict on wall time
  (the interval wholly beyond 1) is a false alarm; nominal rate <= 5%.
- A/A, drift: the host "gets slower" by a known amount during each invocation: the i-th run of
  either command (warm-ups included, counted in a file under a lock) burns 1 + `--drift` x i / N
  times its CPU, N the invocation's runs. This is the drift the designs differ on, planted so
  its size is known (and independent of how loaded the host is) rather than left to neighbours.
- A/A, burner: one CPU hog per core (nice 10) starts halfway through each invocation (a real
  neighbour; on a host already loaded by others its effect is small).
- planted: B burns `--planted` more CPU than A (e.g. +20%): the share of invocations whose
  verdict is "slower" is the power.
Printed per condition and design: the false-alarm or detection rate with a 95% Wilson
interval, the median ratio and the median interval width; the host's load at start and end.

    .venv/bin/python benchmarks/measure_interleave.py [--trials 30] [--runs 20] [--burn-ms 20]
        [--planted 0.2] [--drift 0.3] [--only all|aa|drift|burner|planted]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

METEWAND = str(Path(sys.executable).with_name("metewand"))
# the burn grows by a factor of 1 + DRIFT x i / SPAN, i the runs before this one (a counter file
# under a lock), SPAN the invocation's runs: both from the environment
BURN = (
    "import fcntl, os, time\nk = 1.0\nif os.environ.get('COUNTER'):\n"
    "    with open(os.environ['COUNTER'], 'a+') as f:\n"
    "        fcntl.flock(f, fcntl.LOCK_EX); f.seek(0); i = len(f.read()); f.write('x')\n"
    "    k = 1 + float(os.environ['DRIFT']) * i / float(os.environ['SPAN'])\n"
    "t = time.process_time()\nwhile time.process_time() - t < {s} * k: pass\n"
)


def burn_command(seconds: float, tag: str) -> list[str]:
    """A CPU burn of ``seconds`` in this Python (not a shell shim); ``tag`` only tells A from B."""
    return [sys.executable, "-S", "-c", BURN.format(s=seconds) + f"# {tag}"]


@contextlib.contextmanager
def burners_after(delay_s: float | None) -> Iterator[None]:
    """One niced CPU hog per core, started ``delay_s`` from now (None: none), stopped at exit."""
    procs: list[subprocess.Popen[bytes]] = []
    stop = threading.Event()

    def start() -> None:
        if not stop.wait(delay_s or 0):
            for _ in range(os.cpu_count() or 1):
                procs.append(
                    subprocess.Popen(
                        ["nice", "-n", "10", sys.executable, "-S", "-c", "while True: pass"]
                    )
                )

    timer = threading.Thread(target=start, daemon=True)
    if delay_s is not None:
        timer.start()
    try:
        yield
    finally:
        stop.set()
        if delay_s is not None:
            timer.join()
        for proc in procs:
            proc.kill()
            proc.wait()


def one_trial(
    args: argparse.Namespace, planted: float, drift: str | None, interleave: bool, out: Path
) -> dict:
    base_s = args.burn_ms / 1000
    a = burn_command(base_s, "A")
    b = burn_command(base_s * (1 + planted), "B")
    design = "--interleave" if interleave else "--no-interleave"
    argv = [
        METEWAND,
        "measure",
        "--runs",
        str(args.runs),
        "--warmup",
        "1",
        design,
        "--shell",
        "none",
        "--seed",
        str(args.seed_base + args.trial_index),
        "--export-json",
        str(out),
        "--",
        *a,
        "--",
        *b,
    ]
    expected_s = 2 * args.runs * (base_s + 0.02)  # both commands' runs, plus a start each
    env = dict(os.environ)
    if drift == "planted":
        counter = out.with_suffix(".count")
        counter.write_text("")
        env.update(COUNTER=str(counter), DRIFT=str(args.drift), SPAN=str(2 * (args.runs + 1)))
    with burners_after(expected_s / 2 if drift == "burner" else None):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0:
        raise SystemExit(f"metewand measure failed: {done.stderr}")
    wall = json.loads(out.read_text())["ratios"][0]["metrics"]["wall_time_ns"]
    low, high = wall["ratio_ci95"]
    verdict = "slower" if low > 1 else "faster" if high < 1 else "no difference"
    return {"ratio": wall["ratio"], "width": high - low, "verdict": verdict}


def wilson(hits: int, n: int) -> tuple[float, float]:
    if not n:
        return (0.0, 1.0)
    z, p = 1.959964, hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def condition(
    args: argparse.Namespace, name: str, planted: float, drift: str | None, out: Path
) -> None:
    for interleave in (True, False):
        trials = []
        for index in range(args.trials):
            args.trial_index = index
            trials.append(one_trial(args, planted, drift, interleave, out))
        if planted:
            hits = sum(t["verdict"] == "slower" for t in trials)
            what = "detected (slower)"
        else:
            hits = sum(t["verdict"] != "no difference" for t in trials)
            what = "false alarms"
        low, high = wilson(hits, len(trials))
        design = "interleaved" if interleave else "sequential "
        print(
            f"{name:24} {design}: {what} {hits}/{len(trials)} = {hits / len(trials):5.1%} "
            f"[{low:.1%} – {high:.1%}]; median ratio "
            f"{statistics.median(t['ratio'] for t in trials):.3f}, median CI width "
            f"{statistics.median(t['width'] for t in trials):.3f}; load "
            f"{os.getloadavg()[0]:.1f}"
        )
        sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--burn-ms", type=float, default=20.0)
    parser.add_argument("--planted", type=float, default=0.20, help="B's extra CPU, e.g. 0.2")
    parser.add_argument(
        "--drift",
        type=float,
        default=0.30,
        help="planted drift: both commands' CPU grows by this over a trial",
    )
    parser.add_argument("--seed-base", type=int, default=1000)
    parser.add_argument(
        "--only", choices=("all", "aa", "drift", "burner", "planted"), default="all"
    )
    args = parser.parse_args()
    print(
        f"load average at start: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; "
        f"{args.trials} trials x {args.runs} runs of a {args.burn_ms:g} ms burn"
    )
    with tempfile.TemporaryDirectory(prefix="metewand-interleave-") as tmp:
        out = Path(tmp) / "r.json"
        if args.only in ("all", "aa"):
            condition(args, "A/A", 0.0, None, out)
        if args.only in ("all", "drift"):
            condition(args, f"A/A, drift +{args.drift:.0%}", 0.0, "planted", out)
        if args.only in ("burner",):  # on demand: on a loaded host its effect is small
            condition(args, "A/A, burner halfway", 0.0, "burner", out)
        if args.only in ("all", "planted"):
            condition(args, f"planted +{args.planted:.0%}", args.planted, None, out)
    print(f"load average at end: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


if __name__ == "__main__":
    main()
