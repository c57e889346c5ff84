"""Issue #11 acceptance 5: legacy bare-string inline checks in a real run (real Chromium, real
fixture server). A task with known bare strings passes; one with an unknown bare string fails
that task's check only; the run is never refused and ends with exit 0."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from browser_run_helpers import ABOUT_BLANK_TASK, rows_of, tiny_corpus
from metewand.suites.browser.checks import UNKNOWN_BARE_CHECK
from metewand.suites.browser.leftovers import run_processes
from metewand.suites.browser.run_config import RunConfig
from metewand.suites.browser.runner import run_browser


def _bare_task(task_id: str, checks: list[str]) -> dict[str, Any]:
    task = copy.deepcopy(ABOUT_BLANK_TASK)
    task["task_id"] = task_id
    task["driver"]["steps"][0]["params"]["expression"] = "1+2"
    task["grader"] = {"kind": "inline_assertions", "checks": checks}
    return task


def test_bare_string_checks_in_a_real_run(tmp_path: Path) -> None:
    corpus = tiny_corpus(
        tmp_path / "corpus",
        {
            "a_known.json": _bare_task("bare_known", ["value_equals_3", "result_type_number"]),
            "b_unknown.json": _bare_task("bare_unknown", ["value_equals_3", "value_is_small"]),
            "c_plain.json": ABOUT_BLANK_TASK,
        },
    )
    messages: list[str] = []
    config = RunConfig(str(corpus), ("chrome",), k=1, seed="t")
    result = run_browser(config, tmp_path / "runs", "r", echo=messages.append)
    assert result.exit_code == 0, messages
    assert result.run_dir is not None
    rows = {row["task_id"]: row for row in rows_of(result.run_dir)}
    assert {t: r["status"] for t, r in rows.items()} == {
        "bare_known": "pass",
        "bare_unknown": "fail",
        "tiny_eval": "pass",
    }
    known = [(c["name"], c["kind"], c["status"]) for c in rows["bare_known"]["checks"]]
    assert known == [
        ("value_equals_3", "value_equals", "pass"),
        ("result_type_number", "value_type", "pass"),
    ]
    unknown = {c["name"]: c for c in rows["bare_unknown"]["checks"]}
    assert unknown["value_equals_3"]["status"] == "pass"
    assert unknown["value_is_small"]["status"] == "fail"
    assert unknown["value_is_small"]["evidence"] == UNKNOWN_BARE_CHECK
    assert run_processes(result.run_dir, "r") == []
