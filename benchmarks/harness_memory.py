"""How the harness process's memory grows over a run: ours, the peer's, and an older tree of ours.

    .venv/bin/python benchmarks/harness_memory.py [--peer PATH] [--baseline-src DIR] \
        [--subset l1.raw_cdp] [--engine lightpanda] [--tasks 300] [--rounds 1]

Each tool runs the same tasks of one subset on one engine, k = 1, one job, its defaults
otherwise, one after the other (the order turns from round to round). The run is watched from
outside, the same way for every tool: each time rows land in ``results.jsonl`` (polled every
20 ms), the harness process's anonymous resident memory is read (``RssAnon`` in
``/proc/PID/status``: its heap, which a host without swap cannot page out; the file-backed rest,
its libraries' pages, is left out because this host's DAMON pages idle file pages out, which
made the peer's whole RSS fall 10 MB over a run). Printed per run:

- RSS at row 20 (start-up, the engine's launch and the first attempts are behind it) and at
  the last row;
- growth per attempt: the least-squares slope of RSS over rows 20 to the last, in KB: what a
  longer run adds per attempt (0 for a harness that keeps nothing per attempt);
- beside ours, the peer's and the baseline tree's.

The peer's harness runs from ``--peer`` (a checkout of lexmount/Lexbench-Headless-Browser,
prepared as ``harness_vs_peer.py`` does); ``--baseline-src`` is a source tree of metewand (``git
archive REV | tar -x -C DIR``) run with its sources ahead of the installed package.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import harness_vs_peer as side_by_side
import numpy as np
import peer_harness

REPO = Path(__file__).resolve().parents[1]
WARM_ROWS = 20  # rows before which start-up, the engine's launch and first-use caches settle
POLL_S = 0.02
TIMEOUT_S = 1800.0  # per run


@dataclass
class Growth:
    tool: str
    rows: int
    exit_code: int
    rss_warm_kb: float | None
    rss_end_kb: float | None
    slope_kb: float | None  # per attempt, rows WARM_ROWS.. the last


def rss_kb(pid: int) -> tuple[float] | None:
    """The process's anonymous resident memory, KB (``side_by_side.watch``'s reading)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"RssAnon:"):
                    return (float(line.split()[1]),)
    except OSError:
        return None
    return None


def watch(tool: str, argv: list[str], results: Path, env: dict[str, str], cwd: Path) -> Growth:
    """Run ``argv``; the harness's RSS as each row of ``results`` lands."""
    seen = side_by_side.watch(tool, "", argv, results, env, cwd, POLL_S, TIMEOUT_S, rss_kb)
    if seen.exit_code not in (0, 1):
        sys.stderr.write(seen.stderr_tail)
    readings = [(row, rss) for row, (_stamp, rss) in enumerate(seen.seen, start=1)]
    return Growth(tool, len(seen.rows), seen.exit_code, *_growth(readings))


def _growth(readings: list[tuple[int, float]]) -> tuple[float | None, float | None, float | None]:
    warm = [(rows, rss) for rows, rss in readings if rows >= WARM_ROWS]
    if len(warm) < 3 or warm[-1][0] - warm[0][0] < 10:
        return None, None, None
    x = np.array([rows for rows, _ in warm], dtype=float)
    y = np.array([rss for _, rss in warm], dtype=float)
    slope = float(np.polyfit(x, y, 1)[0])
    return warm[0][1], warm[-1][1], slope


def run_tool(
    tool: str, args: argparse.Namespace, tasks: list[str], work: Path, round_: int
) -> Growth:
    run_id = f"{tool}_r{round_}"
    out = work / "runs"
    env = peer_harness.environment()
    if tool == "peer":
        argv = peer_harness.command(args.subset, tasks, args.engine, out, run_id, "harness-memory")
        return watch(tool, argv, out / run_id / "results.jsonl", env, args.peer)
    cwd = REPO
    if tool == "base":  # the baseline's sources ahead of the installed (editable) package
        env = {**env, "PYTHONPATH": str(args.baseline_src / "src")}
        cwd = args.baseline_src
    argv = side_by_side.ours_argv(
        args.subset, tasks, args.engine, None, out, run_id, "harness-memory"
    )
    return watch(tool, argv, out / run_id / "results.jsonl", env, cwd)


def _fmt(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _ratio(ours: float | None, other: float | None) -> str:
    if ours is None or other is None or other <= 0:
        return "n/a"
    return f"{ours / other:.2f}"


def print_round(got: dict[str, Growth]) -> None:
    print("  tool | rows | exit | RSS at row 20 KB | RSS at end KB | growth KB/attempt")
    for tool, g in got.items():
        cells = [_fmt(g.rss_warm_kb), _fmt(g.rss_end_kb), _fmt(g.slope_kb, 1)]
        print(f"  {tool} | {g.rows} | {g.exit_code} | " + " | ".join(cells))
    ours = got["ours"]
    for other in ("peer", "base"):
        if other in got:
            theirs = got[other]
            print(
                f"  ours / {other}: RSS at end {_ratio(ours.rss_end_kb, theirs.rss_end_kb)}, "
                f"growth per attempt {_fmt(ours.slope_kb, 1)} against {_fmt(theirs.slope_kb, 1)} KB"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--peer", type=Path, help="a scratch checkout of the peer")
    parser.add_argument("--baseline-src", type=Path, help="an older source tree of metewand")
    parser.add_argument("--subset", default="l1.raw_cdp")
    parser.add_argument("--engine", default="lightpanda")
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    subset_dir = "L1/" + args.subset.split(".", 1)[1]
    if args.peer is not None:
        args.peer = args.peer.resolve()
        peer_harness.prepare(args.peer, [args.engine])
    if args.baseline_src is not None:
        args.baseline_src = args.baseline_src.resolve()
    tasks = side_by_side.select_tasks(args.peer, subset_dir, args.tasks)
    tools = ["ours", *(["peer"] if args.peer else []), *(["base"] if args.baseline_src else [])]
    print(
        f"{args.subset} x {args.engine}: {len(tasks)} tasks, k = 1; load {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory(prefix="mw-harness-memory-") as tmp:
        for round_ in range(args.rounds):
            order = tools[round_ % len(tools) :] + tools[: round_ % len(tools)]
            got = {tool: run_tool(tool, args, tasks, Path(tmp), round_) for tool in order}
            print(f"round {round_ + 1} (order {', '.join(order)}):")
            print_round({tool: got[tool] for tool in tools})


if __name__ == "__main__":
    main()
