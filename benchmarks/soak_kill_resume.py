"""Soak: random ``kill -9`` of a compute run, then ``--resume``, many times; count what went wrong.

A copy of examples/sorting (materializer, C build, evaluator, three implementations) with more
repetitions runs as a real ``metewand run`` subprocess. Each cycle starts it (the first time) or
resumes it, waits a random time, and kills it with SIGKILL. After the last kill one more
``--resume`` runs to the end. Then it counts, and prints as one JSON object:

- rows_lost: planned attempt keys without a row;
- rows_duplicated: rows beyond one per key;
- rows_without_artifacts: rows whose artifact directory is missing;
- processes_left: live processes whose command line names the soak's directory, plus live
  processes recorded (pid and start time) in any session's owned.jsonl;
- groups_left: accounting groups recorded in any session's owned.jsonl that still exist, and
  groups in any hierarchy named after a metewand pid of the soak;
- temp_dirs_left: the run's .staging and .work, the cache's staging-* dirs, and anything in the
  private TMPDIR the runs were given.

All must be 0. ``--browser-cycles N`` then does the same to a ``metewand browser run`` of chrome and
lightpanda on the built-in suite with the engine resource profile (its planned keys come from the
run manifest; processes are also found by the run marker in their environment).

Usage: ``.venv/bin/python benchmarks/soak_kill_resume.py [--cycles 20] [--browser-cycles 10]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "sorting"


def prepare(work: Path, repetitions: int) -> Path:
    bench = work / "sorting"
    shutil.copytree(EXAMPLE, bench)
    manifest = bench / "metewand.toml"
    text = manifest.read_text().replace("repetitions = 2", f"repetitions = {repetitions}")
    manifest.write_text(text)
    (work / "tmp").mkdir()
    return manifest


def metewand(work: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TMPDIR": str(work / "tmp")}
    if args[0] == "browser":
        common = ["--out", str(work / "runs"), "--quiet"]
    else:
        args = ("run", *args)
        common = ["--out", str(work / "runs"), "--cache-dir", str(work / "cache"), "-q"]
    return subprocess.Popen(
        [sys.executable, "-m", "metewand", *args, *common],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def snapshot_journal(run_dir: Path, seen: list[dict[str, Any]]) -> None:
    """Keep every record a session wrote (a clean finish deletes the journal)."""
    path = run_dir / "owned.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record not in seen:
                seen.append(record)


def row_count(run_dir: Path) -> int:
    path = run_dir / "results.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


# The browser soak: chrome + lightpanda on the built-in suite with the engine resource profile
# (so engine accounting groups exist to be left behind).
BROWSER_RUN = (
    "browser",
    "run",
    "--engines",
    "chrome,lightpanda",
    "--k",
    "1",
    "--resource-profile",
    "engine",
    "--cold-start-samples",
    "1",
    "--host-telemetry",
    "off",
    "--no-progress",
)


def cycles(
    work: Path, manifest: Path | None, count: int, rng: random.Random, run_id: str = "soak"
) -> dict[str, Any]:
    run_dir = work / "runs" / run_id
    seen: list[dict[str, Any]] = []
    pids: list[int] = []
    kills = []
    browser = manifest is None
    longest = 12.0 if browser else 4.0
    for cycle in range(count):
        if browser:
            args = (
                [*BROWSER_RUN, "--run-id", run_id]
                if cycle == 0
                else ["browser", "run", "--resume", run_id, "--no-progress"]
            )
        else:
            args = [str(manifest), "--run-id", run_id] if cycle == 0 else ["--resume", run_id]
        proc = metewand(work, *args)
        pids.append(proc.pid)
        # The first kill comes after the run directory exists: before it, there is nothing to
        # resume (a kill then leaves nothing either; that case is not what this soak counts).
        while cycle == 0 and not (run_dir / "run_manifest.json").exists() and proc.poll() is None:
            time.sleep(0.01)
        delay = rng.uniform(0.3, longest)
        try:
            proc.wait(delay)
            finished = True
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            finished = False
        snapshot_journal(run_dir, seen)
        kills.append(
            {
                "cycle": cycle,
                "after_s": round(delay, 2),
                "rows": row_count(run_dir),
                "finished_before_kill": finished,
            }
        )
    final = metewand(
        work,
        *(
            ["browser", "run", "--resume", run_id, "--no-progress"]
            if browser
            else ["--resume", run_id]
        ),
    )
    pids.append(final.pid)
    _, err = final.communicate(timeout=1800)
    snapshot_journal(run_dir, seen)
    return {
        "kills": kills,
        "final_exit": final.returncode,
        "final_stderr": err.decode()[-500:],
        "journal": seen,
        "pids": pids,
    }


def live_processes(work: Path, journal: list[dict[str, Any]], marker: bytes) -> list[int]:
    """Live processes naming the soak's directory, carrying the run marker, or recorded."""
    recorded = {(r["pid"], r.get("starttime")) for r in journal if r.get("kind") == "process"}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            environ = b""
        mine = str(work).encode() in cmdline or marker in environ
        if mine or (int(entry.name), int(fields[19])) in recorded:
            found.append(int(entry.name))
    return found


