"""``metewand plan/run --experiment NAME``: only the named experiments of the manifest, with the
attempts (keys, order, seeds) a whole-manifest plan gives them; an unknown name is refused
before anything is written. (Resuming keeps the selection: test_compute_interrupt.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from shared_paths import REPO_ROOT

SORTING = REPO_ROOT / "examples" / "sorting" / "metewand.toml"


def _metewand(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metewand", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _plan(*args: str, cwd: Path) -> list[dict]:
    done = _metewand("plan", str(SORTING), "--json", *args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_selected_experiment_plans_what_the_whole_plan_gives_it(tmp_path: Path) -> None:
    whole = _plan(cwd=tmp_path)
    for name in ("scaling", "presorted"):
        selected = _plan("--experiment", name, cwd=tmp_path)
        assert selected == [a for a in whole if a["key"].startswith(f"{name}/")], name
    both = _plan("--experiment", "presorted", "--experiment", "scaling", cwd=tmp_path)
    assert both == whole  # the manifest's order, whatever the flags' order


def test_an_unknown_experiment_is_refused_naming_the_manifest(tmp_path: Path) -> None:
    for command in ("plan", "run"):
        done = _metewand(command, str(SORTING), "--experiment", "nope", cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert (
            "metewand.toml: --experiment nope: no such experiment "
            "(the manifest has: scaling, presorted)" in done.stderr
        )
        assert not (tmp_path / "runs").exists(), "a refused run left a run directory"


def test_a_run_of_one_experiment_records_it_and_runs_only_its_attempts(tmp_path: Path) -> None:
    planned = _plan("--experiment", "presorted", cwd=tmp_path)
    done = _metewand(
        "run",
        str(SORTING),
        "--experiment",
        "presorted",
        "--run-id",
        "p",
        "--no-report",
        "--no-history",
        "--quiet",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "runs" / "p"
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(r["key"] for r in rows) == sorted(a["key"] for a in planned)
    assert {r["status"] for r in rows} == {"accepted"}
    data = json.loads((run_dir / "run_manifest.json").read_text())["data"]
    assert data["selected_experiments"] == ["presorted"]
    assert data["planned_attempts"] == len(planned)
