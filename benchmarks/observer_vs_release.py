"""Issue 24, item 0: the observer against an earlier release's, in the same run.

The observer's cost (two exact PSS walks of the engine tree per profiled attempt, plus the
sampler between them) moves from day to day on a shared VM by more than any change to our code
would, so a figure from yesterday's notes cannot tell whether today's code made it worse. This
script runs both in the same hour instead: the sources of an earlier commit (``git archive REF
src``, as ``measure_vs_hyperfine.py --baseline-src`` does) and this checkout, each a real
profiled run of the built-in suite (``metewand browser run --resource-profile engine``, the
default interleaved calibration), in ABBA order over the rounds so a drifting host favours
neither.

Both trees' run directories are then read by this checkout's code (the same yardstick for both):
  - per engine, each run's median collection-wall overhead over its interleaved pairs (profiled
    attempt against its unprofiled twin), the figure issue 24 item 0 limits to +6% on Chrome,
    and whether the run's own calibration found the observer acceptable (its eligibility);
  - per engine, the observer's own wall per profiled attempt (baseline scan + end scan, ms),
    pooled per tree over the rounds: medians, their ratio this / baseline with the
    Hodges-Lehmann ratio and its 95% CI from the rank-sum test, and that test's p.

Verdict: "regression" when the observer's wall is slower by more than --tolerance (default 10%)
with the whole CI above 1 + tolerance; exit 1 then. Otherwise exit 0; the figures are printed
either way, with the host's load at each run.

The default baseline is the newest commit at least --days (1) older than HEAD; name another with
--baseline REF (a tag of a release, when there are tags).

    .venv/bin/python benchmarks/observer_vs_release.py [--baseline REF] [--rounds 2] [--k 3]
        [--engines chrome] [--tolerance 0.10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from metewand.compare.generate import write_after_run
from metewand.compare.resource_metrics import resource_of

REPO = Path(__file__).resolve().parents[1]
TREES = ("baseline", "this")


def _git(*argv: str) -> str:
    return subprocess.run(
        ["git", *argv], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()


def default_baseline(days: float) -> str:
    """The newest commit at least ``days`` older than HEAD (by committer date)."""
    head_time = int(_git("log", "-1", "--format=%ct", "HEAD"))
    before = head_time - int(days * 86400)
    commit = _git("rev-list", "-1", f"--before={before}", "HEAD")
    if not commit:
        raise SystemExit(f"no commit is {days} day(s) older than HEAD; name one with --baseline")
    return commit


def extract_src(commit: str, into: Path) -> Path:
    """``git archive COMMIT src`` unpacked under ``into``; the tree's sources."""
    archive = subprocess.run(
        ["git", "archive", commit, "src"], cwd=REPO, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into / "src")], check=True)
    return into / "src"


def order(rounds: int) -> list[str]:
    """ABBA: baseline first in even rounds, this tree first in odd ones."""
    out: list[str] = []
    for r in range(rounds):
        out += list(TREES) if r % 2 == 0 else list(reversed(TREES))
    return out


def run_once(tree: str, src: Path, out: Path, run_id: str, args: argparse.Namespace) -> Path:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(src)  # this checkout's too: an installed metewand may be another
    argv = [sys.executable, "-m", "metewand", "browser", "run", "--engines", args.engines]
    argv += ["--k", str(args.k), "--seed", run_id, "--resource-profile", "engine"]
    argv += ["--out", str(out), "--run-id", run_id, "--no-progress"]
    for task in args.task or ():
        argv += ["--task", task]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-2000:] + done.stderr[-2000:])
        raise SystemExit(f"{tree} run {run_id} exited {done.returncode}")
    return out / run_id


def observer_walls(run_dir: Path) -> dict[str, list[float]]:
    """Per engine: baseline scan + end scan wall (ms) of each profiled attempt of the run."""
    walls: dict[str, list[float]] = {}
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        record = resource_of(row)
        wall = (record.get("observer_wall_ms") if isinstance(record, dict) else None) or {}
        if isinstance(wall.get("start"), int | float) and isinstance(wall.get("stop"), int | float):
            walls.setdefault(row["engine"], []).append(float(wall["start"]) + float(wall["stop"]))
    return walls


def overhead(run_dir: Path) -> dict[str, Any]:
    """The run's observer effect by engine, as this checkout's code derives it."""
    write_after_run(run_dir)
    summary = json.loads((run_dir / "resource_summary.json").read_text())
    return dict(summary["observer_effect"]["by_engine"])


