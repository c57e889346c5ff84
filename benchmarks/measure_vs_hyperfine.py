"""`metewand measure` against hyperfine on the same machine, in the same script.

For each command (`true`, `python3 -c pass`, a 50 ms CPU burn) both tools run it 30 times with
no shell (`hyperfine -N`, `metewand measure --shell none`), each exporting JSON. Rounds
alternate the order (hyperfine first, then metewand first, ...) so a drift of the host load
favours neither. Printed per command, as medians over the rounds:
  (a) the median wall time each tool reports, and whether ours is within 3% or 0.5 ms of
      hyperfine's, whichever is larger;
  (b) the total wall time of each tool's invocation (start-up included), and ours / theirs
      (target <= 1.5x).
Then, for `true`, where (b) is missed, the floor: each tool's invocation with 1 run and with
--runs, so total = fixed + runs x per-run; ours / theirs per run is the ratio (b) could reach
even if metewand's fixed start-up (Python, imports, host telemetry, statistics) cost nothing.

metewand runs as installed: its children may write bytecode caches (a wheel install compiles
them; this sandbox sets PYTHONDONTWRITEBYTECODE=1, which would recompile metewand's modules at
every start and is unset for them here).

    .venv/bin/python benchmarks/measure_vs_hyperfine.py [--runs 30] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BURN = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.05: pass"
COMMANDS = {
    "true": ["true"],
    "python3 -c pass": ["python3", "-c", "pass"],
    "50 ms CPU burn": ["python3", "-c", BURN],
}
METEWAND = [sys.executable, "-m", "metewand", "measure"]
OUR_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def hyperfine(argv: list[str], runs: int, out: Path) -> tuple[float, float]:
    """(median wall s reported, total invocation s)."""
    command = " ".join(_quote(a) for a in argv)
    started = time.perf_counter()
    subprocess.run(
        [
            "hyperfine",
            "-N",
            "--runs",
            str(runs),
            "--style",
            "none",
            "--export-json",
            str(out),
            command,
        ],
        check=True,
        capture_output=True,
    )
    total = time.perf_counter() - started
    return json.loads(out.read_text())["results"][0]["median"], total


def ours(argv: list[str], runs: int, out: Path) -> tuple[float, float]:
    started = time.perf_counter()
    subprocess.run(
        [*METEWAND, "--runs", str(runs), "--shell", "none", "--export-json", str(out), "--", *argv],
        check=True,
        capture_output=True,
        env=OUR_ENV,
    )
    total = time.perf_counter() - started
    summary = json.loads(out.read_text())["summaries"][0]["metrics"]["wall_time_ns"]
    return summary["median"] / 1e9, total


def _quote(word: str) -> str:
    """hyperfine -N splits the command line shell-style; quote what needs it."""
    return "'" + word.replace("'", "'\\''") + "'" if any(c in word for c in " \n'\"") else word


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if shutil.which("hyperfine") is None:
        sys.exit("hyperfine is not installed (make install installs Debian's)")
    with tempfile.TemporaryDirectory(prefix="metewand-vs-hyperfine-") as tmp:
        out = Path(tmp)
        for label, argv in COMMANDS.items():
            theirs_median, theirs_total, our_median, our_total = [], [], [], []
            for round_index in range(args.rounds):
                order = ("hf", "mw") if round_index % 2 == 0 else ("mw", "hf")
                for tool in order:
                    if tool == "hf":
                        m, t = hyperfine(argv, args.runs, out / "hf.json")
                        theirs_median.append(m)
                        theirs_total.append(t)
                    else:
                        m, t = ours(argv, args.runs, out / "mw.json")
                        our_median.append(m)
                        our_total.append(t)
            hf_m, mw_m = statistics.median(theirs_median), statistics.median(our_median)
            hf_t, mw_t = statistics.median(theirs_total), statistics.median(our_total)
            allowed = max(0.03 * hf_m, 0.0005)
            print(
                f"{label:16} median wall: hyperfine {hf_m * 1e3:8.3f} ms, metewand "
                f"{mw_m * 1e3:8.3f} ms, diff {(mw_m - hf_m) * 1e3:+.3f} ms (allowed "
                f"±{allowed * 1e3:.3f} ms: {'ok' if abs(mw_m - hf_m) <= allowed else 'MISSED'})"
                f" | total: hyperfine {hf_t:.2f} s, metewand {mw_t:.2f} s, ratio "
                f"{mw_t / hf_t:.2f}x ({'ok' if mw_t <= 1.5 * hf_t else 'MISSED'} vs <= 1.5x)"
            )
            sys.stdout.flush()
        floor(args.runs, args.rounds, out)


def floor(runs: int, rounds: int, out: Path) -> None:
    """Fixed and per-run cost of each tool on `true`, from invocations with 1 and ``runs``."""
    totals: dict[tuple[str, int], list[float]] = {}
    for _ in range(max(rounds, 3)):
        for n in (1, runs):
            totals.setdefault(("hf", n), []).append(hyperfine(["true"], n, out / "hf.json")[1])
            totals.setdefault(("mw", n), []).append(ours(["true"], n, out / "mw.json")[1])
    per_run, fixed = {}, {}
    for tool in ("hf", "mw"):
        one, many = (statistics.median(totals[(tool, n)]) for n in (1, runs))
        per_run[tool] = (many - one) / (runs - 1)
        fixed[tool] = one - per_run[tool]
    print(
        f"true floor: per run hyperfine {per_run['hf'] * 1e3:.2f} ms, metewand "
        f"{per_run['mw'] * 1e3:.2f} ms ({per_run['mw'] / per_run['hf']:.1f}x); fixed start-up "
        f"hyperfine {fixed['hf'] * 1e3:.0f} ms, metewand {fixed['mw'] * 1e3:.0f} ms"
    )


if __name__ == "__main__":
    main()
