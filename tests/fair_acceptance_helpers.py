"""Real browser runs for the fair-comparison acceptance tests: the built-in suite, one cheap task
unless told otherwise, every eligibility condition satisfiable except the one under test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from metewand.compare.generate import write_after_run
from metewand.suites.browser.run_config import ResourceOptions, RunConfig, builtin_suite_dir
from metewand.suites.browser.runner import run_browser

CHEAP_TASK = "own_eval_values"  # passes on chrome and lightpanda in ~0.3 s


def run(
    out: Path,
    run_id: str,
    *,
    profile: str = "engine",
    engines: tuple[str, ...] = ("chrome", "lightpanda"),
    k: int = 5,
    jobs: int = 1,
    seed: str = "acc",
    tasks: tuple[str, ...] = (CHEAP_TASK,),
    baseline: str | None = None,
    interval_ms: int = 500,
    calibration: str | None = None,
) -> Path:
    resource = ResourceOptions(
        profile=profile,
        sample_interval_ms=interval_ms,
        calibration_baseline=baseline,
        calibration=calibration,
        cold_start_samples=0,
        host_sample_interval_s=0.5,
    )
    config = RunConfig(
        str(builtin_suite_dir()),
        engines,
        k=k,
        seed=seed,
        jobs=jobs,
        task_ids=tasks,
        resource=resource,
    )
    result = run_browser(config, out, run_id, echo=lambda _text: None)
    assert result.exit_code == 0 and result.run_dir is not None
    write_after_run(result.run_dir)  # what the CLI does after a run: the derived files
    return result.run_dir


def summary_of(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / "resource_summary.json").read_text()))


def conditions_of(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in summary_of(run_dir)["eligibility_conditions"]}


def rows_of(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]
