"""Run planning without engines: invalid tasks (exit 2 / --keep-going), missing engines,
rotation order, --jobs keeps the attempt set."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from browser_run_helpers import (
    ABOUT_BLANK_TASK,
    cli,
    manifest_of,
    rows_of,
    run_on_missing_engine,
    tiny_corpus,
)
from metewand.runtime.schedule import max_imbalance
from metewand.suites.browser.run_config import RunConfig
from metewand.suites.browser.run_plan import build_plan

# the peer's agent-browser CLI probe: a driver block metewand still has no runner for
PENDING_PROBE = "runner/scripts/no_such_probe.js"  # a probe script metewand has no runner for


def _bad_step_task() -> dict[str, object]:
    task = copy.deepcopy(ABOUT_BLANK_TASK)
    task["task_id"] = "tiny_bad_step"
    task["driver"]["steps"][0]["bogus"] = 1  # type: ignore[index]
    return task


def _corpus_with_invalid(tmp_path: Path) -> Path:
    return tiny_corpus(
        tmp_path / "corpus",
        {
            "a_good.json": ABOUT_BLANK_TASK,
            "b_bad_step.json": _bad_step_task(),
            "c_broken.json": '{"task_id": "x", ',
        },
    )


def test_invalid_tasks_exit_2_naming_file_and_path(tmp_path: Path) -> None:
    corpus = _corpus_with_invalid(tmp_path)
    out = tmp_path / "runs"
    done = run_on_missing_engine(corpus, out, "--allow-missing-engines")
    assert done.returncode == 2, done.stderr
    assert "tasks/b_bad_step.json: $.driver.steps[0].bogus: unknown key" in done.stderr
    assert "tasks/c_broken.json" in done.stderr
    assert not (out / "r").exists(), "nothing may start when tasks are invalid"


def test_keep_going_skips_invalid_and_says_so(tmp_path: Path) -> None:
    corpus = _corpus_with_invalid(tmp_path)
    out = tmp_path / "runs"
    done = run_on_missing_engine(corpus, out, "--allow-missing-engines", "--keep-going")
    assert done.returncode == 0, done.stderr
    assert "skipped (--keep-going): tasks/b_bad_step.json" in done.stderr
    rows = rows_of(out / "r")
    assert [r["task_id"] for r in rows] == ["tiny_eval"]
    skipped = manifest_of(out / "r")["data"]["skipped_invalid_tasks"]
    assert {s["file"] for s in skipped} == {"tasks/b_bad_step.json", "tasks/c_broken.json"}


def test_missing_engine_rows_are_unsupported_never_numbers(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    out = tmp_path / "runs"
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        "moli,obscura",
        "--allow-missing-engines",
        "--k",
        "2",
        "--out",
        str(out),
        "--run-id",
        "r",
        "--no-progress",
    )
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
    for extra in (
        ["--engines", "netscape"],
        ["--engines", "moli", "--k", "0"],
        ["--engines", "moli", "--subset", "no.such"],
    ):
        done = cli(
            "browser",
            "run",
            "--tasks",
            str(corpus),
            "--out",
            str(tmp_path / "o"),
            "--no-progress",
            *extra,
        )
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
    plan2 = build_plan(
        RunConfig(str(corpus), ("chrome", "lightpanda", "moli"), k=3, seed="s1", jobs=2)
    )
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


def _corpus_with_pending_subset(tmp_path: Path) -> Path:
    """``t.raw`` runs; ``t.pw`` holds a probe task of a script metewand has no runner for
    (Playwright tasks, then the agent-browser CLI probe, used to stand here; they run now, #15)."""
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    manifest = json.loads((corpus / "manifest.json").read_text())
    manifest["layers"][0]["subsets"].append(
        {"subset_id": "t.pw", "driver": "node_cdp_probe", "task_glob": "pw/*.json"}
    )
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    (corpus / "pw").mkdir()
    task = {
        "task_id": "pw_one",
        "subset_id": "t.pw",
        "layer": "L1",
        "driver": {"kind": "node_cdp_probe", "script": PENDING_PROBE},
        "grader": {"kind": "server_side", "checks": []},
    }
    (corpus / "pw" / "one.json").write_text(json.dumps(task))
    return corpus


def test_pending_subset_never_refuses_a_run_and_says_why_it_is_not_run(tmp_path: Path) -> None:
    corpus = _corpus_with_pending_subset(tmp_path)
    out = tmp_path / "runs"
    for run_id, subsets in (("all", []), ("raw", ["--subset", "t.raw"])):
        done = run_on_missing_engine(
            corpus, out, "--allow-missing-engines", *subsets, run_id=run_id
        )
        assert done.returncode == 0, done.stderr
        assert [r["task_id"] for r in rows_of(out / run_id)] == ["tiny_eval"]
    assert (
        "subset t.pw: 1 task(s) not run yet: driver path node_cdp_probe:no_such_probe.js not implemented yet"
        in run_on_missing_engine(corpus, out, "--allow-missing-engines", run_id="again").stderr
    )


def test_asking_for_a_pending_subset_is_refused_with_the_reason(tmp_path: Path) -> None:
    corpus = _corpus_with_pending_subset(tmp_path)
    out = tmp_path / "runs"
    done = run_on_missing_engine(corpus, out, "--subset", "t.raw", "--subset", "t.pw")
    assert done.returncode == 2, done.stderr
    assert (
        "--subset 't.pw' has no runnable task: driver path node_cdp_probe:no_such_probe.js not implemented yet"
        in done.stderr
    )
    assert not out.exists()
    done = run_on_missing_engine(corpus, out, "--task", "pw_one")
    assert done.returncode == 2, done.stderr
    assert (
        "--task 'pw_one': driver path node_cdp_probe:no_such_probe.js not implemented yet"
        in done.stderr
    )
    assert not out.exists()


def test_browser_list_names_pending_subsets_and_their_reason(tmp_path: Path) -> None:
    corpus = _corpus_with_pending_subset(tmp_path)
    done = cli("browser", "list", "--tasks", str(corpus), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["invalid"] == [] and data["not_run_yet"] == 1
    by_id = {s["subset_id"]: s for s in data["subsets"]}
    assert by_id["t.raw"]["tasks"] == 1 and by_id["t.raw"]["why_no_runnable_task"] is None
    assert by_id["t.pw"]["tasks"] == 0 and by_id["t.pw"]["not_run_yet"] == 1
    assert by_id["t.pw"]["why_no_runnable_task"] == (
        "driver path node_cdp_probe:no_such_probe.js not implemented yet"
    )


def test_the_corpus_digest_is_its_content_not_its_checkouts_store(tmp_path: Path) -> None:
    """A corpus at the root of a git checkout holds ``.git``, which every commit changes: the
    digest (the history's browser inputs, resume's check) reads the corpus's files only."""
    import subprocess

    from metewand.suites.browser.run_plan import corpus_digest

    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    before = corpus_digest(corpus)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
    subprocess.run([*git, "init", "-q"], cwd=corpus, check=True)
    subprocess.run([*git, "add", "-A"], cwd=corpus, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=corpus, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "two"], cwd=corpus, check=True)
    assert corpus_digest(corpus) == before
    (corpus / "__pycache__").mkdir()
    (corpus / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert corpus_digest(corpus) == before
    (corpus / "extra.txt").write_text("content")
    assert corpus_digest(corpus)["sha256"] != before["sha256"]


def test_an_edited_task_file_changes_its_own_digest_and_no_other_part(tmp_path: Path) -> None:
    """The parts a row's code identity takes: each task's own file, and every other file as
    one shared digest, in which no task file (run or not) takes part."""
    from metewand.suites.browser.run_plan import corpus_digest
    from metewand.suites.browser.tasks import load_corpus

    files = {f"{name}.json": {**ABOUT_BLANK_TASK, "task_id": name} for name in ("a", "b")}
    corpus = tiny_corpus(tmp_path / "corpus", files)

    def parts() -> dict[str, Any]:
        return corpus_digest(corpus, load_corpus(corpus).tasks)

    before = parts()
    assert set(before["task_sha256"]) == {"a", "b"}
    assert "shared_sha256" not in corpus_digest(corpus)  # without the tasks: the whole only
    task = corpus / "tasks" / "a.json"
    task.write_text(task.read_text() + "\n")
    edited = parts()
    assert edited["task_sha256"]["a"] != before["task_sha256"]["a"]
    assert edited["task_sha256"]["b"] == before["task_sha256"]["b"]
    assert edited["shared_sha256"] == before["shared_sha256"]
    assert edited["sha256"] != before["sha256"]  # resume and Dask still see any edit
    (corpus / "fixtures" / "page.html").write_text("<p>a heavier page</p>")
    fixture = parts()
    assert fixture["shared_sha256"] != edited["shared_sha256"]
    assert fixture["task_sha256"] == edited["task_sha256"]


def test_a_task_id_that_names_nothing_is_refused_beside_one_that_does(tmp_path: Path) -> None:
    # `--task` values are a union: a typo beside a valid id used to drop out unnoticed
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK})
    out = tmp_path / "runs"
    valid = str(ABOUT_BLANK_TASK["task_id"])
    done = run_on_missing_engine(corpus, out, "--task", valid, "--task", valid + "x")
    assert done.returncode == 2, done.stderr
    assert (
        f"--task '{valid}x': no valid task with this id in the corpus (did you mean {valid}?)"
        in done.stderr
    )
    assert "nothing was run" in done.stderr and not out.exists()
    assert run_on_missing_engine(corpus, out, "--task", valid).returncode != 2
