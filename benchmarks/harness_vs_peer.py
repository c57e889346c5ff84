"""The harness's own cost per attempt, metewand against the peer's harness, side by side (issue 24).

    git clone /work/peer/lexbench /tmp/scratch/peer-lexbench      # outside any repository
    .venv/bin/python benchmarks/harness_vs_peer.py --peer /tmp/scratch/peer-lexbench --per-subset 25
    .venv/bin/python benchmarks/harness_vs_peer.py --peer /tmp/scratch/peer-lexbench --quick

For each subset (raw CDP and the nine installable driver paths' L1 subsets) x engine, the first
``--per-subset`` tasks both corpora hold run once (k=1, one job) under the peer's ``runner.run``
and under ``metewand browser run`` in both adapter modes (raw CDP: one metewand run), each a
whole run of its own with its defaults (host telemetry on, resource profile off; metewand's phase
marks, traffic accounting and rich rows on), the order of the runs rotating from one subset x
engine to the next. Each run is watched from outside, the same way for both tools: the harness
process's own CPU (utime + stime of every thread, /proc/PID/stat), the CPU of the processes it
reaped (cutime + cstime: per-attempt adapters and probes; engines live to the end of the run) and
the moment each row lands in results.jsonl (polled every ``--poll-ms``). From the first row to
the last:

- harness own CPU per attempt = its CPU over that span / (rows - 1);
- wall between attempts = (span - the later rows' duration_ms) / (rows - 1): what each tool
  spends around an attempt (grading, rows, artifacts, engine checks, start of the next one);
  what falls inside an attempt's duration differs (the peer's holds the writing of its CDP log
  and grader file, ours ends before them), so the whole wall per attempt, span / (rows - 1), is
  printed beside it: the figure in which neither tool's choice of duration can hide anything;
- driver CPU per attempt: per-attempt adapters' CPU reaped over the span / (rows - 1) (the same
  kernel counter for both tools); metewand's long-lived adapters are never reaped mid-run, so
  that mode's figure is the median of the rows' ``driver_resources.cpu_total_ms`` (its accounting
  group; per-attempt rows give both, printed side by side as a check of the two methods);
- duration: median duration_ms, and ours/peer as the median over the tasks of each task's own
  ratio (item 3's "median ratio ours/peer");
- statuses: tasks whose status agrees with the peer's, "+k known" for disagreements listed in
  peer_disagreements.json (examined; the peer's status is the wrong one) and "!u unexplained"
  for any other, each named at the end.

Ratios are ours/peer (<= 1.00 is the goal). The 1-minute load average is printed beside every
subset's figures; on a loaded host judge by the CPU columns and the same-run ratios. ``--quick``:
5 tasks, Chrome only, raw CDP and three driver paths. ``--json FILE`` writes every figure.
``--bare`` adds a per-attempt run of ours with phase marks off. ``--rounds N`` measures every
cell N times, who goes first rotating on, and prints each ratio's median over the rounds (each
round's ours over the same round's peer) with its range. ``--driver-isolation`` is passed to our
driver-path runs: the default is the tool's, ``cleared`` (pages in the engine's default context,
where the peer's adapters open theirs, and the engine's cookies and storage cleared after each
attempt, inside its duration); ``shared`` clears nothing, as the peer does; ``context`` gives
each attempt a browser context of its own, which on Chrome costs each attempt's first page a
renderer start (docs/performance.md).

It ends with the host's state: the CPU of a thread's first ``stat`` after a 200 ms pause,
before and after the runs (``host_wake_cost.py``). On this sandbox that figure moved between
~300 and ~600 µs within an hour, and every harness's in-run costs move with it; ratios taken
side by side hold better than absolute figures when it is high.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import host_wake_cost
import peer_harness
import peer_statuses

from metewand.suites.browser.run_config import DEFAULT_DRIVER_ISOLATION, DRIVER_ISOLATIONS

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "lexbench"
METEWAND = Path(sys.executable).parent / "metewand"
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
SUBSETS = {  # subset id -> its L1 directory (the peer's and the corpus's)
    "l1.raw_cdp": "L1/raw_cdp",
    "l1.playwright": "L1/playwright",
    "l1.puppeteer": "L1/puppeteer",
    "l1.chrome_remote_interface": "L1/chrome_remote_interface",
    "l1.chrome_devtools_mcp": "L1/chrome_devtools_mcp",
    "l1.agent_browser_scenarios": "L1/agent_browser_scenarios",
    "l1.stagehand": "L1/stagehand",
    "l1.selenium": "L1/selenium",
    "l1.pydoll": "L1/pydoll",
    "l1.cdp_use": "L1/cdp_use",
}
KNOWN_DISAGREEMENTS = peer_statuses.load_known()
QUICK_SUBSETS = ["l1.raw_cdp", "l1.chrome_remote_interface", "l1.playwright", "l1.cdp_use"]
MODES = ("per-attempt", "long-lived")
# What ``--bare`` switches off: the phase marks, the one measurement of ours the peer's harness
# has no counterpart for that a user can switch off. Host telemetry stays on (the peer's samples
# the host every 2 s too), and so do the adapters' own accounting groups, traffic accounting and
# the rich rows. The difference from ours is what the marks cost.
BARE_FLAGS = ["--no-phase-marks"]


@dataclass
class Watched:
    """One run as seen from outside: per row, when it landed and the harness's counters then."""

    tool: str
    mode: str
    exit_code: int
    wall_s: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    # (t, *reading) per row: the reading is (own ms, reaped ms) unless ``watch`` was given another
    seen: list[tuple[float, ...]] = field(default_factory=list)
    load: float = 0.0
    stderr_tail: str = ""

    def span(self) -> tuple[float, float, float] | None:
        if len(self.seen) < 2:
            return None
        (t0, own0, reaped0), (t1, own1, reaped1) = self.seen[0], self.seen[-1]
        return t1 - t0, own1 - own0, reaped1 - reaped0

    def figures(self) -> dict[str, Any]:
        n = len(self.rows)
        out: dict[str, Any] = {
            "tool": self.tool,
            "mode": self.mode,
            "rows": n,
            "exit": self.exit_code,
            "load": round(self.load, 2),
        }
        durations = [r.get("duration_ms") for r in self.rows]
        known = [d for d in durations if isinstance(d, (int, float))]
        out["duration_ms"] = statistics.median(known) if known else None
        span = self.span()
        if span is not None and len(known) == n:
            wall_s, own_ms, reaped_ms = span
            later = sum(known[1:])
            out["harness_cpu_ms"] = own_ms / (n - 1)
            out["between_ms"] = (wall_s * 1000 - later) / (n - 1)
            out["wall_ms"] = wall_s * 1000 / (n - 1)
            out["reaped_cpu_ms"] = reaped_ms / (n - 1)
        driver = [
            r["driver_resources"].get("cpu_total_ms")
            for r in self.rows
            if isinstance(r.get("driver_resources"), dict)
        ]
        driver = [d for d in driver if isinstance(d, (int, float))]
        out["driver_rows_cpu_ms"] = statistics.median(driver) if driver else None
        out["statuses"] = {r.get("task_id"): r.get("status") for r in self.rows}
        out["durations_ms"] = {r.get("task_id"): r.get("duration_ms") for r in self.rows}
        out["driver_ms_by_task"] = {
            r.get("task_id"): r["driver_resources"].get("cpu_total_ms")
            for r in self.rows
            if isinstance(r.get("driver_resources"), dict)
        }
        return out


