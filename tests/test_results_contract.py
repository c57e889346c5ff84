"""The results contract: a run writes rows and raw files, and the derived files come from the one
writer ``metewand report`` uses, so a run's own derived files equal what ``report`` regenerates."""

from __future__ import annotations

from pathlib import Path

import pytest

from browser_run_helpers import ABOUT_BLANK_TASK, cli, tiny_corpus
from compute_helpers import problem, python_impl, write_manifest

DERIVED = ("scores.json", "resource_summary.json", "resource-card.md")


@pytest.mark.engines
def test_a_profiled_browser_run_leaves_what_report_regenerates(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    runs = tmp_path / "runs"
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        "chrome",
        "--k",
        "2",
        "--resource-profile",
        "engine",
        "--cold-start-samples",
        "0",
        "--out",
        str(runs),
        "--resource-calibration",
        "peer-ab",
        "--run-id",
        "prof",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    assert "resource summary: resource_comparison_eligible=False" in done.stderr
    run = runs / "prof"
    again = cli("report", str(run), "--format", "json", "--out", str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr
    for name in DERIVED:
        assert (run / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name


def test_a_compute_run_derives_nothing_until_report(tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path,
        problem()
        + python_impl("fine", "ok")
        + """
[[experiments]]
name = "contract"
problem = "answer"
implementations = ["fine"]
""",
    )
    runs = tmp_path / "runs"
    done = cli(
        "run",
        str(manifest),
        "--out",
        str(runs),
        "--run-id",
        "c",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    run = runs / "c"
    assert sorted(p.name for p in run.glob("[!.]*") if p.is_file()) == [
        "host_summary.json",
        "host_telemetry.jsonl",
        "results.jsonl",
        "run_manifest.json",
    ]
    report = cli("report", str(run), "--format", "json,md")
    assert report.returncode == 0, report.stderr
    assert (run / "scores.json").is_file() and (run / "scorecard.md").is_file()
