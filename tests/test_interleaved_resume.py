"""An interleaved calibration cut by ``kill -9`` between the two attempts of a pair: on
``--resume`` the missing half runs on a freshly launched engine, so the pair is not the same
process any more. It is counted as such and left out of the observer figures (calibration
record, resource summary, card); the pairs run whole after the resume still count. Real Chrome,
a real runner killed with SIGKILL."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from browser_engine_fixtures import resolved_or_skip
from browser_run_helpers import (
    ABOUT_BLANK_TASK,
    cli,
    manifest_of,
    rows_of,
    run_killed_after_rows,
    tiny_corpus,
)
from metewand.compare.calibration import calibrate_interleaved, same_engine_process
from metewand.compare.rundir import load_run
from metewand.runtime.schemas import violations
from metewand.suites.browser.leftovers import run_processes

pytestmark = pytest.mark.engines

# long enough that the runner is surely killed while the pair's second attempt sleeps
SLOW_TASK = {
    **ABOUT_BLANK_TASK,
    "task_id": "tiny_slow",
    "description": "Sleeps 1.5 s, then evaluates 1+1 on about:blank.",
    "driver": {
        "kind": "raw_cdp",
        "steps": [
            {"sleep_ms": 1500},
            {
                "method": "Runtime.evaluate",
                "params": {"expression": "1+1", "returnByValue": True},
                "save_as": "value",
            },
        ],
    },
}
K = 2


def _kill_after_first_row(corpus: Path, out: Path, run_id: str) -> Path:
    # the pair's other half is sleeping in its task when the runner dies
    return run_killed_after_rows(
        [
            "--tasks",
            str(corpus),
            "--engines",
            "chrome",
            "--k",
            str(K),
            "--resource-profile",
            "engine",
            "--resource-calibration",
            "interleaved",
            "--cold-start-samples",
            "0",
            "--host-telemetry",
            "off",
        ],
        out,
        run_id,
    )


def test_a_pair_cut_by_a_kill_is_not_same_process_and_stays_out_of_the_figures(
    tmp_path: Path,
) -> None:
    resolved_or_skip("chrome")
    run_id = f"ilv-cut-{os.getpid()}"
    corpus = tiny_corpus(tmp_path / "corpus", {"slow.json": SLOW_TASK})
    run_dir = _kill_after_first_row(corpus, tmp_path / "runs", run_id)
    first = rows_of(run_dir)
    assert len(first) == 1, "the kill was meant to fall between the two halves of pair 1"

    done = cli("browser", "run", "--resume", str(run_dir), "--no-progress")
    assert done.returncode == 0, done.stderr
    # this session ran 3 of the 4 attempts: 1 profiled and 2 twins, the twins counted apart
    assert "3 of 4 attempts to run" in done.stderr
    table = {line.strip(" │┃") for line in done.stderr.splitlines()}
    assert any(line.startswith("pass, not scored") and line.endswith("2") for line in table)
    assert manifest_of(run_dir)["state"] == "complete"
    assert run_processes(run_dir, run_id) == []
    rows = rows_of(run_dir)
    assert len(rows) == 2 * K and rows[0] == first[0]
    by_pair: dict[int, list[dict[str, object]]] = {}
    for row in rows:
        by_pair.setdefault(int(row["attempt"]), []).append(row)
    cut, whole = by_pair[1], by_pair[2]
    # the cut pair's halves ran on two launches; the pair run after the resume on one
    assert not same_engine_process(cut[0], cut[1])
    assert cut[0]["engine_process"]["launch_id"] != cut[1]["engine_process"]["launch_id"]
    assert same_engine_process(whole[0], whole[1])

    run = load_run(run_dir)
    calibration = calibrate_interleaved(run.manifest, run.rows, run.calibration_twins)
    assert violations("metewand_calibration-1", calibration) == []
    assert calibration["not_same_process"]["pairs"] == 1
    assert calibration["not_same_process"]["examples"] == [["tiny_slow", "chrome", 1]]
    # the pair run after the resume is not the new process's first: it alone gives figures
    assert calibration["first_on_launch"]["pairs"] == 0
    assert calibration["overall"]["pairs"] == 1
    assert calibration["by_engine"]["chrome"]["pairs"] == 1
    order = calibration["order"]
    assert sum(order.values()) == 1
    checks = {c["name"]: c for c in calibration["checks"]}
    assert checks["fully_paired"]["passed"], checks["fully_paired"]["reason"]

    summary = json.loads((run_dir / "resource_summary.json").read_text())
    observer = summary["observer_effect"]
    assert observer["calibration_mode"] == "interleaved"
    assert observer["pairs_not_same_process"] == 1 and observer["matched_attempts"] == 1
    card = (run_dir / "resource-card.md").read_text()
    assert "1 pair(s) ran their two attempts on different engine processes" in card


def test_whole_pairs_are_same_process_and_old_rows_fall_back_to_worker_generation_pid() -> None:
    """The rule itself on rows: a launch id decides; without one on both sides, worker,
    generation and pid; one side with an id and one without cannot be the same launch."""
    one = {"engine_process": {"worker": 0, "generation": 1, "pid": 10, "launch_id": "a"}}
    assert same_engine_process(one, one)
    other = {"engine_process": {"worker": 0, "generation": 1, "pid": 10, "launch_id": "b"}}
    assert not same_engine_process(one, other)
    old = {"engine_process": {"worker": 0, "generation": 1, "pid": 10}}
    assert same_engine_process(old, dict(old)) and not same_engine_process(old, one)
    assert not same_engine_process(old, {"engine_process": {**old["engine_process"], "pid": 11}})
    assert not same_engine_process(old, {"engine_process": None})
