"""Browser rows carry the task title, so a report needs no corpus directory to name tasks.

Engines that are not installed (moli, obscura) give real rows without launching anything.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from browser_run_helpers import ABOUT_BLANK_TASK, cli, rows_of, run_on_missing_engine, tiny_corpus
from metewand.compare.report_browser import task_titles
from metewand.compare.rundir import load_run

TITLED = {**ABOUT_BLANK_TASK, "task_id": "titled", "title": "<script>alert(1)</script> sum"}
UNTITLED = {**ABOUT_BLANK_TASK, "task_id": "untitled", "description": "Adds one and one."}


def test_rows_carry_titles_and_the_report_reads_them_without_the_corpus(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": TITLED, "b.json": UNTITLED})
    out = tmp_path / "runs"
    done = run_on_missing_engine(corpus, out, "--allow-missing-engines")
    assert done.returncode == 0, done.stderr
    assert "attempts by status" in done.stderr  # --no-progress keeps the final summary table
    titles = {row["task_id"]: row["title"] for row in rows_of(out / "r")}
    assert titles == {"titled": TITLED["title"], "untitled": "Adds one and one."}
    shutil.rmtree(corpus)  # the report must not need it any more
    assert task_titles(load_run(out / "r")) == titles


def test_quiet_browser_run_prints_nothing_but_errors(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": TITLED})
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        "moli",
        "--allow-missing-engines",
        "--out",
        str(tmp_path / "runs"),
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout == ""
