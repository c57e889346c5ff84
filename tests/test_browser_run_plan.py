"""Run planning without engines: invalid tasks (exit 2 / --keep-going), missing engines,
rotation order, --jobs keeps the attempt set."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from browser_run_helpers import ABOUT_BLANK_TASK, cli, manifest_of, rows_of, tiny_corpus
from metewand.runtime.schedule import max_imbalance
from metewand.suites.browser.run_config import RunConfig
from metewand.suites.browser.run_plan import build_plan


def _bad_step_task() -> dict[str, object]:
    task = copy.deepcopy(ABOUT_BLANK_TASK)
    task["task_id"] = "tiny_bad_step"
    task["driver"]["steps"][0]["bogus"] = 1  # type: ignore[index]
    return task


def _corpus_with_invalid(tmp_path: Path) -> Path:
    return tiny_corpus(
        tmp_path / "corpus",
        {"a_good.json": ABOUT_BLANK_TASK, "b_bad_step.json": _bad_step_task(),
         "c_broken.json": '{"task_id": "x", '},
    )  # fmt: skip


def test_invalid_tasks_exit_2_naming_file_and_path(tmp_path: Path) -> None:
    corpus = _corpus_with_invalid(tmp_path)
    out = tmp_path / "runs"
    done = cli("browser", "run", "--tasks", str(corpus), "--engines", "moli", "--allow-missing-engines", "--out", str(out),
               "--run-id", "r", "--no-progress")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "tasks/b_bad_step.json: $.driver.steps[0].bogus: unknown key" in done.stderr
    assert "tasks/c_broken.json" in done.stderr
    assert not (out / "r").exists(), "nothing may start when tasks are invalid"


def test_keep_going_skips_invalid_and_says_so(tmp_path: Path) -> None:
    corpus = _corpus_with_invalid(tmp_path)
    out = tmp_path / "runs"
    done = cli("browser", "run", "--tasks", str(corpus), "--engines", "moli", "--allow-missing-engines", "--out", str(out),
               "--run-id", "r", "--no-progress", "--keep-going")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "skipped (--keep-going): tasks/b_bad_step.json" in done.stderr
    rows = rows_of(out / "r")
    assert [r["task_id"] for r in rows] == ["tiny_eval"]
    skipped = manifest_of(out / "r")["data"]["skipped_invalid_tasks"]
    assert {s["file"] for s in skipped} == {"tasks/b_bad_step.json", "tasks/c_broken.json"}


def test_missing_engine_rows_are_unsupported_never_numbers(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    out = tmp_path / "runs"
    done = cli("browser", "run", "--tasks", str(corpus), "--engines", "moli,obscura", "--allow-missing-engines", "--k", "2",
               "--out", str(out), "--run-id", "r", "--no-progress")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = rows_of(out / "r")
    assert len(rows) == 4
    for row in rows:
        assert row["status"] == "unsupported"
        assert row["reason"].startswith("engine_binary_missing")
        assert row["duration_ms"] is None and row["traffic"] is None and row["cdp"] is None
    scores = json.loads((out / "r" / "scores.json").read_text())
    assert scores["by_engine"]["moli"]["attempts"]["by_status"]["unsupported"] == 2
    engines = manifest_of(out / "r")["data"]["engines"]
    assert engines["moli"]["reason"] == "engine_binary_missing"


def test_unknown_engine_and_bad_flags_exit_2(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    for extra in (["--engines", "netscape"], ["--engines", "moli", "--k", "0"],
                  ["--engines", "moli", "--subset", "no.such"]):  # fmt: skip
        done = cli("browser", "run", "--tasks", str(corpus), "--out", str(tmp_path / "o"),
                   "--no-progress", *extra)  # fmt: skip
        assert done.returncode == 2, (extra, done.stderr)


def test_plan_rotation_balanced_and_jobs_do_not_change_attempts(tmp_path: Path) -> None:
    tasks = {}
    for n in range(5):
        task = copy.deepcopy(ABOUT_BLANK_TASK)
        task["task_id"] = f"tiny_{n}"
        tasks[f"t{n}.json"] = task
    corpus = tiny_corpus(tmp_path / "corpus", tasks)
    base = RunConfig(str(corpus), ("chrome", "lightpanda", "moli"), k=3, seed="s1")
    plan1 = build_plan(base)
    plan2 = build_plan(RunConfig(str(corpus), ("chrome", "lightpanda", "moli"), k=3, seed="s1",
                                 jobs=2))  # fmt: skip
    slots = [(a.key, a.round, a.position) for a in plan1.attempts]
    assert slots == [(a.key, a.round, a.position) for a in plan2.attempts]
    assert len({a.key for a in plan1.attempts}) == 5 * 3 * 3
    rounds: dict[int, list[str]] = {}
    for a in plan1.attempts:
        rounds.setdefault(a.round, []).append(a.engine)
    orders = [rounds[r] for r in sorted(rounds)]
    for start in range(len(orders)):
        for end in range(start + 1, len(orders) + 1):
            assert max_imbalance(orders[start:end], base.engines) <= 1
