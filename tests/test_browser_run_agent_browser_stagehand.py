"""agent-browser and Stagehand driver paths in ``metewand browser run`` (issue #15): a few tasks of
each subset on a real Chromium and a real Lightpanda, through the shipped adapters (the run's
default long-lived mode), graded by the adapters' check rows and the fixture server's grader."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import cli, lexbench_or_skip, rows_of
from metewand.suites.browser.driver_registry import DRIVER_PATHS, DriverMissing, resolve_driver

pytestmark = [pytest.mark.engines, pytest.mark.slow]

TASKS = {
    "agent_browser": ["sc_nav_title_read__ab", "sc_app_cart_total_two_items__ab"],
    "stagehand": ["sc_app_add_single_item__sh", "sc_nav_back_restores__sh"],
}
ENGINES = ("chrome", "lightpanda")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    corpus = lexbench_or_skip()
    for key in TASKS:
        if isinstance(found := resolve_driver(key), DriverMissing):
            pytest.skip(f"{key}: {found.detail}")
    out = tmp_path_factory.mktemp("ab-sh")
    args = [a for tasks in TASKS.values() for t in tasks for a in ("--task", t)]
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        ",".join(ENGINES),
        "--out",
        str(out),
        "--run-id",
        "absh",
        "--no-progress",
        *args,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]  # no infra or crash row
    yield out / "absh"


def _rows(run: Path, key: str, engine: str) -> list[dict[str, Any]]:
    return [r for r in rows_of(run) if r["driver_path"] == key and r["engine"] == engine]


@pytest.mark.parametrize("key", sorted(TASKS))
def test_the_tasks_pass_on_chrome_with_the_driver_cost_measured(run: Path, key: str) -> None:
    rows = _rows(run, key, "chrome")
    assert sorted(r["task_id"] for r in rows) == sorted(TASKS[key])
    for row in rows:
        assert row["status"] == "pass", (row["task_id"], row["reason"])
        assert row["driver"] == DRIVER_PATHS[key].task_kind
        assert row["driver_version"] == DRIVER_PATHS[key].version
        assert row["adapter_mode"] == "long_lived" and row["adapter"]["outcome"] == "result"
        assert {c["kind"] for c in row["checks"]} == {"driver", "server_side"}, row["checks"]
        assert row["driver_resources"]["cpu_total_ms"] > 0


@pytest.mark.parametrize("key", sorted(TASKS))
def test_lightpanda_runs_them_with_no_infra_row(run: Path, key: str) -> None:
    rows = _rows(run, key, "lightpanda")
    assert sorted(r["task_id"] for r in rows) == sorted(TASKS[key])
    for row in rows:
        assert row["status"] not in ("infra", "crash"), (row["task_id"], row["reason"])
        assert row["adapter"]["outcome"] == "result", (row["task_id"], row["adapter"])
