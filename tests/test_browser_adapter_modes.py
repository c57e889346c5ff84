"""``browser run --adapter-mode`` (issue #15): the same driver tasks on a real Chromium through
a process per attempt and through one served adapter per driver path × engine in the slot give
the same statuses, the mode is recorded in the manifest and in every row, and no adapter process
outlives the run. The long-lived run also asks for ``--driver-isolation shared`` (the per-attempt
run has the default, context): both are recorded, and each row says where its pages were."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import alive, cli, lexbench_or_skip, manifest_of, rows_of
from metewand.suites.browser.driver_registry import DriverMissing, resolve_driver

pytestmark = [pytest.mark.engines, pytest.mark.slow]

# Two tasks of two driver paths (one Node, one Python adapter), twice each.
TASKS = {
    "chrome_remote_interface": ["sc_nav_title_read__cri", "sc_app_add_single_item__cri"],
    "cdp_use": ["sc_nav_title_read__cdpu", "sc_nav_back_restores__cdpu"],
}


ISOLATION = {"per-attempt": "context", "long-lived": "shared"}


def _run(out: Path, mode: str) -> Path:
    corpus = lexbench_or_skip()
    for key in TASKS:
        if isinstance(found := resolve_driver(key), DriverMissing):
            pytest.skip(f"{key}: {found.detail}")
    args = [a for tasks in TASKS.values() for t in tasks for a in ("--task", t)]
    done = cli(
        "browser",
        "run",
        "--tasks",
        str(corpus),
        "--engines",
        "chrome",
        "--k",
        "2",
        "--adapter-mode",
        mode,
        "--driver-isolation",
        ISOLATION[mode],
        "--out",
        str(out),
        "--run-id",
        mode,
        "--no-progress",
        *args,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out / mode


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    out = tmp_path_factory.mktemp("adapter-modes")
    yield {mode: _run(out, mode) for mode in ("per-attempt", "long-lived")}


def _by_attempt(run: Path) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["task_id"], r["attempt"]): r for r in rows_of(run)}


def test_both_modes_give_the_same_statuses(runs: dict[str, Path]) -> None:
    per_attempt, long_lived = (_by_attempt(runs[m]) for m in ("per-attempt", "long-lived"))
    assert per_attempt.keys() == long_lived.keys() and len(per_attempt) == 8
    for key, row in per_attempt.items():
        assert row["status"] == long_lived[key]["status"] == "pass", (key, row["reason"])


def test_the_mode_is_in_the_manifest_and_every_row(runs: dict[str, Path]) -> None:
    for cli_mode, mode in (("per-attempt", "per_attempt"), ("long-lived", "long_lived")):
        manifest = manifest_of(runs[cli_mode])["data"]
        assert manifest["adapter_mode"] == manifest["config"]["adapter_mode"] == mode
        isolation = ISOLATION[cli_mode]
        assert manifest["driver_isolation"] == manifest["config"]["driver_isolation"] == isolation
        for row in rows_of(runs[cli_mode]):
            assert row["adapter_mode"] == mode
            assert row["isolation"] == row["driver_isolation_asked"] == isolation
            assert row["adapter"]["leftover_pids"] == []
            assert row["driver_resources"]["cpu_total_ms"] > 0  # per attempt in both modes


def test_long_lived_rows_of_a_driver_share_one_served_process_that_is_gone_after(
    runs: dict[str, Path],
) -> None:
    for row in rows_of(runs["per-attempt"]):
        assert row["adapter_served"] is None  # a fresh process each time
    served: dict[str, set[int]] = {}
    for row in rows_of(runs["long-lived"]):
        facts = row["adapter_served"]
        assert facts["starts"] == 1, facts  # opened once per driver × engine, never restarted
        served.setdefault(row["driver_path"], set()).add(facts["pid"])
    assert {key: len(pids) for key, pids in served.items()} == {key: 1 for key in TASKS}
    for (pid,) in served.values():
        assert not alive(pid)  # closed at slot teardown