def _proc_cpu_ms(pid: int) -> tuple[float, float] | None:
    """(own utime + stime, reaped children's cutime + cstime) of ``pid`` in ms."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) * TICK_MS, (cutime + cstime) * TICK_MS


def watch(
    tool: str,
    mode: str,
    argv: list[str],
    results: Path,
    env: dict[str, str],
    cwd: Path,
    poll_s: float,
    timeout_s: float,
    read: Callable[[int], tuple[float, ...] | None] = _proc_cpu_ms,
) -> Watched:
    """Run ``argv``, noting each row of ``results`` as it lands with ``read(pid)`` then (the
    process's CPU unless told otherwise)."""
    load = os.getloadavg()[0]
    started = time.monotonic()
    results.parent.parent.mkdir(parents=True, exist_ok=True)
    with open(results.parent.parent / f"{results.parent.name}.stderr", "w+b") as err:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        seen: list[tuple[float, ...]] = []
        size = 0
        while proc.poll() is None:
            if time.monotonic() - started > timeout_s:
                proc.kill()
                break
            time.sleep(poll_s)
            try:
                now_size = results.stat().st_size
            except FileNotFoundError:
                continue
            if now_size == size:
                continue
            reading = read(proc.pid)
            stamp = time.monotonic()
            lines = results.read_bytes()[:now_size].count(b"\n")
            size = now_size
            if reading is not None:  # one reading for every row that landed since the last look
                seen.extend([(stamp, *reading)] * (lines - len(seen)))
        code = proc.wait()
        err.seek(0)
        tail = err.read()[-1500:].decode(errors="replace")
    rows = (
        [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    )
    return Watched(
        tool, mode, code, time.monotonic() - started, rows, seen[: len(rows)], load, tail
    )


def select_tasks(peer: Path | None, subset_dir: str, n: int) -> list[str]:
    """The first ``n`` tasks of the subset (of those the peer's checkout has too, when given)."""
    ours = {p.stem for p in (CORPUS / "tasks" / subset_dir).glob("*.json")}
    if peer is not None:
        ours &= {p.stem for p in (peer / "tasks" / subset_dir).glob("*.json")}
    return sorted(ours)[:n]


def ours_argv(
    subset: str, tasks: list[str], engine: str, mode: str | None, out: Path, run_id: str, seed: str
) -> list[str]:
    """Our run of ``tasks``, k=1, one job; ``mode`` None: the default adapter mode."""
    argv = [str(METEWAND), "browser", "run", "--tasks", str(CORPUS), "--subset", subset]
    for task in tasks:
        argv += ["--task", task]
    argv += ["--engines", engine, "--k", "1", "--jobs", "1", "--seed", seed]
    argv += ["--adapter-mode", mode] if mode is not None else []
    return [*argv, "--out", str(out), "--run-id", run_id, "--no-progress", "--quiet"]


def runs_for(subset: str, baseline: bool, bare: bool = False) -> list[tuple[str, str]]:
    """(tool, mode) of the runs of one subset x engine: raw CDP has no adapter, one run of ours
    (and of the baseline sources when given); ``bare``: one more per-attempt run of ours."""
    modes = ("per-attempt",) if subset == "l1.raw_cdp" else MODES
    tools = ("ours", "base") if baseline else ("ours",)
    runs = [("peer", "per-attempt"), *((tool, m) for tool in tools for m in modes)]
    return [*runs, ("bare", "per-attempt")] if bare else runs


def measure_cell(
    args: argparse.Namespace, subset: str, engine: str, turn: int, work: Path, round_: int = 0
) -> dict[str, Any]:
    tasks = select_tasks(args.peer, SUBSETS[subset], args.per_subset)
    plan = runs_for(subset, args.baseline_src is not None, args.bare)
    plan = plan[turn % len(plan) :] + plan[: turn % len(plan)]  # who goes first rotates
    env = peer_harness.environment()
    got: dict[str, dict[str, Any]] = {}
    for tool, mode in plan:
        run_id = f"{subset.replace('.', '_')}_{engine}_{tool}_{mode.replace('-', '_')}_r{round_}"
        out = work / "runs"
        if tool == "peer":
            argv = peer_harness.command(subset, tasks, engine, out, run_id, args.seed)
            cwd = args.peer
        else:
            argv = ours_argv(subset, tasks, engine, mode, out, run_id, args.seed)
            if tool == "bare":
                argv += BARE_FLAGS
            if tool != "base" and subset != "l1.raw_cdp":
                argv += ["--driver-isolation", args.driver_isolation]
            cwd = args.baseline_src if tool == "base" else REPO
        tool_env = env
        if tool == "base":  # the baseline's sources before the installed (editable) package
            tool_env = {**env, "PYTHONPATH": str(args.baseline_src / "src")}
        seen = watch(
            tool,
            mode,
            argv,
            out / run_id / "results.jsonl",
            tool_env,
            cwd,
            args.poll_ms / 1000,
            args.timeout_s,
        )
        got[f"{tool}:{mode}"] = seen.figures()
        if seen.exit_code not in (0, 1) or len(seen.rows) != len(tasks):
            got[f"{tool}:{mode}"]["problem"] = seen.stderr_tail
    return {
        "subset": subset,
        "engine": engine,
        "round": round_,
        "tasks": tasks,
        "runs": got,
        "load_after": round(os.getloadavg()[0], 2),
    }


def _ratio(ours: float | None, peer: float | None) -> str:
    return f"{ours / peer:.2f}" if ours is not None and peer else "n/a"


def _fmt(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}"


def duration_ratio(fig: dict[str, Any], peer: dict[str, Any]) -> float | None:
    """Duration ours/peer as the issue defines it: the median over the tasks of each task's
    ratio. A ratio of the two runs' medians can land between two clusters of tasks and read
    1.18 where the tasks' own ratios are 0.70-1.30 around 1.02."""
    ratios = _task_ratios(fig.get("durations_ms"), peer.get("durations_ms"))
    return statistics.median(ratios) if ratios else None


def _task_ratios(ours: dict[str, Any] | None, theirs: dict[str, Any] | None) -> list[float]:
    """Each task's figure in ``ours`` over its figure in ``theirs``, for the tasks both hold."""
    ours, theirs = ours or {}, theirs or {}
    return [
        ours[t] / theirs[t]
        for t in set(ours) & set(theirs)
        if isinstance(ours[t], (int, float)) and isinstance(theirs[t], (int, float)) and theirs[t]
    ]


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def agreement(engine: str, ours: dict[str, Any], peer: dict[str, Any]) -> peer_statuses.Agreement:
    return peer_statuses.compare(
        engine, ours.get("statuses", {}), peer.get("statuses", {}), KNOWN_DISAGREEMENTS
    )


def print_cell(cell: dict[str, Any]) -> None:
    runs = cell["runs"]
    peer = runs["peer:per-attempt"]
    loads = ", ".join(f"{name} {fig['load']}" for name, fig in runs.items())
    print(
        f"\n{cell['subset']} x {cell['engine']}: {len(cell['tasks'])} tasks; load average "
        f"at each run's start {loads}, after {cell['load_after']}"
    )
    head = (
        "run",
        "harness CPU/att ms",
        "x peer",
        "between ms",
        "x peer",
        "wall/att ms",
        "x peer",
        "driver CPU/att ms",
        "x peer",
        "rows' driver ms",
        "duration ms",
        "x peer",
        "statuses",
    )
    print("  " + " | ".join(head))
    for name, fig in runs.items():
        driver = _driver_cpu_ms(fig)
        cells = (
            name,
            _ms(fig.get("harness_cpu_ms")),
            _ratio(fig.get("harness_cpu_ms"), peer.get("harness_cpu_ms")),
            _ms(fig.get("between_ms")),
            _ratio(fig.get("between_ms"), peer.get("between_ms")),
            _ms(fig.get("wall_ms")),
            _ratio(fig.get("wall_ms"), peer.get("wall_ms")),
            _ms(driver),
            _ratio(driver, peer.get("reaped_cpu_ms")),
            _ms(fig.get("driver_rows_cpu_ms")),
            _ms(fig.get("duration_ms")),
            _fmt(duration_ratio(fig, peer)),
            agreement(cell["engine"], fig, peer).brief() if fig is not peer else "-",
        )
        print("  " + " | ".join(cells))
        if "problem" in fig:
            print(f"    {name}: exit {fig['exit']}, {fig['rows']} rows: {fig['problem'][-400:]!r}")
    served = served_share(runs)
    if served is not None:
        print(
            f"  long-lived driver CPU / per-attempt's, task by task (item 4): median {served[0]:.2f} "
            f"[{served[1]:.2f}, {served[2]:.2f}] over {served[3]} tasks"
        )


def served_share(runs: dict[str, Any]) -> tuple[float, float, float, int] | None:
    """Each task's driver CPU in our long-lived run over its per-attempt run's (the rows' own
    accounting group in both): the median over the tasks with the lowest and highest. Task by
    task, so that the mix of long and short tasks in a cell does not move it as a ratio of the
    two runs' medians does."""
    if "ours:long-lived" not in runs or "ours:per-attempt" not in runs:
        return None
    shares = _task_ratios(
        runs["ours:long-lived"].get("driver_ms_by_task"),
        runs["ours:per-attempt"].get("driver_ms_by_task"),
    )
    if not shares:
        return None
    return statistics.median(shares), min(shares), max(shares), len(shares)


def print_summary(cells: list[dict[str, Any]]) -> None:
    """Per run kind, over every cell it ran in: the geometric mean of its harness CPU per
    attempt over the peer's, and how many cells are at or below the peer's."""
    ratios: dict[str, list[float]] = {}
    for cell in cells:
        peer = cell["runs"]["peer:per-attempt"].get("harness_cpu_ms")
        for name, fig in cell["runs"].items():
            ours = fig.get("harness_cpu_ms")
            if name != "peer:per-attempt" and ours is not None and peer:
                ratios.setdefault(name, []).append(ours / peer)
    print("\nharness CPU per attempt x peer, over the cells:")
    for name, values in ratios.items():
        geometric = statistics.geometric_mean(values)
        at_or_below = sum(v <= 1.0 for v in values)
        print(
            f"  {name}: geometric mean {geometric:.3f}, {at_or_below} of {len(values)} at or below"
        )


def print_statuses(cells: list[dict[str, Any]]) -> None:
    """Over every cell and run of ours: tasks that agree with the peer, disagreements listed in
    peer_disagreements.json (examined: the peer's status is the wrong one), and the rest, each
    named: a status that changed. A listed disagreement that did not recur is named too."""
    agree = known = 0
    unexplained: list[str] = []
    stale: set[str] = set()
    for cell in cells:
        peer = cell["runs"]["peer:per-attempt"]
        for name, fig in cell["runs"].items():
            if name == "peer:per-attempt":
                continue
            seen = agreement(cell["engine"], fig, peer)
            agree, known = agree + seen.agree, known + len(seen.known)
            where = f"{cell['subset']} x {cell['engine']} {name}"
            unexplained += [f"{where}: {text}" for text in seen.unexplained]
            stale.update(seen.stale)
    total = agree + known + len(unexplained)
    print(
        f"\nstatuses, every run of ours: {agree} of {total} agree with the peer, {known} "
        f"disagree as listed in {peer_statuses.KNOWN_FILE.name}, {len(unexplained)} unexplained"
    )
    for line in unexplained:
        print(f"  unexplained: {line}")
    for line in sorted(stale):
        print(f"  listed but not as listed: {line}")


def print_rounds(cells: list[dict[str, Any]]) -> None:
    """With ``--rounds``: per subset x engine and run kind, each round's ratio to the peer's run
    of the same round, as the median over the rounds with its range; then, over the cells, the
    geometric mean of those medians and how many are at or below 1."""
    ratios: dict[tuple[str, str, str, str], list[float]] = {}
    for cell in cells:
        peer = cell["runs"]["peer:per-attempt"]
        for name, fig in cell["runs"].items():
            if name == "peer:per-attempt":
                continue
            for figure, ours, theirs in _round_figures(fig, peer):
                if ours is not None and theirs:
                    key = (cell["subset"], cell["engine"], name, figure)
                    ratios.setdefault(key, []).append(ours / theirs)
    print("\nover the rounds, x peer of the same round: median [lowest, highest]")
    medians: dict[tuple[str, str], list[float]] = {}
    for (subset, engine, name, figure), values in ratios.items():
        median = statistics.median(values)
        medians.setdefault((name, figure), []).append(median)
        print(
            f"  {subset} x {engine} {name} {figure}: {median:.2f} "
            f"[{min(values):.2f}, {max(values):.2f}] of {len(values)}"
        )
    for (name, figure), values in medians.items():
        at_or_below = sum(v <= 1.0 for v in values)
        print(
            f"  {name} {figure}: geometric mean of the medians "
            f"{statistics.geometric_mean(values):.3f}, {at_or_below} of {len(values)} at or below"
        )


def _driver_cpu_ms(fig: dict[str, Any]) -> float | None:
    """A run's driver CPU per attempt: reaped per-attempt adapters, else the rows' own figure."""
    return fig.get("reaped_cpu_ms") if fig["mode"] == "per-attempt" else fig["driver_rows_cpu_ms"]


def _round_figures(
    fig: dict[str, Any], peer: dict[str, Any]
) -> list[tuple[str, float | None, float | None]]:
    """(figure, ours, the peer's) for the rounds' summary: item 2's harness figures, and item 3's
    driver CPU and duration per attempt where adapters ran (raw CDP reaps none)."""
    names = ("harness_cpu_ms", "between_ms", "wall_ms")
    figures = [(name, fig.get(name), peer.get(name)) for name in names]
    if peer.get("reaped_cpu_ms"):
        figures.append(("driver_cpu_ms", _driver_cpu_ms(fig), peer.get("reaped_cpu_ms")))
        figures.append(("duration_ms", duration_ratio(fig, peer), 1.0))
    return figures


def cells_of(args: argparse.Namespace) -> Iterable[tuple[str, str]]:
    for subset in args.subset:
        for engine in args.engines:
            yield subset, engine


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--peer", type=Path, required=True, help="a scratch checkout of the peer")
    parser.add_argument("--per-subset", type=int, default=25)
    parser.add_argument("--engines", default="chrome,lightpanda")
    parser.add_argument("--subset", action="append", choices=sorted(SUBSETS))
    parser.add_argument("--quick", action="store_true", help="5 tasks, Chrome, four subsets")
    parser.add_argument("--seed", default="harness-vs-peer")
    parser.add_argument("--poll-ms", type=float, default=5.0)
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="per run")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="also run the metewand whose tree is here (git archive COMMIT src drivers data | "
        "tar -x -C DIR; drivers/node/node_modules linked to ours) in the same rounds",
    )
    parser.add_argument("--keep", type=Path, help="keep the runs here (default: a temp dir)")
    parser.add_argument(
        "--driver-isolation",
        choices=DRIVER_ISOLATIONS,
        default=DEFAULT_DRIVER_ISOLATION,
        help="our driver paths' --driver-isolation (shared: the engine's default context, as the "
        "peer's adapters open their pages: the like-for-like comparison; cleared: the same pages, "
        "the engine's cookies and storage cleared after each attempt)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure every cell this many times, who goes first rotating on; prints each "
        "ratio's median over the rounds (one run per tool cannot settle a ratio near 1 on a "
        "host whose speed drifts between runs)",
    )
    parser.add_argument(
        "--bare",
        action="store_true",
        help="also run ours per-attempt with " + " ".join(BARE_FLAGS) + ": what those cost",
    )
    args = parser.parse_args()
    args.peer = args.peer.resolve()
    if args.baseline_src is not None:
        args.baseline_src = args.baseline_src.resolve()
        linked = args.baseline_src / "drivers" / "node" / "node_modules"
        if not linked.exists():
            linked.symlink_to(REPO / "drivers" / "node" / "node_modules")
    args.engines = args.engines.split(",")
    if args.quick:
        args.per_subset, args.engines = 5, ["chrome"]
        args.subset = args.subset or QUICK_SUBSETS
    args.subset = args.subset or list(SUBSETS)
    peer_harness.prepare(args.peer, args.engines)
    print(f"our driver paths: --driver-isolation {args.driver_isolation}")
    wake_before = host_wake_cost_us()
    cells = []
    with tempfile.TemporaryDirectory(prefix="mw-harness-vs-peer-") as tmp:
        work = args.keep.resolve() if args.keep else Path(tmp)
        for round_ in range(args.rounds):
            for index, (subset, engine) in enumerate(cells_of(args)):
                # who goes first moves on by one from cell to cell and from round to round: a
                # count over every cell would give each cell the same first runner in every
                # round whenever a round's cells are a multiple of its runs (raw CDP: two
                # engines, two runs, so ours always went first on Lightpanda)
                cell = measure_cell(args, subset, engine, index + round_, work, round_)
                print_cell(cell)
                cells.append(cell)
    print_summary(cells)
    print_statuses(cells)
    if args.rounds > 1:
        print_rounds(cells)
    wake = {"before_us": wake_before, "after_us": host_wake_cost_us()}
    print(
        f"\nthe host's first stat after a 200 ms pause (host_wake_cost.py; ~5 us on a host that "
        f"does not charge for resting): {wake['before_us']:.0f} us before the runs, "
        f"{wake['after_us']:.0f} us after"
    )
    if args.json:
        document = {"cells": cells, "args": asdict_args(args), "host_wake_cost": wake}
        args.json.write_text(json.dumps(document, indent=1))


def host_wake_cost_us() -> float:
    """The host's state beside the ratios: what a thread pays to touch the kernel after 200 ms
    at rest, as a harness does after each scene settle (median of 10)."""
    return host_wake_cost.measure(0.2, 10, "/tmp")[0]


def asdict_args(args: argparse.Namespace) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}


if __name__ == "__main__":
    main()