def load() -> float:
    return os.getloadavg()[0]


def shift_interval(new: np.ndarray, base: np.ndarray) -> tuple[float, float, float]:
    """Two-sample Hodges-Lehmann shift and its 95% CI (Moses: order statistics of all pairwise
    differences, cut by the rank-sum statistic's normal approximation; n here is ~100 a side)."""
    diffs = np.sort(np.subtract.outer(new, base).ravel())
    m, n = len(new), len(base)
    cut = int(np.floor(m * n / 2 - 1.959964 * np.sqrt(m * n * (m + n + 1) / 12)))
    cut = max(cut, 0)
    return float(np.median(diffs)), float(diffs[cut]), float(diffs[len(diffs) - 1 - cut])


def compare_walls(base: list[float], this: list[float]) -> dict[str, float]:
    """Medians, and the Hodges-Lehmann ratio this/base with its rank-sum CI, in log space."""
    logs_base = np.log(base)
    logs_this = np.log(this)
    shift, low, high = shift_interval(logs_this, logs_base)
    p = float(stats.mannwhitneyu(logs_this, logs_base, alternative="two-sided").pvalue)
    return {
        "base_median": statistics.median(base),
        "this_median": statistics.median(this),
        "ratio": float(np.exp(shift)),
        "low": float(np.exp(low)),
        "high": float(np.exp(high)),
        "p": p,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="commit or tag (default: newest >= --days before HEAD)")
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--engines", default="chrome")
    parser.add_argument("--task", action="append", help="task ids (default: the built-in suite)")
    parser.add_argument("--tolerance", type=float, default=0.10)
    parser.add_argument("--keep", type=Path, help="keep the run directories here")
    args = parser.parse_args()
    commit = _git("rev-parse", args.baseline or default_baseline(args.days))
    head = _git("rev-parse", "HEAD")
    print(f"baseline {commit[:12]} ({_git('log', '-1', '--format=%ci %s', commit)[:90]})")
    print(f"this     {head[:12]} (+ the work tree's changes, if any)")
    with tempfile.TemporaryDirectory(prefix="mw-obs-release-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        srcs = {"baseline": extract_src(commit, work / "baseline-tree"), "this": REPO / "src"}
        runs: list[tuple[str, Path, float]] = []
        for i, tree in enumerate(order(args.rounds)):
            before = load()
            run_dir = run_once(tree, srcs[tree], work / "runs", f"{tree}-{i}", args)
            runs.append((tree, run_dir, before))
            print(f"  run {i}: {tree:8} load {before:.2f} -> {load():.2f}", flush=True)
        report(runs, args.tolerance)


def report(runs: list[tuple[str, Path, float]], tolerance: float) -> None:
    pooled: dict[tuple[str, str], list[float]] = {}
    print(
        "\n| run | tree | load | engine | pairs | collection-wall overhead | acceptable "
        "| observer wall ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for tree, run_dir, before in runs:
        effect = overhead(run_dir)
        for engine, walls in sorted(observer_walls(run_dir).items()):
            pooled.setdefault((tree, engine), []).extend(walls)
            fig = effect.get(engine) or {}
            pct = fig.get("median_collection_wall_delta_pct")
            shown = "unavailable" if pct is None else f"{pct:+.2f}%"
            print(
                f"| {run_dir.name} | {tree} | {before:.2f} | {engine} | "
                f"{fig.get('matched_attempts')} | {shown} | {fig.get('acceptable')} "
                f"| {statistics.median(walls):.1f} |"
            )
    regressed = []
    print("\nobserver wall per profiled attempt (baseline + end scan), pooled over the rounds:")
    for engine in sorted({e for _, e in pooled}):
        base, this = pooled.get(("baseline", engine)), pooled.get(("this", engine))
        if not base or not this:
            print(f"  {engine}: unavailable (a tree has no profiled attempts)")
            continue
        c = compare_walls(base, this)
        verdict = "regression" if c["low"] > 1 + tolerance else "no regression"
        if verdict == "regression":
            regressed.append(engine)
        print(
            f"  {engine}: baseline {c['base_median']:.1f} ms (n={len(base)}), this "
            f"{c['this_median']:.1f} ms (n={len(this)}); this/baseline {c['ratio']:.3f} "
            f"[{c['low']:.3f}-{c['high']:.3f}], p {c['p']:.3g}: {verdict} "
            f"(tolerance {tolerance:.0%})"
        )
    raise SystemExit(1 if regressed else 0)


if __name__ == "__main__":
    main()
