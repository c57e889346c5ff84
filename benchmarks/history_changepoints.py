"""Change points on a seeded series of real runs (issue #23, acceptance 1 and 2).

compute (default): 16 runs of the sorting example where one implementation spends +15% execute
CPU (benchmarks/planted.py: a calibrated loop) from run 9 on, the others unchanged; then 16 A/A
runs of the unchanged example. browser (``--suite browser``): 12 runs of the built-in suite where
one task's page gets heavier from run 7 on; then 12 A/A runs.

Each run is tagged with a commit of a scratch git repository the script makes: the example (or
the suite) is copied in, every run is preceded by a commit (an empty one, or the one planting the
change), and the run records that repository's HEAD as its benchmarked tree, as a CI job would.
A niced CPU burner runs during some runs (``--burn-runs``). After every run ``history check
--fail-on-change`` runs as CI would; at the end the whole history is checked. Every figure is
printed with the load average it ran under.

    .venv/bin/python benchmarks/history_changepoints.py
    .venv/bin/python benchmarks/history_changepoints.py --suite browser
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
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
        ["nice", "-n", "19", sys.executable, "-c",
         "import multiprocessing as m\n"
         "def f():\n    while True: pass\n"
         "ps=[m.Process(target=f) for _ in range(2)]\n[p.start() for p in ps]\n"
         "[p.join() for p in ps]"],
        start_new_session=True,
    )  # fmt: skip


def stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, 9)
    proc.wait()


def metewand(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*METEWAND, *args], cwd=cwd, capture_output=True, text=True)


def prepare_tree(args: argparse.Namespace, work: Path) -> tuple[Path, Path]:
    """The scratch repository (the benchmarked tree) and its pristine source."""
    repo = work / "tree"
    if args.suite == "compute":
        source = REPO / "examples" / "sorting"
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
        plant_slowdown(source, args.implementation, args.fraction, scratch)
        shutil.copytree(scratch, repo, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
        return f"{args.implementation}: +{args.fraction:.0%} execute CPU"
    page = heavier_page(repo, args.task)
    return f"task {args.task}: heavier page {page.name}"


def heavier_page(suite: Path, task_id: str) -> Path:
    """The task's scene page gets a script that builds and lays out a large table on load."""
    task = next(p for p in (suite / "tasks").rglob("*.json") if json.loads(p.read_text()).get(
        "task_id") == task_id)  # fmt: skip
    spec = json.loads(task.read_text())
    scene = spec.get("scene") or spec.get("fixture") or {}
    url = scene.get("url") if isinstance(scene, dict) else None
    name = Path(str(url or "")).name
    page = next(p for p in (suite / "fixtures").rglob("*.html") if p.name == name)
    extra = ("<script>(function(){var t=document.createElement('table');for(var i=0;i<4000;i++)"
             "{var r=t.insertRow();for(var j=0;j<8;j++){r.insertCell().textContent=i*j;}}"
             "document.body.appendChild(t);void document.body.offsetHeight;})();</script>")  # fmt: skip
    page.write_text(page.read_text().replace("</body>", extra + "</body>"))
    return page


def run_once(args: argparse.Namespace, work: Path, repo: Path, store: Path, label: str) -> dict:
    if args.suite == "compute":
        cmd = ["run", str(repo / "metewand.toml")]
    else:
        cmd = ["browser", "run", "--tasks", str(repo), "--engines", args.engines, "--k", "1"]
    started = time.monotonic()
    done = metewand(*cmd, "--out", str(work / "runs"), "--run-id", label, "--history",
                    str(store), "--no-progress", "--quiet", cwd=repo)  # fmt: skip
    checked = metewand("history", "check", "--fail-on-change", "--json", "--history", str(store),
                       *args.check_args, cwd=work)  # fmt: skip
    report = json.loads(checked.stdout) if checked.stdout.strip() else {}
    new = [c for s in report.get("suites", []) for c in s["change_points"] if c["recent"]]
    return {"run": label, "exit": done.returncode, "seconds": round(time.monotonic() - started, 1),
            "check_exit": checked.returncode, "new_changes": new, "stderr": done.stderr[-400:]}  # fmt: skip


