"""`metewand measure` against hyperfine on the same machine, in the same script.

For each command (`true`, `python3 -c pass`, a 50 ms CPU burn) both tools run it 30 times with
no shell (`hyperfine -N`, `metewand measure --shell none`), each exporting JSON. Rounds
alternate the order (hyperfine first, then metewand first, ...) so a drift of the host load
favours neither. Printed per command, as medians over the rounds:
  (a) the median wall time each tool reports, and whether ours is within 3% or 0.5 ms of
      hyperfine's, whichever is larger;
  (b) the total wall time of each tool's invocation (start-up included), and ours / theirs
      (target <= 1.5x).
Then, for `true`, the split of each invocation into a fixed start-up and a per-run cost: each
tool runs it with 1 run and with --floor-runs (200), so total = fixed + runs x per-run (with 30
runs, a few ms of noise in one invocation's total on a shared host moved the per-run figure by
~1 ms: the split's error shrinks with the number of runs). Issue 24's targets,
printed against hyperfine measured in the same rounds: per-run overhead <= hyperfine's per run
+ 1.0 ms, and fixed start-up <= 80 ms (both in wall time on a quiet host; the CPU split, which
other tenants move less, is printed beside).

Last, the interpreter's own floor, timed the same way: this Python with nothing, and with every
module `measure` loads (of this checkout).

metewand runs as installed: through a console-script launcher (what pip writes as
`bin/metewand`), and its children may write bytecode caches (a wheel install compiles them; this
sandbox sets PYTHONDONTWRITEBYTECODE=1, which would recompile metewand's modules at every start
and is unset for them here). `--baseline-src DIR` also runs the metewand whose sources are in
DIR/src (e.g. `git archive COMMIT src | tar -x -C DIR`) with the same launcher, in the same
rounds: a before/after in one run.

    .venv/bin/python benchmarks/measure_vs_hyperfine.py [--runs 30] [--floor-runs 200] [--rounds 2]
        [--baseline-src DIR] [--only all|commands|floor]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
OUR_ENV = {
    k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")
}
# pip's console-script wrapper, in effect: how an installed `metewand` starts (the entry point
# of pyproject.toml; a baseline from before cli.entry existed starts through cli.main)
LAUNCHER = (
    "import sys\ntry:\n    from metewand.cli.entry import main\nexcept ImportError:\n"
    "    from metewand.cli.main import main\nif __name__ == '__main__':\n"
    "    sys.argv[0] = 'metewand'\n    sys.exit(main())\n"
)
MEASURE_MODULES = (
    "metewand.cli.entry, metewand.cli.measure_run, metewand.measure.series, "
    "metewand.measure.spawner, metewand.cli.measure_stats, metewand.cli.measure_render, "
    "metewand.canonical"
)
FLOORS = {
    "python -c pass": "pass",
    "+ every module measure loads": f"import {MEASURE_MODULES}",
}
PER_RUN_ALLOWANCE_S = 0.0010  # issue 24: per-run overhead <= hyperfine's + 1.0 ms
FIXED_TARGET_S = 0.080  # issue 24: fixed start-up <= 80 ms


class Metewand:
    """One metewand to run: this checkout, or the sources of ``src`` (PYTHONPATH first)."""

    def __init__(self, launcher: Path, src: Path | None = None) -> None:
        self.argv = [sys.executable, str(launcher), "measure"]
        self.env = dict(OUR_ENV)
        if src is not None:
            self.env["PYTHONPATH"] = str(src)


def children_cpu() -> float:
    """CPU seconds (user + system) of every waited-for child so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def hyperfine(argv: list[str], runs: int, out: Path) -> tuple[float, float, float]:
    """(median wall s reported, total invocation s, its CPU s with everything it ran)."""
    command = " ".join(_quote(a) for a in argv)
    cpu = children_cpu()
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
    return json.loads(out.read_text())["results"][0]["median"], total, children_cpu() - cpu


def ours(tool: Metewand, argv: list[str], runs: int, out: Path) -> tuple[float, float, float]:
    cpu = children_cpu()
    started = time.perf_counter()
    subprocess.run(
        [
            *tool.argv,
            "--runs",
            str(runs),
            "--shell",
            "none",
            "--export-json",
            str(out),
            "--",
            *argv,
        ],
        check=True,
        capture_output=True,
        env=tool.env,
    )
    total = time.perf_counter() - started
    summary = json.loads(out.read_text())["summaries"][0]["metrics"]["wall_time_ns"]
    return summary["median"] / 1e9, total, children_cpu() - cpu


