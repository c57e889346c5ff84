"""The agent-browser tool-probe subset (``l1.agent_browser_tool``, ``node_cdp_probe`` with
``l1_ab_probe.js``, issue #15): its AB_STEPS run as real agent-browser CLI calls against a real
Chromium and a real Lightpanda through our ``agent_browser_tool.js``, its AB_CHECKS graded into
the check rows ``script_reported`` reads; bad AB_STEPS/AB_CHECKS are refused at load."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import cli, lexbench_or_skip, rows_of
from driver_helpers import Bench, chrome_bench, found_or_skip, load_task, run_task
from metewand.suites.browser.ab_probe_tasks import ab_probe_problems
from metewand.suites.browser.driver_registry import PROBE_PATHS

PATH = PROBE_PATHS["l1_ab_probe.js"]
SUBSET = "L1/agent_browser"
# check a box, click through a snapshot @ref, read a count (whose digits also sit in the CLI's
# lifecycle data), an eval that must fail, an upload of a {tmp_file:...}, an any_of over a dialog
CHROME_TASKS = [
    "ab_main_check_checkbox",
    "ab_main_click_viaref",
    "ab_main_get_count",
    "ab_main_eval_throws",
    "ab_probe_upload",
    "ab_probe_dialog_click_detect",
]
LIGHTPANDA_TASKS = ["ab_main_check_checkbox", "ab_main_click_viaref"]


@pytest.fixture(scope="module")
def tool_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus = lexbench_or_skip()
    found_or_skip(PATH.key)
    out = tmp_path_factory.mktemp("ab-tool-run")
    for engine, tasks in (("chrome", CHROME_TASKS), ("lightpanda", LIGHTPANDA_TASKS)):
        args = [a for t in tasks for a in ("--task", t)]
        done = cli(
            "browser",
            "run",
            "--tasks",
            str(corpus),
            "--engines",
            engine,
            "--k",
            "1",
            "--out",
            str(out),
            "--run-id",
            engine,
            "--no-progress",
            *args,
            timeout=600,
        )
        if engine == "lightpanda" and done.returncode == 3:
            continue  # no Lightpanda here: the Chrome rows are still checked
        # exit 0: no attempt ended infra or crash
        assert done.returncode == 0, done.stderr[-3000:]
    return out


def _rows(run: Path) -> dict[str, dict[str, Any]]:
    return {r["task_id"]: r for r in rows_of(run)}


def _declared(task_id: str) -> list[str]:
    return [c["kind"] for c in load_task(SUBSET, task_id)["driver"]["env"]["AB_CHECKS"]]


@pytest.mark.engines
@pytest.mark.slow
def test_tool_probe_tasks_pass_on_chrome_with_their_checks_as_rows(tool_run: Path) -> None:
    rows = _rows(tool_run / "chrome")
    assert sorted(rows) == sorted(CHROME_TASKS)
    for task_id, row in rows.items():
        assert row["status"] == "pass", (task_id, row["reason"], row["checks"])
        assert row["driver_path"] == PATH.key
        assert (row["driver_library"], row["driver_version"]) == ("agent-browser", "0.31.1")
        assert row["adapter"]["outcome"] == "result"
        names = [c["name"] for c in row["checks"]]
        assert names == ["driver_connect", *_declared(task_id)], task_id
        assert all(c["status"] == "pass" for c in row["checks"])
    (clicked,) = [c for c in rows["ab_main_click_viaref"]["checks"] if c["name"] == "ab_ok"]
    assert (
        '"clicked":"@e' in clicked["evidence"]
    )  # the {ref:role=button,...} became a snapshot @ref
    count = [c for c in rows["ab_main_get_count"]["checks"] if c["name"] == "ab_data_contains"]
    assert "lifecycle" not in count[0]["evidence"]  # the CLI's daemon bookkeeping is not matched


@pytest.mark.engines
@pytest.mark.slow
def test_tool_probe_tasks_on_lightpanda_end_without_infra_rows(tool_run: Path) -> None:
    if not (tool_run / "lightpanda").is_dir():
        pytest.skip("lightpanda not installed")
    rows = _rows(tool_run / "lightpanda")
    assert sorted(rows) == sorted(LIGHTPANDA_TASKS)
    for task_id, row in rows.items():
        assert row["status"] not in ("infra", "crash", "timeout"), (task_id, row["reason"])
        assert row["driver_path"] == PATH.key and row["adapter"]["outcome"] == "result"
    # both pass on Lightpanda 0.31.1's CLI today (the whole subset: 55/60, see benchmarks/README)
    assert rows["ab_main_click_viaref"]["status"] == "pass", rows["ab_main_click_viaref"]["checks"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield from chrome_bench(tmp_path_factory.mktemp("engine-logs"))


def _variant(task_id: str, steps: list[dict[str, Any]], checks: list[dict[str, Any]]) -> Any:
    task = copy.deepcopy(load_task(SUBSET, task_id))
    task["driver"]["env"] = {"AB_STEPS": steps, "AB_CHECKS": checks}
    return task


OPEN = {"ab": ["open", "{fixture_url}"]}
COUNT = {"eval": "document.querySelector('#count').textContent", "save_as": "n"}


@pytest.mark.engines
@pytest.mark.slow
def test_a_failed_step_stops_the_probe_unless_it_may_fail(bench: Bench, tmp_path: Path) -> None:
    command = found_or_skip(PATH.key).command
    missing = {"ab": ["click", "{ref:role=button,name=No such button}"]}
    checks = [{"kind": "ab_ok", "step": 2}, {"kind": "saved_equals", "name": "n", "expected": "0"}]
    stopped = run_task(
        bench,
        command,
        "agent_browser",
        _variant("ab_main_click_viaref", [OPEN, {"ab": ["snapshot"]}, missing, COUNT], checks),
        tmp_path,
    )
    assert stopped.outcome == "result", stopped.detail
    rows = {c["name"]: c for c in stopped.checks}
    assert rows["ab_ok"]["status"] == "fail"
    assert "no element in the last snapshot matches" in rows["ab_ok"]["evidence"]
    assert rows["saved_equals"]["evidence"] == 'saved n="ERROR: not run: step 2 failed"'
    assert stopped.classification().status == "fail"  # an engine/driver result, not infra
    tolerated = [OPEN, {"ab": ["snapshot"]}, {**missing, "ignore_error": True}, COUNT]
    checks = [
        {"kind": "ab_fails", "step": 2},
        {"kind": "saved_equals", "name": "n", "expected": "0"},
    ]
    went_on = run_task(
        bench,
        command,
        "agent_browser",
        _variant("ab_main_click_viaref", tolerated, checks),
        tmp_path,
        attempt=2,
    )
    assert [c["status"] for c in went_on.checks] == ["pass", "pass", "pass"], went_on.checks
    assert went_on.leftover_pids == []
    assert bench.engine.is_alive()


@pytest.mark.engines
@pytest.mark.slow
def test_a_wrong_expectation_fails_its_check_row(bench: Bench, tmp_path: Path) -> None:
    command = found_or_skip(PATH.key).command
    steps = [OPEN, {"ab": ["get", "count", "p.para"]}]
    checks = [
        {"kind": "ab_data_contains", "step": 1, "expected": "7"},
        {"kind": "ab_data_array_min_len", "step": 1, "path": "count", "min": 1},
    ]
    run = run_task(
        bench, command, "agent_browser", _variant("ab_main_get_count", steps, checks), tmp_path
    )
    assert run.outcome == "result", run.detail
    assert [c["status"] for c in run.checks] == ["pass", "fail", "fail"], run.checks
    assert run.classification().status == "fail"


BAD = [
    ({"AB_STEPS": [], "AB_CHECKS": [{"kind": "last_ab_ok"}]}, "$.driver.env.AB_STEPS"),
    (
        {"AB_STEPS": [{"ab": ["open"], "eval": "1"}], "AB_CHECKS": [{"kind": "last_ab_ok"}]},
        "$.driver.env.AB_STEPS[0]",
    ),
    (
        {"AB_STEPS": [{"ab": ["open"]}], "AB_CHECKS": [{"kind": "ab_ok", "step": 3}]},
        "$.driver.env.AB_CHECKS[0].step",
    ),
    (
        {"AB_STEPS": [{"ab": ["open"]}], "AB_CHECKS": [{"kind": "ab_shiny"}]},
        "$.driver.env.AB_CHECKS[0].kind",
    ),
    (
        {
            "AB_STEPS": [{"ab": ["open"]}],
            "AB_CHECKS": [{"kind": "any_of", "checks": [{"kind": "saved_equals"}]}],
        },
        "$.driver.env.AB_CHECKS[0].checks[0].expected",
    ),
]


@pytest.mark.parametrize(("env", "where"), BAD)
def test_bad_ab_steps_or_checks_name_their_json_path(env: dict[str, Any], where: str) -> None:
    assert where in [path for path, _ in ab_probe_problems({"env": env})]


def test_every_corpus_tool_probe_task_is_valid() -> None:
    files = sorted((lexbench_or_skip() / "tasks" / SUBSET).glob("*.json"))
    assert len(files) == 60
    for file in files:
        assert list(ab_probe_problems(json.loads(file.read_text())["driver"])) == [], file.name


def test_a_corpus_with_a_bad_ab_check_is_refused_naming_file_and_path(tmp_path: Path) -> None:
    corpus = lexbench_or_skip()
    copy_root = tmp_path / "corpus"
    (copy_root / "tasks").mkdir(parents=True)
    manifest = {
        "bench_id": "t",
        "bench_version": "0.0.1",
        "default_k_runs": 1,
        "layers": [
            {
                "layer_id": "L1",
                "subsets": [
                    {"subset_id": "t.ab", "driver": "node_cdp_probe", "task_glob": "tasks/*.json"}
                ],
            }
        ],
    }
    (copy_root / "manifest.json").write_text(json.dumps(manifest))
    (copy_root / "fixtures").symlink_to(corpus / "fixtures")
    task = load_task(SUBSET, "ab_main_get_title")
    task["subset_id"] = "t.ab"
    task["driver"]["env"]["AB_CHECKS"][1]["kind"] = "ab_shiny"
    (copy_root / "tasks" / "bad.json").write_text(json.dumps(task))
    out = tmp_path / "runs"
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(copy_root),
        "--engines",
        "chrome",
        "--out",
        str(out),
        "--run-id",
        "r",
        "--no-progress",
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "tasks/bad.json: $.driver.env.AB_CHECKS[1].kind" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and not out.exists()