def groups_left(journal: list[dict[str, Any]], pids: list[int], run_id: str) -> list[str]:
    left = [r["path"] for r in journal if r.get("kind") == "group" and os.path.isdir(r["path"])]
    tags = [f"-{pid}-" for pid in pids] + [f"-{run_id}-"]
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        for name in dirs:
            if name.startswith("metewand-") and any(tag in name for tag in tags):
                left.append(os.path.join(root, name))
    return sorted(set(left))


def temp_dirs_left(work: Path, run_id: str) -> list[str]:
    run_dir = work / "runs" / run_id
    left = [str(run_dir / n) for n in (".staging", ".work") if (run_dir / n).exists()]
    datasets = work / "cache" / "datasets"
    if datasets.exists():
        left += [str(p) for p in datasets.iterdir() if p.name.startswith("staging-")]
    left += [str(p) for p in (work / "tmp").iterdir()]
    return left


def planned_keys(manifest: Path | None, run_dir: Path) -> set[str]:
    if manifest is None:  # a browser run's plan is rebuilt from the config it recorded
        from metewand.suites.browser.run_plan import build_plan
        from metewand.suites.browser.runner import CONFIG_KEY, RunConfig

        data = json.loads((run_dir / "run_manifest.json").read_text())["data"]
        return {a.key for a in build_plan(RunConfig.from_json(data[CONFIG_KEY])).attempts}
    planned = subprocess.run(
        [sys.executable, "-m", "metewand", "plan", str(manifest), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return {json.loads(line)["key"] for line in planned}


def count(
    work: Path, manifest: Path | None, outcome: dict[str, Any], run_id: str = "soak"
) -> dict[str, Any]:
    run_dir = work / "runs" / run_id
    keys = planned_keys(manifest, run_dir)
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    row_keys = [r["key"] for r in rows]
    journal = outcome["journal"]
    return {
        "cycles": len(outcome["kills"]),
        "killed_mid_run": sum(not k["finished_before_kill"] for k in outcome["kills"]),
        "final_exit": outcome["final_exit"],
        "planned": len(keys),
        "rows": len(rows),
        "by_status": {s: sum(r["status"] == s for r in rows) for s in {r["status"] for r in rows}},
        "rows_lost": len(keys - set(row_keys)),
        "rows_duplicated": len(row_keys) - len(set(row_keys)),
        "rows_without_artifacts": sum(
            isinstance(r.get("artifacts"), str) and not (run_dir / r["artifacts"]).is_dir()
            for r in rows
        ),
        "processes_left": live_processes(work, journal, f"METEWAND_RUN_ID={run_id}".encode()),
        "groups_left": groups_left(journal, outcome["pids"], run_id),
        "temp_dirs_left": temp_dirs_left(work, run_id),
        "groups_recorded": sum(r.get("kind") == "group" for r in journal),
        "processes_recorded": sum(r.get("kind") == "process" for r in journal),
        "rows_at_each_kill": [k["rows"] for k in outcome["kills"]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repetitions", type=int, default=6)
    parser.add_argument(
        "--browser-cycles",
        type=int,
        default=0,
        help="Then as many on a chrome+lightpanda built-in-suite run (0: none).",
    )
    parser.add_argument("--keep", action="store_true", help="Keep the work directory.")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mw-soak-"))
    rng = random.Random(args.seed)
    results = {}
    try:
        manifest = prepare(work, args.repetitions)
        if args.cycles:
            results["compute"] = count(work, manifest, cycles(work, manifest, args.cycles, rng))
            print(json.dumps({"seed": args.seed, **results}, indent=1), flush=True)
        if args.browser_cycles:
            outcome = cycles(work, None, args.browser_cycles, rng, run_id="soakb")
            results["browser"] = count(work, None, outcome, run_id="soakb")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"seed": args.seed, **results}, indent=1))
    return 0 if all(_clean(figures) for figures in results.values()) else 1


def _clean(figures: dict[str, Any]) -> bool:
    bad = ("rows_lost", "rows_duplicated", "rows_without_artifacts")
    clean = all(figures[k] == 0 for k in bad) and not any(
        figures[k] for k in ("processes_left", "groups_left", "temp_dirs_left")
    )
    return clean and figures["final_exit"] == 0


if __name__ == "__main__":
    raise SystemExit(main())
