"""`metewand browser scenarios --check` on the real peer corpus and on tampered copies of it: the
expansion of every spec present equals its generated files there, and each kind of tampering is
named by file and key with exit status 1."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from metewand.suites.browser.scenarios import check, expand
from shared_paths import lexbench_or_skip


def scenarios_cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "metewand", "browser", "scenarios", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture()
def corpus_copy(tmp_path: Path) -> Path:
    """The corpus's tasks/ (6.5 MB of JSON) in a temporary corpus root."""
    shutil.copytree(lexbench_or_skip() / "tasks", tmp_path / "tasks")
    return tmp_path


def edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def test_the_real_corpus_matches_its_specs() -> None:
    corpus = lexbench_or_skip()
    result = scenarios_cli("--check", "--tasks", str(corpus), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["differences"] == []
    assert data["specs"] >= 80 and data["matched"] >= 700  # the copy holds ~80% of the peer's
    # A partial corpus: what is held back is counted, and --strict names it file by file.
    assert data["missing"] and data["orphaned"]
    strict = scenarios_cli("--check", "--tasks", str(corpus), "--strict")
    assert strict.returncode == 1
    assert f"missing: {data['missing'][0]}: no generated file" in strict.stdout
    assert f"orphaned: {data['orphaned'][0]}: _generated_from: spec absent" in strict.stdout


def test_a_tampered_copy_lists_each_difference_by_file_and_key(corpus_copy: Path) -> None:
    tasks = corpus_copy / "tasks"
    # A hand edit of a generated task's step, and a key the generator never writes.
    edit(
        tasks / "L1/stagehand/sc_app_login_greets__sh.json",
        lambda t: t["driver"]["steps"][2].update(value="mallory"),
    )
    edit(
        tasks / "L1/agent_browser_scenarios/sc_app_login_greets__ab.json",
        lambda t: t.update(hand_note="edited"),
    )
    # A spec edited without regenerating: every expansion of it is stale on that key.
    edit(tasks / "scenarios/nav_cross_page.scenario.json", lambda s: s.update(title="Renamed"))
    # An expansion for a driver the spec does not bind.
    computed = tasks / "L1/stagehand/sc_computed_style_breadth__sh.json"
    shutil.copy(computed, tasks / "L1/selenium/sc_computed_style_breadth__se.json")
    # A generated file that is not JSON.
    (tasks / "L1/cdp_use/sc_app_login_greets__cdpu.json").write_text("{ not json")

    result = scenarios_cli("--check", "--tasks", str(corpus_copy))
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "stale: L1/stagehand/sc_app_login_greets__sh.json: driver.steps:" in out
    assert (
        "stale: L1/agent_browser_scenarios/sc_app_login_greets__ab.json: hand_note: not in the expansion"
        in out
    )
    renamed = [
        line for line in out.splitlines() if ": title: " in line and "nav_cross_page" in line
    ]
    assert renamed and all('!= expansion "Renamed (' in line for line in renamed)
    assert "unbound: L1/selenium/sc_computed_style_breadth__se.json: _generated_from:" in out
    assert "unreadable: L1/cdp_use/sc_app_login_greets__cdpu.json: not readable JSON" in out


def test_a_clean_copy_matches_and_the_report_counts_what_matched(corpus_copy: Path) -> None:
    report = check(corpus_copy / "tasks")
    assert report.ok and report.differences == []
    assert report.matched + len(report.missing) == report.expansions


def test_the_webdriver_column_takes_the_engine_native_route() -> None:
    spec = json.loads(
        (lexbench_or_skip() / "tasks/scenarios/app_login_greets.scenario.json").read_text()
    )
    task = expand(spec, "selenium")
    assert task["driver"]["transport_policy"] == "engine_native" and task["task_version"] == 2
    assert task["task_id"] == "sc_app_login_greets__se" and task["subset_id"] == "l1.selenium"
    assert "transport_policy" not in expand(spec, "playwright")["driver"]


def test_a_corpus_without_specs_is_missing_and_no_flag_is_a_usage_error(tmp_path: Path) -> None:
    missing = scenarios_cli("--check", "--tasks", str(tmp_path))
    assert missing.returncode == 3 and "no scenario specs" in missing.stderr
    assert "Traceback" not in missing.stderr
    nothing = scenarios_cli("--tasks", str(tmp_path))
    assert nothing.returncode == 2 and "pass --check" in nothing.stderr