def _quote(word: str) -> str:
    """hyperfine -N splits the command line shell-style; quote what needs it."""
    return "'" + word.replace("'", "'\\''") + "'" if any(c in word for c in " \n'\"") else word


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--floor-runs", type=int, default=200, help="runs of the long invocation of the split"
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="also run the metewand whose sources are in DIR/src",
    )
    parser.add_argument(
        "--only",
        choices=("all", "commands", "floor"),
        default="all",
        help="commands: (a) and (b) per command; floor: the split of `true`",
    )
    args = parser.parse_args()
    if shutil.which("hyperfine") is None:
        sys.exit("hyperfine is not installed (make install installs Debian's)")
    print(f"load average at start: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    with tempfile.TemporaryDirectory(prefix="metewand-vs-hyperfine-") as tmp:
        out = Path(tmp)
        launcher = out / "metewand"
        launcher.write_text(LAUNCHER)
        tools = {"mw": Metewand(launcher)}
        if args.baseline_src is not None:
            tools["base"] = Metewand(launcher, (args.baseline_src / "src").resolve())
        if args.only in ("all", "commands"):
            for label, argv in COMMANDS.items():
                compare_one(label, argv, tools, args, out)
        if args.only in ("all", "floor"):
            floor(args.floor_runs, args.rounds, tools, out)
    print(f"load average at end: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


def compare_one(
    label: str, argv: list[str], tools: dict[str, Metewand], args: argparse.Namespace, out: Path
) -> None:
    """(a) and (b) for one command, each tool's figures the median over the rounds."""
    medians: dict[str, list[float]] = {}
    totals: dict[str, list[float]] = {}
    for round_index in range(args.rounds):
        order = ["hf", *tools]
        if round_index % 2:
            order.reverse()  # alternate who goes first: a drift of the load favours no one
        for name in order:
            if name == "hf":
                m, t, _ = hyperfine(argv, args.runs, out / "hf.json")
            else:
                m, t, _ = ours(tools[name], argv, args.runs, out / f"{name}.json")
            medians.setdefault(name, []).append(m)
            totals.setdefault(name, []).append(t)
    hf_m, hf_t = statistics.median(medians["hf"]), statistics.median(totals["hf"])
    allowed = max(0.03 * hf_m, 0.0005)
    for name in tools:
        mw_m, mw_t = statistics.median(medians[name]), statistics.median(totals[name])
        tag = "metewand" if name == "mw" else "baseline"
        print(
            f"{label:16} {tag:8} median wall: hyperfine {hf_m * 1e3:8.3f} ms, ours "
            f"{mw_m * 1e3:8.3f} ms, diff {(mw_m - hf_m) * 1e3:+.3f} ms (allowed "
            f"±{allowed * 1e3:.3f} ms: {'ok' if abs(mw_m - hf_m) <= allowed else 'MISSED'})"
            f" | total: hyperfine {hf_t:.3f} s, ours {mw_t:.3f} s, ratio "
            f"{mw_t / hf_t:.2f}x ({'ok' if mw_t <= 1.5 * hf_t else 'MISSED'} vs <= 1.5x)"
        )
    sys.stdout.flush()


def floor(runs: int, rounds: int, tools: dict[str, Metewand], out: Path) -> None:
    """Fixed and per-run cost of each tool on `true`, from invocations with 1 and ``runs``, in
    wall time and in CPU (the invocation's and its children's: less moved by other tenants),
    against issue 24's targets; then the interpreter's own start-up with measure's imports."""
    walls: dict[tuple[str, int], list[float]] = {}
    cpus: dict[tuple[str, int], list[float]] = {}
    starts: dict[str, list[tuple[float, float]]] = {}
    for round_index in range(max(rounds, 3)):
        names = ["hf", *tools]
        if round_index % 2:
            names.reverse()  # alternate who goes first, as in compare_one
        for n in (1, runs):
            for name in names:
                if name == "hf":
                    _, wall, cpu = hyperfine(["true"], n, out / "hf.json")
                else:
                    _, wall, cpu = ours(tools[name], ["true"], n, out / "f.json")
                walls.setdefault((name, n), []).append(wall)
                cpus.setdefault((name, n), []).append(cpu)
        for label, code in FLOORS.items():
            starts.setdefault(label, []).append(interpreter(code))
    wall_split = {name: _split(walls, name, runs) for name in ("hf", *tools)}
    cpu_split = {name: _split(cpus, name, runs) for name in ("hf", *tools)}
    for name in tools:
        tag = "metewand" if name == "mw" else "baseline"
        for what, split in (("wall", wall_split), ("CPU", cpu_split)):
            (hf_run, hf_fixed), (our_run, our_fixed) = split["hf"], split[name]
            verdicts = ""
            if what == "wall":
                run_ok = our_run <= hf_run + PER_RUN_ALLOWANCE_S
                fixed_ok = our_fixed <= FIXED_TARGET_S
                verdicts = (
                    f" [per-run overhead {(our_run - hf_run) * 1e3:+.2f} ms vs <= +1.00: "
                    f"{'ok' if run_ok else 'MISSED'}; fixed vs <= 80 ms: "
                    f"{'ok' if fixed_ok else 'MISSED'}]"
                )
            print(
                f"true floor ({tag}, {what}): per run hyperfine {hf_run * 1e3:.2f} ms, ours "
                f"{our_run * 1e3:.2f} ms ({our_run / hf_run:.1f}x); fixed start-up hyperfine "
                f"{hf_fixed * 1e3:.0f} ms, ours {our_fixed * 1e3:.0f} ms{verdicts}"
            )
    for label, seconds in starts.items():
        wall, cpu = (statistics.median(column) for column in zip(*seconds, strict=True))
        print(f"interpreter floor: {label:30} wall {wall * 1e3:7.1f} ms, CPU {cpu * 1e3:7.1f} ms")


def _split(totals: dict[tuple[str, int], list[float]], name: str, runs: int) -> tuple[float, float]:
    """(per run, fixed) from the medians of the 1-run and the ``runs``-run invocations."""
    one, many = (statistics.median(totals[(name, n)]) for n in (1, runs))
    per_run = (many - one) / (runs - 1)
    return per_run, one - per_run


def interpreter(code: str) -> tuple[float, float]:
    """Wall and CPU seconds of this Python running ``code`` (site enabled, as the console
    script has it)."""
    cpu = children_cpu()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=OUR_ENV)
    return time.perf_counter() - started, children_cpu() - cpu


if __name__ == "__main__":
    main()
