"""Change points on a seeded series of real runs (issue #23, acceptance 1 and 2).

compute (default): 16 runs of the sorting example where one implementation spends +15% execute
CPU (benchmarks/planted.py: a calibrated loop) from run 9 on, the others unchanged, and 16 A/A
runs of the unchanged example. browser (``--suite browser``): 12 runs of the built-in suite where
one task's page gets heavier from run 7 on (a script that builds and lays out a large table),
and 12 A/A runs. The two series' runs alternate (planted run i, then A/A run i), so both see the
same hours of the host.

Each run is tagged with a commit of a scratch git repository the script makes: the example (or
the suite) is copied in, every run is preceded by a commit (an empty one, or the one planting the
change), and the run records that repository's HEAD as its benchmarked tree, as a CI job would.
The change is planted in that copy only, never in the shipped example or suite. The copy of the
example runs ``--repetitions`` attempts per case and implementation (default 10: the sorting
example itself has fewer; on this host a run's floor over 10 attempts scatters ~2-5% between
runs, over 2 attempts 5-15%); the browser suite runs ``--k`` attempts per task and engine.

A niced CPU burner runs during some runs (``--burn-runs``). After every run ``history check
--fail-on-change --recent 3`` runs as CI would; at the end the whole history is checked (default
settings, or ``--check-args``). Every figure is printed with the load average it ran under.

    .venv/bin/python benchmarks/history_changepoints.py
    .venv/bin/python benchmarks/history_changepoints.py --suite browser
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from planted import plant_slowdown  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
METEWAND = [str(REPO / ".venv" / "bin" / "metewand")]
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def git(repo: Path, *args: str) -> str:
    done = subprocess.run([*GIT, *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def burner() -> subprocess.Popen[bytes]:
    """A niced busy loop on each core: what another tenant of a CI host does."""
    return subprocess.Popen(
        [
            "nice",
            "-n",
            "19",
            sys.executable,
            "-c",
            "import multiprocessing as m\n"
            "def f():\n    while True: pass\n"
            "ps=[m.Process(target=f) for _ in range(2)]\n[p.start() for p in ps]\n"
            "[p.join() for p in ps]",
        ],
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, 9)
    proc.wait()


def metewand(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*METEWAND, *args], cwd=cwd, capture_output=True, text=True)


def with_repetitions(manifest: Path, repetitions: int) -> None:
    """The copy's experiments run ``repetitions`` attempts each."""
    text = re.sub(r"(?m)^repetitions = \d+", f"repetitions = {repetitions}", manifest.read_text())
    manifest.write_text(text)


def prepare_tree(args: argparse.Namespace, work: Path) -> tuple[Path, Path]:
    """The scratch repository (the benchmarked tree) and its pristine source."""
    repo = work / "tree"
    if args.suite == "compute":
        source = work / "example"
        shutil.copytree(
            REPO / "examples" / "sorting", source, ignore=shutil.ignore_patterns("__pycache__")
        )
        with_repetitions(source / "metewand.toml", args.repetitions)
    else:
        from metewand.suites.browser.run_config import builtin_suite_dir

        source = Path(builtin_suite_dir())
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "baseline")
    return repo, source


