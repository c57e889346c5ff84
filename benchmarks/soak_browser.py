"""Browser soak (issue 12, acceptance 2): random ``kill -9`` of a real chrome + lightpanda run,
then ``--resume``, N times; then a last ``--resume`` to the end, and a count of what was lost.

    .venv/bin/python benchmarks/soak_browser.py [--cycles 10] [--k 2] [--seed 1]
                                                [--engines chrome,lightpanda]
                                                [--resource-profile off|baseline|engine]

Each cycle starts ``metewand browser run`` (the first) or ``--resume`` (the others) as a real
process, waits for 0-4 new rows (0: the kill lands in start-up or engine launch) and a random
0-1 s more, and sends SIGKILL to the runner alone: its engines live on,
re-parented, as after a real crash, and the next ``--resume`` must find and end them. Figures:

- rows lost: planned attempt keys without a row after the final resume;
- rows duplicated: rows whose key appeared before; torn lines: lines that are not JSON;
- processes left: live processes carrying this run's marker, or in a recorded engine session;
- groups left: accounting groups (``metewand-<run id>-...``) still in /sys/fs/cgroup;
- temporary dirs left: engine private roots in the temp dir owned by this run.

What was found is then removed (this run's recorded engines and its empty groups only), so the
soak itself leaves nothing on a shared host.

All must be 0. The run goes to a temporary directory, removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from metewand.suites.browser import private_dirs
from metewand.suites.browser.leftovers import kill_leftovers, marked_processes, run_processes
from metewand.suites.browser.run_config import RunConfig
from metewand.suites.browser.run_plan import build_plan

CGROUP_ROOT = Path("/sys/fs/cgroup")
NEW_ROWS = (0, 4)  # the kill comes after this many new rows (0: during start-up) ...
KILL_DELAY_S = (0.0, 1.0)  # ... and this much later, so it lands anywhere in an attempt
ROW_WAIT_LIMIT_S = 120
FINAL_LIMIT_S = 1800


def _metewand(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "metewand", "browser", "run", *args, "--no-progress", "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _kill_at(proc: subprocess.Popen[bytes], run_dir: Path, new_rows: int, delay_s: float) -> str:
    """SIGKILL the runner once it wrote ``new_rows`` more rows, ``delay_s`` later (0 new rows:
    during start-up, engine launch included), unless it ended first; says which happened."""
    started = time.monotonic()
    results = run_dir / "results.jsonl"
    while not results.exists() and proc.poll() is None and time.monotonic() - started < 60:
        time.sleep(0.05)  # the first run's directory must exist, or there is nothing to resume
    before = len(_rows(run_dir)[0]) if results.exists() else 0
    while proc.poll() is None and time.monotonic() - started < ROW_WAIT_LIMIT_S:
        if len(_rows(run_dir)[0]) >= before + new_rows:
            break
        time.sleep(0.05)
    time.sleep(delay_s)
    if proc.poll() is not None:
        err = proc.stderr.read().decode("utf-8", "replace")[-300:] if proc.stderr else ""
        return f"ended (exit {proc.returncode}) before the kill {err!r}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return f"killed {delay_s:.2f} s after {new_rows} new row(s)"


def _rows(run_dir: Path) -> tuple[list[dict[str, Any]], int]:
    rows, torn = [], 0
    for line in (run_dir / "results.jsonl").read_bytes().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            torn += 1
    return rows, torn


def _groups_left(run_id: str) -> list[str]:
    found = []
    for top, dirs, _files in os.walk(CGROUP_ROOT):
        for name in dirs:
            if name.startswith("metewand-") and run_id in name:
                found.append(os.path.join(top, name))
        if top.count(os.sep) - str(CGROUP_ROOT).count(os.sep) >= 6:
            dirs.clear()  # groups are created near the top; do not walk the whole tree
    return sorted(found)


def _temp_dirs_left(run_id: str) -> list[str]:
    found = []
    for root in Path(tempfile.gettempdir()).glob(private_dirs.PREFIX + "*"):
        try:
            if (root / private_dirs.OWNER_FILE).read_text() == run_id:
                found.append(str(root))
        except OSError:
            continue
    return sorted(found)


def soak(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    run_id = f"soakb-{uuid.uuid4().hex[:8]}"
    run_dir = out / run_id
    first = [
        "--engines",
        args.engines,
        "--k",
        str(args.k),
        "--seed",
        "soak",
        "--out",
        str(out),
        "--run-id",
        run_id,
        "--resource-profile",
        args.resource_profile,
        "--cold-start-samples",
        "0",
    ]
    cycles = []
    for cycle in range(args.cycles):
        resume = ["--resume", str(run_dir), "--out", str(out)]
        proc = _metewand(first if cycle == 0 else resume)
        what = _kill_at(proc, run_dir, rng.randint(*NEW_ROWS), rng.uniform(*KILL_DELAY_S))
        rows, _torn = _rows(run_dir) if run_dir.is_dir() else ([], 0)
        orphans = len(run_processes(run_dir, run_id)) if run_dir.is_dir() else 0
        cycles.append({"cycle": cycle, "what": what, "rows": len(rows), "orphans": orphans})
        print(
            f"cycle {cycle:2}: {what}; rows so far {len(rows)}; engine processes orphaned "
            f"{orphans}",
            flush=True,
        )
    final = _metewand(["--resume", str(run_dir), "--out", str(out)])
    _out, err = final.communicate(timeout=FINAL_LIMIT_S)
    result = _count(run_dir, run_id)
    result.update(
        cycles=cycles,
        final_exit=final.returncode,
        final_stderr_tail=err.decode("utf-8", "replace")[-400:],
    )
    _clean_up(run_dir, run_id, result)
    return result


def _clean_up(run_dir: Path, run_id: str, counted: dict[str, Any]) -> None:
    """After counting: end what this run left on the shared host (its own pids and groups)."""
    kill_leftovers(run_dir, run_id)
    for group in counted["groups_left"]:
        with contextlib.suppress(OSError):  # a group with members left: reported above
            os.rmdir(group)


def _count(run_dir: Path, run_id: str) -> dict[str, Any]:
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    plan = build_plan(RunConfig.from_json(manifest["data"]["config"]))
    planned = {a.key for a in plan.attempts}
    rows, torn = _rows(run_dir)
    keys = [str(r["key"]) for r in rows]
    return {
        "run_id": run_id,
        "state": manifest["state"],
        "planned": len(planned),
        "rows": len(rows),
        "rows_lost": len(planned - set(keys)),
        "rows_duplicated": len(keys) - len(set(keys)),
        "rows_unplanned": len(set(keys) - planned),
        "torn_lines": torn,
        "processes_left": sorted(
            set(marked_processes(run_id)) | set(run_processes(run_dir, run_id))
        ),
        "groups_left": _groups_left(run_id),
        "temp_dirs_left": _temp_dirs_left(run_id),
        "staging_left": sorted(p.name for p in (run_dir / ".staging").glob("*"))
        if (run_dir / ".staging").is_dir()
        else [],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--engines", default="chrome,lightpanda")
    parser.add_argument(
        "--resource-profile", default="baseline", choices=("off", "baseline", "engine")
    )
    parser.add_argument("--keep", action="store_true", help="Keep the run directory.")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="metewand-soak-browser-"))
    try:
        result = soak(args, out)
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    print(json.dumps(result, indent=2))
    counts = ("rows_lost", "rows_duplicated", "rows_unplanned", "torn_lines")
    lists = ("processes_left", "groups_left", "temp_dirs_left", "staging_left")
    bad = [c for c in counts if result[c]] + [name for name in lists if result[name]]
    ok = not bad and result["final_exit"] == 0 and result["state"] == "complete"
    print("soak: " + ("all 0" if ok else f"NOT clean: {bad or result['final_exit']}"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
