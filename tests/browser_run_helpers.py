"""Helpers for browser run tests: the real corpus, a tiny corpus built on disk, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from metewand.suites.browser.driver_registry import DRIVER_PATHS
from shared_paths import LEXBENCH, lexbench_or_skip
from watchdog_helpers import kill_runner_and_watchdog

REPO = Path(__file__).resolve().parents[1]
__all__ = ["LEXBENCH", "lexbench_or_skip"]


def cli(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``metewand ARGS`` from the repository root; ``env``: variables added to this one's."""
    return subprocess.run(
        [sys.executable, "-m", "metewand", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src"), **(env or {})},
    )


def run_on_missing_engine(
    corpus: Path, out: Path, *extra: str, run_id: str = "r"
) -> subprocess.CompletedProcess[str]:
    """``metewand browser run`` of ``corpus`` on moli, an engine this machine lacks: what task
    validation, planning, the run directory and the rows do without launching anything."""
    args = ["--tasks", str(corpus), "--engines", "moli", "--out", str(out), "--run-id", run_id]
    return cli("browser", "run", *args, "--no-progress", *extra)


def run_killed_after_rows(run_args: list[str], out: Path, run_id: str, rows: int = 1) -> Path:
    """Start ``metewand browser run *run_args`` into ``out/run_id``, ``kill -9`` the runner as soon
    as ``results.jsonl`` holds ``rows`` lines, and return the run directory (what a resume finds)."""
    args = ["browser", "run", *run_args, "--out", str(out), "--run-id", run_id, "--no-progress"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "metewand", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    results = out / run_id / "results.jsonl"
    try:
        deadline = time.monotonic() + 120
        while not (results.exists() and results.read_text().count("\n") >= rows):
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "the run produced no rows in time"
            time.sleep(0.01)
        kill_runner_and_watchdog(proc.pid)  # else the watchdog leaves nothing to sweep
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    return out / run_id


def configured_adapters(tmp_path: Path, template: str, modes: dict[str, str]) -> dict[str, str]:
    """The CLI's environment with, per driver path key in ``modes``, a Python adapter written
    from ``template`` (formatted with ``python`` and that key's ``mode``) configured in place
    of the path's own (its ``METEWAND_<KEY>_ADAPTER``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    for key, mode in modes.items():
        script = tmp_path / f"{key}_adapter.py"
        script.write_text(template.format(python=sys.executable, mode=mode))
        script.chmod(0o755)
        env[DRIVER_PATHS[key].env_variable] = str(script)
    return env


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not: it only waits to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def rows_of(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def manifest_of(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / "run_manifest.json").read_text()))


ABOUT_BLANK_TASK: dict[str, Any] = {
    "artifact_profile": "l1_standard",
    "description": "Evaluates 1+1 on about:blank.",
    "driver": {
        "kind": "raw_cdp",
        "steps": [
            {
                "method": "Runtime.evaluate",
                "params": {"expression": "1+1", "returnByValue": True},
                "save_as": "value",
            },
        ],
    },
    "features": ["cdp.runtime.evaluate"],
    "grader": {"kind": "inline_assertions", "checks": [{"kind": "value_equals", "expected": 2}]},
    "layer": "L1",
    "scene": {"kind": "about_blank"},
    "subset_id": "t.raw",
    "tags": ["tiny"],
    "task_id": "tiny_eval",
    "task_version": 1,
    "timeouts": {"hard_kill_ms": 20000, "task_ms": 10000},
}


def driver_task(
    task_id: str,
    kind_and_subset: tuple[str, str],
    steps: list[dict[str, Any]],
    checks: list[dict[str, Any]],
    description: str,
    scene: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An L1 task of a driver path (its task kind and subset), graded by its steps' checks."""
    kind, subset = kind_and_subset
    return {
        "artifact_profile": "l1_standard",
        "description": description,
        "driver": {"kind": kind, "steps": steps, "checks": checks},
        "features": ["cdp.runtime.evaluate"],
        "grader": {"kind": "inline_assertions", "checks": []},
        "layer": "L1",
        "scene": scene or {"kind": "about_blank"},
        "subset_id": subset,
        "tags": ["tiny"],
        "task_id": task_id,
        "task_version": 1,
        "timeouts": {"hard_kill_ms": 45000, "task_ms": 30000},
    }


def driver_corpus(root: Path, tasks: dict[str, dict[str, Any]]) -> Path:
    """A tiny corpus holding ``tasks`` (task id -> driver task), a subset each, with the peer's
    driver binding catalog."""
    tiny_corpus(root, {f"{task_id}.json": task for task_id, task in tasks.items()})
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["layers"][0]["subsets"] = [
        {
            "subset_id": task["subset_id"],
            "driver": task["driver"]["kind"],
            "task_glob": f"tasks/{task_id}.json",
        }
        for task_id, task in tasks.items()
    ]
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / "config").mkdir()
    catalog = "browser_driver_bindings.json"
    shutil.copy(lexbench_or_skip() / "config" / catalog, root / "config" / catalog)
    return root


def tiny_corpus(root: Path, tasks: dict[str, Any]) -> Path:
    """A corpus with one subset ``t.raw``; ``tasks`` maps file name -> JSON value or raw text."""
    (root / "fixtures").mkdir(parents=True)
    (root / "fixtures" / "routes.json").write_text("{}")
    (root / "tasks").mkdir()
    manifest = {
        "bench_id": "tiny",
        "bench_version": "0.0.1",
        "default_k_runs": 1,
        "layers": [
            {
                "layer_id": "L1",
                "subsets": [
                    {"subset_id": "t.raw", "driver": "raw_cdp", "task_glob": "tasks/*.json"}
                ],
            }
        ],
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    for name, value in tasks.items():
        text = value if isinstance(value, str) else json.dumps(value)
        (root / "tasks" / name).write_text(text)
    return root
