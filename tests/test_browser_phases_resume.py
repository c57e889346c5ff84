"""``browser run --resume`` and the phase-mark choice (issue #16): a resume keeps the run's
recorded choice; the other flag is refused with exit 2 naming it, the run left as it was. And a
baseline run (the A/B's unobserved side) takes no marks unless asked, and a marked one cannot
calibrate a profiled run. Real Chrome, a real runner killed with SIGKILL mid-run."""

from __future__ import annotations

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
from metewand.compare.calibration import calibrate
from metewand.compare.rundir import load_run

pytestmark = pytest.mark.engines

SLOW_TASK = {
    **ABOUT_BLANK_TASK,
    "task_id": "tiny_slow",
    "description": "Sleeps 1 s, then evaluates 1+1 on about:blank.",
    "driver": {
        "kind": "raw_cdp",
        "steps": [
            {"sleep_ms": 1000},
            {
                "method": "Runtime.evaluate",
                "params": {"expression": "1+1", "returnByValue": True},
                "save_as": "value",
            },
        ],
    },
}
RUN_ARGS = ("--engines", "chrome", "--host-telemetry", "off", "--no-progress")


def _killed_after_first_row(corpus: Path, out: Path, run_id: str, *flags: str) -> Path:
    # the second attempt is sleeping in its task when the runner dies
    return run_killed_after_rows(
        ["--tasks", str(corpus), "--k", "3", *RUN_ARGS, *flags], out, run_id
    )


@pytest.mark.parametrize(
    ("started", "contradicting"),
    [
        ("--no-phase-marks", "--phase-marks"),
        ("--phase-marks", "--no-phase-marks"),
    ],
)
def test_a_resume_keeps_the_recorded_marks_and_refuses_the_other_flag(
    tmp_path: Path, started: str, contradicting: str
) -> None:
    resolved_or_skip("chrome")
    corpus = tiny_corpus(tmp_path / "corpus", {"slow.json": SLOW_TASK})
    run_dir = _killed_after_first_row(corpus, tmp_path / "runs", "cut", started)
    marked = started == "--phase-marks"
    assert manifest_of(run_dir)["data"]["phase_marks"] is marked
    before = {
        p.name: p.read_bytes() for p in (run_dir / "run_manifest.json", run_dir / "results.jsonl")
    }

    refused = cli("browser", "run", "--resume", str(run_dir), contradicting, "--no-progress")
    assert refused.returncode == 2, refused.stderr
    assert f"was run with {started}; resuming with {contradicting}" in refused.stderr
    assert "Traceback" not in refused.stderr
    # nothing changed: no resumed_at, no state change, no row
    assert {p: (run_dir / p).read_bytes() for p in before} == before

    same = cli("browser", "run", "--resume", str(run_dir), started, "--no-progress")
    assert same.returncode == 0, same.stderr  # the recorded flag itself is no contradiction
    rows = rows_of(run_dir)
    assert len(rows) == 3 and manifest_of(run_dir)["state"] == "complete"
    assert manifest_of(run_dir)["data"]["phase_marks"] is marked
    for row in rows:  # every attempt, before and after the kill, as the run was started
        assert ("phases" in row) is marked, row["key"]


def test_a_resume_without_the_flag_keeps_no_marks(tmp_path: Path) -> None:
    resolved_or_skip("chrome")
    corpus = tiny_corpus(tmp_path / "corpus", {"slow.json": SLOW_TASK})
    run_dir = _killed_after_first_row(corpus, tmp_path / "runs", "cut", "--no-phase-marks")
    done = cli("browser", "run", "--resume", str(run_dir), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "2 of 3 attempts to run" in done.stderr
    rows = rows_of(run_dir)
    assert len(rows) == 3 and not any("phases" in row for row in rows)


def test_a_baseline_is_unmarked_by_default_and_a_marked_one_cannot_calibrate(
    tmp_path: Path,
) -> None:
    resolved_or_skip("chrome")
    corpus = tiny_corpus(tmp_path / "corpus", {"tiny.json": ABOUT_BLANK_TASK})
    out = tmp_path / "runs"
    common = (
        "--tasks",
        str(corpus),
        "--k",
        "1",
        *RUN_ARGS,
        "--out",
        str(out),
        "--cold-start-samples",
        "0",
    )
    for run_id, flags in (("base", ()), ("base_marked", ("--phase-marks",))):
        done = cli(
            "browser", "run", *common, "--resource-profile", "baseline", "--run-id", run_id, *flags
        )
        assert done.returncode == 0, done.stderr
    assert manifest_of(out / "base")["data"]["phase_marks"] is False
    assert not any("phases" in row for row in rows_of(out / "base"))
    assert manifest_of(out / "base_marked")["data"]["phase_marks"] is True

    refused = cli(
        "browser",
        "run",
        *common,
        "--resource-profile",
        "engine",
        "--run-id",
        "p1",
        "--resource-calibration-baseline",
        "base_marked",
    )
    assert refused.returncode == 2, refused.stderr
    assert "ran with --phase-marks: the A/B's baseline must run unobserved" in refused.stderr
    assert not (out / "p1").exists()

    done = cli(
        "browser",
        "run",
        *common,
        "--resource-profile",
        "engine",
        "--run-id",
        "p2",
        "--resource-calibration-baseline",
        "base",
    )
    assert done.returncode == 0, done.stderr
    profiled = load_run(out / "p2")
    assert manifest_of(out / "p2")["data"]["phase_marks"] is True  # the profiled side is marked
    for baseline, marked in (("base", False), ("base_marked", True)):
        base = load_run(out / baseline)
        result = calibrate(base.manifest, base.rows, profiled.manifest, profiled.rows)
        check = next(c for c in result["checks"] if c["name"] == "profile_modes")
        assert check["passed"] is not marked, check
        assert check["figures"]["baseline_phase_marks"] is marked
        assert check["figures"]["profiled_phase_marks"] is True
