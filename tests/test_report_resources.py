"""`metewand report` regenerates the fair-comparison documents with --baseline and
--reference-engine, through compare.resource_summary / calibration / eligibility."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from click.testing import CliRunner

import synthetic_runs as synthetic
from metewand.cli.main import cli
from metewand.compare.generate import generate


def _section(html: str, ident: str) -> str:
    match = re.search(rf'<section id="{ident}">(.*?)</section>', html, re.S)
    assert match, ident
    return match.group(1)


def test_report_runs_calibration_eligibility_and_paired_ratios(tmp_path: Path) -> None:
    off = synthetic.write_browser_run(tmp_path / "off", n_tasks=6, k=5, seed=1)
    on = synthetic.write_browser_run(tmp_path / "on", n_tasks=6, k=5, seed=2)
    args = ["report", str(on), "--baseline", str(off), "--reference-engine", "chrome"]
    result = CliRunner().invoke(cli, [*args, "--format", "html"])
    assert result.exit_code == 0, result.output
    html = (on / "report.html").read_text()
    calibration = _section(html, "calibration")
    assert "Profiler-off run off against profiler-on run on" in calibration
    assert "status_mismatch_rate" in calibration
    eligibility = _section(html, "eligibility")
    for condition in ("engines", "profile_jobs_k", "intersection_nonempty", "calibration"):
        assert f"<td>{condition}</td>" in eligibility
    paired = _section(html, "paired")
    assert (
        "reference engine chrome" in paired and "<td>lightpanda</td><td>cpu_total_ms</td>" in paired
    )
    # the same bytes as the end of a run writes for the same inputs (regenerated, not copied)
    twin = tmp_path / "twin"
    shutil.copytree(on, twin)
    for name in ("resource_summary.json", "resource-card.md"):
        (twin / name).unlink()
    generate(twin, ["json"], baseline=off, reference_engine="chrome")
    for name in ("resource_summary.json", "resource-card.md"):
        assert (on / name).read_bytes() == (twin / name).read_bytes(), name


def test_unprofiled_run_says_why_instead_of_blank(tmp_path: Path) -> None:
    run = synthetic.write_browser_run(tmp_path / "np", n_tasks=3, k=1, telemetry=False)
    rows = (run / "results.jsonl").read_bytes().replace(b'"resource":{', b'"resource_x":{')
    (run / "results.jsonl").write_bytes(rows)
    manifest = (run / "run_manifest.json").read_bytes().replace(b'"engine"', b'"off"')
    (run / "run_manifest.json").write_bytes(manifest)
    result = CliRunner().invoke(cli, ["report", str(run), "--format", "html"])
    assert result.exit_code == 0, result.output
    html = (run / "report.html").read_text()
    # nothing to show: left out of the page, each named in one line with the reason (issue #30)
    assert '<section id="eligibility">' not in html and '<section id="calibration">' not in html
    assert (
        "Not shown: Efficiency map, Paired ratios vs reference, Observer-effect calibration, "
        "Comparison eligibility conditions — run not profiled" in html
    )
    assert not (run / "resource_summary.json").exists()