def series(args: argparse.Namespace, work: Path, planted_at: int | None, name: str) -> dict:
    repo, source = prepare_tree(args, work / name)
    store = work / name / "history.duckdb"
    burn = {int(x) for x in args.burn_runs.split(",") if x}
    results, planted = [], None
    for i in range(1, args.runs + 1):
        if planted_at is not None and i == planted_at:
            planted = plant(args, repo, source)
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "-m", f"run {i}: {planted}")
        else:
            git(repo, "commit", "-q", "--allow-empty", "-m", f"run {i}")
        commit = git(repo, "rev-parse", "HEAD")[:10]
        hog = burner() if i in burn else None
        before = load()
        try:
            result = run_once(args, work / name, repo, store, f"{name}{i:02d}")
        finally:
            if hog is not None:
                stop(hog)
        result.update(commit=commit, burner=hog is not None, load_before=before, load_after=load())
        results.append(result)
        news = "; ".join(f"{c['subject']} {c['task'][:40]} {c['step']:+.1%}"
                         for c in result["new_changes"]) or "-"  # fmt: skip
        print(f"  {name} run {i:2d} commit {commit} burner={'on ' if hog else 'off'} "
              f"load {before} -> {result['load_after']} run exit {result['exit']} "
              f"{result['seconds']} s; check exit {result['check_exit']}; new steps: {news}",
              flush=True)  # fmt: skip
    final = metewand("history", "check", "--json", "--history", str(store), *args.check_args,
                     cwd=work)  # fmt: skip
    return {"name": name, "planted": planted, "runs": results,
            "final": json.loads(final.stdout)}  # fmt: skip


def judge(outcome: dict, planted_at: int | None, target: str) -> None:
    changes = [c for s in outcome["final"]["suites"] for c in s["change_points"]]
    metric = ",".join(s["metric"] for s in outcome["final"]["suites"])
    print(f"{outcome['name']}: {len(changes)} change point(s) over the whole history ({metric})")
    for c in changes:
        print(f"  {c['subject']} | {c['task'][:60]} | from run {c['run_id']} (position "
              f"{c['position']}, commit {str(c['commit'])[:10]}) step {c['step']:+.1%} "
              f"[{c['step_ci95'][0]:+.1%}, {c['step_ci95'][1]:+.1%}] p={c['p_value']:.2g} "
              f"noise {c['historical_noise']:.1%}")  # fmt: skip
    if planted_at is None:
        print(f"  A/A verdict: {'PASS' if not changes else 'FAIL'} (0 change points expected)")
        return
    groups = {s["groups"] for s in outcome["final"]["suites"]}
    hit = [c for c in changes if c["subject"] == target or c["task"] == target]
    right = [c for c in hit if c["position"] == planted_at]
    wrong = [c for c in changes if c not in right]
    flagged_at = [r["run"] for r in outcome["runs"] if r["new_changes"]]
    print(
        f"  groups: {groups}; planted groups found at run {planted_at}: {len(right)}; other "
        f"change points: {len(wrong)}; CI-style checks that exited 1: {flagged_at or 'none'}"
    )
    print(f"  verdict: {'PASS' if right and not wrong else 'FAIL'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", choices=["compute", "browser"], default="compute")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--implementation", default="python-heapsort")
    parser.add_argument("--fraction", type=float, default=0.15)
    parser.add_argument("--task", default="own_l2_has_selector")
    parser.add_argument("--engines", default="chrome,lightpanda")
    parser.add_argument("--burn-runs", default=None, help="Runs with the burner (1-based).")
    parser.add_argument("--metric", default=None)
    parser.add_argument("--keep", action="store_true", help="Keep the scratch directory.")
    args = parser.parse_args()
    args.runs = args.runs or (16 if args.suite == "compute" else 12)
    planted_at = 9 if args.suite == "compute" else 7
    if args.burn_runs is None:
        args.burn_runs = "3,4,11,12" if args.suite == "compute" else "3,9"
    args.check_args = ["--metric", args.metric] if args.metric else []
    target = args.implementation if args.suite == "compute" else args.task
    work = Path(tempfile.mkdtemp(prefix="metewand-hcp-"))
    print(f"history_changepoints ({args.suite}): {args.runs} runs, planted at run {planted_at}, "
          f"burner during runs {args.burn_runs}; load {load()}; scratch {work}", flush=True)  # fmt: skip
    try:
        started = time.monotonic()
        planted = series(args, work, planted_at, "planted")
        aa = series(args, work, None, "aa")
        print(f"planted: {planted['planted']}")
        judge(planted, planted_at, target)
        judge(aa, None, target)
        print(f"total {time.monotonic() - started:.0f} s; load at the end {load()}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