def plant(args: argparse.Namespace, repo: Path, source: Path) -> str:
    """Change the tree the planted way; returns what was planted."""
    if args.suite == "compute":
        scratch = repo.parent / "planted"
        shutil.rmtree(scratch, ignore_errors=True)  # plant_slowdown wants a new directory
        plant_slowdown(source, args.implementation, args.fraction, scratch)
        shutil.copytree(scratch, repo, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
        return f"{args.implementation}: +{args.fraction:.0%} execute CPU"
    page = heavier_page(repo, args.task, args.page_rows)
    return f"task {args.task}: heavier page {page.name}"


def heavier_page(suite: Path, task_id: str, rows: int = 400) -> Path:
    """The task's scene page gets a script that builds and lays out a table of ``rows`` x 8
    cells on load (outside the element the task reads, so its answer stays right)."""
    task = next(
        p
        for p in (suite / "tasks").rglob("*.json")
        if json.loads(p.read_text()).get("task_id") == task_id
    )
    spec = json.loads(task.read_text())
    scene = spec.get("scene") or spec.get("fixture") or {}
    url = scene.get("url") if isinstance(scene, dict) else None
    name = Path(str(url or "")).name
    page = next(p for p in (suite / "fixtures").rglob("*.html") if p.name == name)
    extra = (
        "<script>(function(){var t=document.createElement('table');for(var i=0;i<"
        + str(rows)
        + ";i++)"
        "{var r=t.insertRow();for(var j=0;j<8;j++){r.insertCell().textContent=i*j;}}"
        "document.body.appendChild(t);void document.body.offsetHeight;})();</script>"
    )
    page.write_text(page.read_text().replace("</body>", extra + "</body>"))
    return page


def run_once(args: argparse.Namespace, work: Path, repo: Path, store: Path, label: str) -> dict:
    if args.suite == "compute":
        cmd = ["run", str(repo / "metewand.toml")]
    else:
        cmd = [
            "browser",
            "run",
            "--tasks",
            str(repo),
            "--engines",
            args.engines,
            "--k",
            str(args.k),
        ]
    started = time.monotonic()
    done = metewand(
        *cmd,
        "--out",
        str(work / "runs"),
        "--run-id",
        label,
        "--history",
        str(store),
        "--no-progress",
        "--quiet",
        cwd=repo,
    )
    checked = metewand(
        "history",
        "check",
        "--fail-on-change",
        "--recent",
        str(args.recent),
        "--json",
        "--history",
        str(store),
        *args.check_args,
        cwd=work,
    )
    if checked.returncode not in (0, 1, 2):
        raise SystemExit(f"history check failed: {checked.stderr[-2000:]}")
    report = json.loads(checked.stdout) if checked.stdout.strip() else {}
    new = [c for s in report.get("suites", []) for c in s["change_points"] if c["recent"]]
    return {
        "run": label,
        "exit": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "check_exit": checked.returncode,
        "new_changes": new,
        "stderr": done.stderr[-400:],
    }


@dataclass
class Series:
    name: str
    planted_at: int | None
    repo: Path
    source: Path
    store: Path
    planted: str | None = None
    runs: list[dict] = field(default_factory=list)
    final: dict = field(default_factory=dict)


def start_series(args: argparse.Namespace, work: Path, name: str, planted_at: int | None) -> Series:
    repo, source = prepare_tree(args, work / name)
    return Series(name, planted_at, repo, source, work / name / "history.duckdb")


def one_run(args: argparse.Namespace, work: Path, one: Series, i: int, burn: bool) -> None:
    if one.planted_at is not None and i == one.planted_at:
        one.planted = plant(args, one.repo, one.source)
        git(one.repo, "add", "-A")
        git(one.repo, "commit", "-q", "-m", f"run {i}: {one.planted}")
    else:
        git(one.repo, "commit", "-q", "--allow-empty", "-m", f"run {i}")
    commit = git(one.repo, "rev-parse", "HEAD")[:10]
    hog = burner() if burn else None
    before = load()
    try:
        result = run_once(args, work / one.name, one.repo, one.store, f"{one.name}{i:02d}")
    finally:
        if hog is not None:
            stop(hog)
    result.update(commit=commit, burner=burn, load_before=before, load_after=load())
    one.runs.append(result)
    news = (
        "; ".join(
            f"{c['subject']} {c['task'][:40]} {c['step']:+.1%}" for c in result["new_changes"]
        )
        or "-"
    )
    print(
        f"  {one.name} run {i:2d} commit {commit} burner={'on ' if burn else 'off'} "
        f"load {before} -> {result['load_after']} run exit {result['exit']} "
        f"{result['seconds']} s; check exit {result['check_exit']}; new steps: {news}",
        flush=True,
    )
    if result["exit"] != 0:
        print(f"    run stderr: {result['stderr']}", flush=True)


def finish(args: argparse.Namespace, work: Path, one: Series) -> None:
    final = metewand(
        "history", "check", "--json", "--history", str(one.store), *args.check_args, cwd=work
    )
    one.final = json.loads(final.stdout)


def groups_of(args: argparse.Namespace, work: Path, one: Series) -> list[tuple[str, str]]:
    """Every (task, subject) group of the history's suite for the checked metric."""
    shown = metewand(
        "history",
        "show",
        "--json",
        "--last",
        "1",
        "--history",
        str(one.store),
        *args.check_args,
        cwd=work,
    )
    return [
        (g["task"], g["subject"]) for s in json.loads(shown.stdout)["suites"] for g in s["groups"]
    ]


def judge(args: argparse.Namespace, work: Path, one: Series, target: str) -> bool:
    """Print the whole history's change points and whether they are exactly the planted ones:
    every group of the target (implementation, or browser task) at the planted run, nothing
    else (for A/A: nothing at all; a step only the newest runs show counts too). Environment
    shifts (a step across which the group's declared inputs stayed the same: ``history check``
    lists them and does not count them) are printed beside, with their number, and not judged."""
    suites = one.final["suites"]
    every = [c for s in suites for c in s["change_points"]]
    shifts = [c for c in every if c["host_shift"]]
    environment = [c for c in every if not c["host_shift"] and c.get("environment_shift")]
    changes = [c for c in every if not c["host_shift"] and not c.get("environment_shift")]
    metric = ",".join(f"{s['metric']} (typical noise {s['typical_noise']:.1%})" for s in suites)
    print(
        f"{one.name}: {len(changes)} change point(s) over the whole history, and "
        f"{len(environment)} environment shift(s) (steps across which the group's declared "
        f"inputs did not change: listed, not counted); {metric}"
    )
    for c in changes + environment:
        kind = "environment shift: " if c in environment else ""
        print(
            f"  {kind}{c['subject']} | {c['task'][:70]} | from run {c['run_id']} (position "
            f"{c['position']}, commit {str(c['commit'])[:10]}) step {c['step']:+.1%} "
            f"[{c['step_ci95'][0]:+.1%}, {c['step_ci95'][1]:+.1%}] p={c['p_value']:.2g} "
            f"noise {c['historical_noise']:.1%}, {c['runs_after']} runs after, inputs "
            f"{c.get('inputs', 'unknown')}"
        )
    for c in shifts:
        print(
            f"  host shift (the run-wide factor across polluted runs, not judged): from run "
            f"{c['run_id']} {c['step']:+.1%} [{c['step_ci95'][0]:+.1%}, "
            f"{c['step_ci95'][1]:+.1%}]"
        )
    flagged = [r["run"] for r in one.runs if r["check_exit"] == 1]
    print(f"  CI-style checks after each run that exited 1: {flagged or 'none'}")
    if one.planted_at is None:
        print(
            f"  A/A verdict: {'PASS' if not changes else 'FAIL'} (0 change points expected; "
            f"{len(environment)} environment shift(s) listed)"
        )
        return not changes
    groups = groups_of(args, work, one)
    expected = {g for g in groups if target in g}
    right = {
        (c["task"], c["subject"])
        for c in changes
        if c["position"] == one.planted_at and (c["task"], c["subject"]) in expected
    }
    wrong = [
        c
        for c in changes
        if (c["task"], c["subject"]) not in right or c["position"] != one.planted_at
    ]
    print(
        f"  {len(groups)} groups; the planted {target}'s {len(expected)} groups found at run "
        f"{one.planted_at}: {len(right)}; missed: {sorted(expected - right) or 'none'}; other "
        f"change points: {len(wrong)}"
    )
    passed = right == expected and not wrong
    print(f"  verdict: {'PASS' if passed else 'FAIL'}")
    return passed


def rejudge(args: argparse.Namespace, work: Path, planted_at: int, target: str) -> None:
    """Check and judge the histories an earlier ``--keep`` run left (the runs' CI-style
    checks are not repeated: only the whole history's)."""
    verdicts = []
    print(f"rejudging {work} (load {load()})")
    for name, at in (("planted", planted_at), ("aa", None)):
        one = Series(name, at, work / name / "tree", work / name, work / name / "history.duckdb")
        finish(args, work, one)
        verdicts.append(judge(args, work, one, target))
    print(f"acceptance: {'PASS' if all(verdicts) else 'FAIL'}; load {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", choices=["compute", "browser"], default="compute")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--implementation", default="python-heapsort")
    parser.add_argument("--fraction", type=float, default=0.15)
    parser.add_argument(
        "--repetitions",
        type=int,
        default=10,
        help="Compute: attempts per case and implementation in the copy of the example.",
    )
    parser.add_argument("--task", default="own_l2_inner_text")
    parser.add_argument("--engines", default="chrome,lightpanda")
    parser.add_argument(
        "--page-rows",
        type=int,
        default=400,
        help="Browser: rows of the table the heavier page builds (x 8 cells).",
    )
    parser.add_argument("--k", type=int, default=2, help="Browser: attempts per task and engine.")
    parser.add_argument("--burn-runs", default=None, help="Runs with the burner (1-based).")
    parser.add_argument("--check-args", default="", help="Extra `history check` arguments.")
    parser.add_argument(
        "--recent",
        type=int,
        default=3,
        help="The CI-style check after each run "
        "fails on a step starting at one of the newest N runs (a step the newest "
        "run alone cannot establish is named once more runs show it).",
    )
    parser.add_argument("--keep", action="store_true", help="Keep the scratch directory.")
    parser.add_argument(
        "--rejudge",
        type=Path,
        default=None,
        metavar="SCRATCH",
        help="No runs: check the histories a --keep run left in SCRATCH again "
        "(with this tree's metewand) and judge them.",
    )
    args = parser.parse_args()
    args.runs = args.runs or (16 if args.suite == "compute" else 12)
    planted_at = 9 if args.suite == "compute" else 7
    if args.burn_runs is None:
        args.burn_runs = "3,4,11,12" if args.suite == "compute" else "3,4,9"
    args.check_args = args.check_args.split()
    target = args.implementation if args.suite == "compute" else args.task
    if args.rejudge is not None:
        rejudge(args, args.rejudge, planted_at, target)
        return
    work = Path(tempfile.mkdtemp(prefix="metewand-hcp-"))
    burn = {int(x) for x in args.burn_runs.split(",") if x}
    print(
        f"history_changepoints ({args.suite}): {args.runs} runs per series, planted at run "
        f"{planted_at}, burner during runs {sorted(burn)}, repetitions {args.repetitions}, "
        f"k {args.k}; load {load()}; scratch {work}",
        flush=True,
    )
    try:
        started = time.monotonic()
        planted = start_series(args, work, "planted", planted_at)
        aa = start_series(args, work, "aa", None)
        for i in range(1, args.runs + 1):
            for one in (planted, aa):
                one_run(args, work, one, i, i in burn)
        for one in (planted, aa):
            finish(args, work, one)
        print(f"planted: {planted.planted}")
        verdicts = [judge(args, work, planted, target), judge(args, work, aa, target)]
        print(
            f"acceptance: {'PASS' if all(verdicts) else 'FAIL'}; total "
            f"{time.monotonic() - started:.0f} s; load at the end {load()}"
        )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
