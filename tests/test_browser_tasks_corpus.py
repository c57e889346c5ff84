"""Corpus loading and validation: the peer corpus as shipped, and broken corpora built in tmp."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import LEXBENCH
from metewand.suites.browser.tasks import load_corpus, select_tasks, validate_corpus

needs_lexbench = pytest.mark.usefixtures("lexbench")  # skips, or fails under CI=true
# every subset of the corpus runs now (the agent-browser CLI probes, l1_ab_probe.js, were the last)
NOT_RUN: set[str] = set()


@needs_lexbench
def test_peer_corpus_loads_with_zero_errors() -> None:
    corpus = load_corpus(LEXBENCH)
    assert [str(e) for e in corpus.errors] == []
    assert corpus.manifest is not None
    by_subset: dict[str, int] = {}
    for task in corpus.tasks:
        by_subset[task.subset_id] = by_subset.get(task.subset_id, 0) + 1
    files = {
        s.subset_id: len(list(LEXBENCH.glob(s.task_glob)))
        for s in corpus.manifest.subsets
        if s.subset_id not in NOT_RUN
    }
    assert by_subset == files
    # every driver path's subsets are among them (the Go/Rust/Ruby ones too: they are planned
    # and give unsupported rows with the reason)
    assert {"l1.playwright", "l2.puppeteer", "l1.selenium", "l1.chromedp", "l1.ferrum"} <= set(
        by_subset
    )


@needs_lexbench
def test_every_peer_task_file_is_valid_or_pending_with_its_reason() -> None:
    corpus = load_corpus(LEXBENCH)
    assert corpus.manifest is not None
    listed = {t.path for t in corpus.tasks} | {p.path for p in corpus.pending}
    on_disk = {
        path.relative_to(LEXBENCH).as_posix()
        for subset in corpus.manifest.subsets
        for path in LEXBENCH.glob(subset.task_glob)
    }
    assert listed == on_disk and len(on_disk) > 1500
    assert not {t.path for t in corpus.tasks} & {p.path for p in corpus.pending}
    assert {p.subset_id for p in corpus.pending} == NOT_RUN
    status = corpus.subset_status(corpus.manifest.subset("l1.agent_browser_tool"))  # type: ignore[arg-type]
    assert len(status.task_ids) == 60 and status.pending == []
    assert status.why_not_runnable is None


def _with_subset(root: Path, subset_id: str, driver: str, folder: str) -> None:
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["layers"][0]["subsets"].append(
        {"subset_id": subset_id, "driver": driver, "task_glob": f"tasks/{folder}/*.json"}
    )
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / "tasks" / folder).mkdir()


def test_pending_subset_is_listed_never_invalid_never_run(tmp_path: Path) -> None:
    root = _corpus(tmp_path, {"a.json": json.dumps(_task("a", [GOOD_STEP]))})
    _with_subset(root, "l1.ab", "node_cdp_probe", "ab")
    # A probe script metewand has no runner for: listed with the reason, its format unchecked.
    probe_task = _task("ab_a", [], subset_id="l1.ab")
    probe_task["driver"] = {
        "kind": "node_cdp_probe",
        "script": "runner/scripts/no_such_probe.js",
        "env": {"AB_STEPS": [{"ab": ["open", "{fixture_url}"]}]},
    }
    probe_task["grader"] = {"kind": "inline_assertions", "checks": ["script_reported"]}
    (root / "tasks/ab/a.json").write_text(json.dumps(probe_task))
    (root / "tasks/ab/broken.json").write_text("{")
    corpus = load_corpus(root)
    assert [t.task_id for t in corpus.tasks] == ["a"]
    assert [(p.task_id, p.subset_id, p.reason) for p in corpus.pending] == [
        ("ab_a", "l1.ab", "driver path node_cdp_probe:no_such_probe.js not implemented yet")
    ]
    # A file that is not JSON stays invalid, whatever subset holds it.
    assert [str(e) for e in corpus.errors] == [
        "tasks/ab/broken.json: $: invalid JSON at line 1 column 2: "
        "Expecting property name enclosed in double quotes"
    ]


def _playwright_task(task_id: str, **driver: Any) -> dict[str, Any]:
    task = _task(task_id, [], subset_id="l1.pw")
    task["driver"] = {
        "kind": "framework_playwright",
        "steps": [{"op": "new_page"}],
        "checks": [{"kind": "step_ok", "label": "opened", "step": 0}],
        **driver,
    }
    task["grader"] = {"kind": "inline_assertions", "checks": []}
    return task


def test_a_driver_path_task_is_runnable_and_its_driver_block_is_checked(tmp_path: Path) -> None:
    root = _corpus(tmp_path, {"a.json": json.dumps(_task("a", [GOOD_STEP]))})
    _with_subset(root, "l1.pw", "framework_playwright", "pw")
    (root / "tasks/pw/good.json").write_text(json.dumps(_playwright_task("pw_good")))
    bad_check = _playwright_task("pw_bad_check", checks=[{"kind": "saved_equals", "name": "x"}])
    (root / "tasks/pw/bad_check.json").write_text(json.dumps(bad_check))
    bad_step = _playwright_task("pw_bad_step", checks=[{"kind": "step_ok", "step": 3}])
    (root / "tasks/pw/bad_step.json").write_text(json.dumps(bad_step))
    no_op = _playwright_task("pw_no_op", steps=[{"url": "/x"}])
    (root / "tasks/pw/no_op.json").write_text(json.dumps(no_op))
    corpus = load_corpus(root)
    assert sorted(t.task_id for t in corpus.tasks) == ["a", "pw_good"] and corpus.pending == []
    assert [str(e) for e in corpus.errors] == [
        "tasks/pw/bad_check.json: $.driver.checks[0].expected: "
        "required key missing for a saved_equals check",
        "tasks/pw/bad_step.json: $.driver.checks[0].step: must index one of the 1 steps",
        "tasks/pw/no_op.json: $.driver.steps[0]: a step must be an object with a string op",
    ]


def test_empty_globs_are_empty_subsets_not_errors(tmp_path: Path) -> None:
    root = _corpus(tmp_path, {"a.json": json.dumps(_task("a", [GOOD_STEP]))})
    corpus = load_corpus(root)
    assert corpus.manifest is not None and corpus.errors == []
    status = corpus.subset_status(corpus.manifest.subset("l1.none"))  # type: ignore[arg-type]
    assert status.task_ids == [] and status.files == 0
    assert status.why_not_runnable == "no task file matches tasks/none/*.json"


def _task(task_id: str, steps: list[dict[str, Any]], **over: Any) -> dict[str, Any]:
    task: dict[str, Any] = {
        "task_id": task_id,
        "task_version": 1,
        "layer": "L1",
        "subset_id": "l1.raw_cdp",
        "title": task_id,
        "description": "test task",
        "features": [],
        "tags": ["version.v0_1", "family.t"],
        "scene": {"kind": "self_hosted_fixture", "url": "/page"},
        "driver": {"kind": "raw_cdp", "steps": steps},
        "grader": {"kind": "inline_assertions", "checks": [{"kind": "no_error"}]},
        "timeouts": {"task_ms": 5000, "hard_kill_ms": 10000},
        "artifact_profile": "l1_standard",
    }
    task.update(over)
    return task


def _corpus(tmp: Path, files: dict[str, str]) -> Path:
    manifest = {
        "bench_id": "t",
        "bench_version": "0.0.1",
        "default_k_runs": 1,
        "layers": [
            {
                "layer_id": "L1",
                "enabled": True,
                "subsets": [
                    {
                        "subset_id": "l1.raw_cdp",
                        "driver": "raw_cdp",
                        "task_glob": "tasks/L1/*.json",
                    },
                    {"subset_id": "l1.none", "driver": "raw_cdp", "task_glob": "tasks/none/*.json"},
                ],
            }
        ],
    }
    (tmp / "tasks/L1").mkdir(parents=True)
    (tmp / "fixtures").mkdir()
    (tmp / "manifest.json").write_text(json.dumps(manifest))
    (tmp / "fixtures/routes.json").write_text(json.dumps({"/page": "page.html"}))
    (tmp / "fixtures/page.html").write_text("<p>hi</p>")
    for name, text in files.items():
        (tmp / "tasks/L1" / name).write_text(text)
    return tmp


GOOD_STEP = {"method": "Runtime.evaluate", "params": {"expression": "1"}, "save_as": "v"}


def test_valid_tmp_corpus_and_selection(tmp_path: Path) -> None:
    root = _corpus(
        tmp_path,
        {
            "a.json": json.dumps(_task("a", [GOOD_STEP])),
            "b.json": json.dumps(_task("b", [GOOD_STEP], tags=["x"])),
        },
    )
    tasks, errors = validate_corpus(root)
    assert errors == [] and sorted(t.task_id for t in tasks) == ["a", "b"]
    assert [t.task_id for t in select_tasks(tasks, tags=["x"])] == ["b"]
    assert [t.task_id for t in select_tasks(tasks, task_ids=["a"])] == ["a"]
    assert select_tasks(tasks, subsets=["l1.none"]) == []


def test_unknown_step_key_names_file_and_json_path(tmp_path: Path) -> None:
    bad_wait = {"wait_for_event": "Page.loadEventFired", "timeout_ms": 100, "tmeout": 5}
    root = _corpus(
        tmp_path, {"bad.json": json.dumps(_task("bad", [GOOD_STEP, GOOD_STEP, bad_wait]))}
    )
    tasks, errors = validate_corpus(root)
    assert tasks == []
    assert [str(e) for e in errors] == [
        "tasks/L1/bad.json: $.driver.steps[2].tmeout: unknown key for a wait_for_event step"
    ]


def test_broken_json_gives_line_and_column(tmp_path: Path) -> None:
    text = json.dumps(_task("broken", [GOOD_STEP]), indent=1)
    text = text.replace('"layer": "L1",', '"layer": "L1"', 1)  # drop a comma
    root = _corpus(tmp_path, {"broken.json": text, "ok.json": json.dumps(_task("ok", [GOOD_STEP]))})
    tasks, errors = validate_corpus(root)
    assert [t.task_id for t in tasks] == ["ok"]  # the other file still loads
    assert len(errors) == 1
    line = next(i for i, t in enumerate(text.splitlines(), 1) if '"subset_id"' in t)
    assert str(errors[0]).startswith(f"tasks/L1/broken.json: $: invalid JSON at line {line} column")


def test_missing_fixtures_are_errors(tmp_path: Path) -> None:
    upload = {
        "method": "DOM.setFileInputFiles",
        "params": {"files": ["{fixture_path}/nothere.txt"], "nodeId": 1},
    }
    root = _corpus(
        tmp_path,
        {
            "scene.json": json.dumps(
                _task("scene", [GOOD_STEP], scene={"kind": "self_hosted_fixture", "url": "/gone"})
            ),
            "file.json": json.dumps(_task("file", [upload])),
        },
    )
    _, errors = validate_corpus(root)
    assert sorted(str(e) for e in errors) == [
        "tasks/L1/file.json: $.driver: missing fixture: {fixture_path}/nothere.txt does not exist",
        "tasks/L1/scene.json: $.scene.url: missing fixture: no route or fixture file serves /gone",
    ]


def test_all_errors_are_collected(tmp_path: Path) -> None:
    task = _task("many", [{"method": "X.y", "session": "ghost"}, {"sleep_ms": 1, "method": "A.b"}])
    task["grader"] = {
        "kind": "inline_assertions",
        "checks": [{"kind": "value_equals"}, {"kind": "nope"}],
    }
    task["surprise"] = 1
    root = _corpus(tmp_path, {"many.json": json.dumps(task)})
    _, errors = validate_corpus(root)
    assert [str(e) for e in errors] == ["tasks/L1/many.json: $.surprise: unknown key"]
    del task["surprise"]
    (root / "tasks/L1/many.json").write_text(json.dumps(task))
    _, errors = validate_corpus(root)
    assert sorted(f"{e.json_path}: {e.message}" for e in errors) == [
        "$.driver.steps[0].session: session 'ghost' is not defined by an earlier step",
        "$.driver.steps[1]: a step needs exactly one of ['method', 'sleep_ms', 'wait_for_event']",
        "$.grader.checks[0].expected: required key missing for a value_equals check",
        "$.grader.checks[1].kind: unknown check kind 'nope'",
    ]


def test_subset_mismatch_and_duplicate_ids(tmp_path: Path) -> None:
    root = _corpus(
        tmp_path,
        {
            "a.json": json.dumps(_task("same", [GOOD_STEP])),
            "b.json": json.dumps(_task("same", [GOOD_STEP])),
            "c.json": json.dumps(_task("c", [GOOD_STEP], subset_id="l1.other", layer="L2")),
        },
    )
    _, errors = validate_corpus(root)
    assert sorted(str(e) for e in errors) == [
        "tasks/L1/b.json: $.task_id: duplicate of tasks/L1/a.json",
        "tasks/L1/c.json: $.layer: must be 'L1'",
        "tasks/L1/c.json: $.subset_id: must be 'l1.raw_cdp' (the subset whose glob holds it)",
    ]
