"""A short real run: chrome and lightpanda, real fixture server, rows, artifacts, scores.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from browser_run_helpers import lexbench_or_skip, manifest_of, rows_of
from metewand.compare.generate import write_after_run
from metewand.suites.browser.leftovers import run_processes
from metewand.suites.browser.run_config import RunConfig, builtin_suite_dir
from metewand.suites.browser.runner import run_browser

ROW_KEYS = {
    "key",
    "run_id",
    "layer",
    "subset",
    "task_id",
    "engine",
    "attempt",
    "status",
    "failure_class",
    "origin",
    "secondary_status",
    "reason",
    "duration_ms",
    "started_at",
    "finished_at",
    "isolation",
    "order",
    "checks",
    "traffic",
    "artifacts",
}
# An about:blank task, a fixture-page task and a server-graded l2 probe.
LEX_TASKS = (
    "pw_raw_runtime_evaluateprimitives",
    "pw_raw_dom_describenode",
    "r3_dA_e_before_content",
)


def _run(tmp_path: Path, config: RunConfig) -> Path:
    messages: list[str] = []
    result = run_browser(config, tmp_path, "r", echo=messages.append)
    assert result.exit_code == 0, messages
    assert result.run_dir is not None
    write_after_run(result.run_dir)  # what the CLI does after a run: the derived files
    return result.run_dir


def _check_run(run_dir: Path, tasks: int, engines: tuple[str, ...]) -> list[dict[str, object]]:
    rows = rows_of(run_dir)
    assert len(rows) == tasks * len(engines)
    assert len({r["key"] for r in rows}) == len(rows)
    for row in rows:
        assert set(row) >= ROW_KEYS, ROW_KEYS - set(row)
        assert row["status"] in ("pass", "fail", "unsupported", "timeout", "crash")
        for rel in row["artifacts"]:  # type: ignore[attr-defined]
            assert (run_dir / rel).is_file(), rel
        assert any(str(a).endswith("cdp.jsonl") for a in row["artifacts"])  # type: ignore[attr-defined]
        assert row["traffic"]["schema"] == "abb_fixture_traffic/1"  # type: ignore[index]
    manifest = manifest_of(run_dir)
    assert manifest["state"] == "complete"
    data = manifest["data"]
    for engine in engines:
        identity = data["engines"][engine]
        assert len(identity["binary_sha256"]) == 64 and identity["json_version"]
    assert (
        data["engine_reuse"]
        and data["runner"]["source"]["tree_sha256"]
        and data["corpus"]["sha256"]
    )
    assert "provenance" not in data and "harness_pin" not in data  # written once: host, runner
    for worker in data["teardown"].values():
        assert all(report["clean"] for report in worker.values())
    scores = json.loads((run_dir / "scores.json").read_text())
    assert scores["engines"] == list(engines)
    assert sum(scores["by_engine"][e]["attempts"]["total"] for e in engines) == len(rows)
    assert run_processes(run_dir, manifest["run_id"]) == []
    return rows  # type: ignore[return-value]


def test_real_run_lexbench_chrome_lightpanda(tmp_path: Path) -> None:
    corpus = lexbench_or_skip()
    engines = ("chrome", "lightpanda")
    config = RunConfig(str(corpus), engines, k=1, seed="t", task_ids=LEX_TASKS)
    rows = _check_run(_run(tmp_path, config), len(LEX_TASKS), engines)
    chrome = {r["task_id"]: r["status"] for r in rows if r["engine"] == "chrome"}
    assert chrome == dict.fromkeys(LEX_TASKS, "pass"), chrome


@pytest.mark.slow
def test_real_run_builtin_suite(tmp_path: Path) -> None:
    if not (builtin_suite_dir() / "manifest.json").is_file():
        pytest.skip("built-in suite manifest not present yet")
    engines = ("chrome", "lightpanda")
    config = RunConfig(str(builtin_suite_dir()), engines, k=1, seed="t")
    run_dir = _run(tmp_path, config)
    tasks = manifest_of(run_dir)["data"]["selection"]["tasks"]
    rows = _check_run(run_dir, tasks, engines)
    chrome_fail = [r["key"] for r in rows if r["engine"] == "chrome" and r["status"] != "pass"]
    assert not chrome_fail
