"""The driver vocabulary proven cell by cell: every implemented (op, driver path) cell of
``drivers/ops.json`` passes its generated probe on a real Chrome, every refused cell fails its step
with the named refusal, and on Lightpanda each cell either passes or fails carrying the engine's
own error (never an adapter crash or a silent pass). Each path runs in one long-lived adapter
process, one attempt per probe family (the probes of one fixture page), engines shared."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from driver_helpers import CATALOG, REPO, Bench, engine_bench, found_or_skip
from metewand.suites.browser import driver_ops, op_probes
from metewand.suites.browser.adapter_payload import AttemptIds, build_payload
from metewand.suites.browser.adapter_server import open_adapter
from metewand.suites.browser.adapters import AdapterRun
from metewand.suites.browser.driver_registry import load_binding

# a path under this host's temporary directory, up to its last '/': left out of the errors compared
TEMP_PATH = re.escape(tempfile.gettempdir()) + r"/[^\s\"']*/"

pytestmark = [pytest.mark.engines, pytest.mark.slow]
MATRIX = driver_ops.load_matrix()


def _implemented(key: str) -> list[str]:
    return [c.op for c in MATRIX.cells() if c.path == key and c.implemented]


def _refused(key: str) -> list[str]:
    return [c.op for c in MATRIX.cells() if c.path == key and not c.implemented]


def _tasks(key: str) -> list[dict[str, Any]]:
    wanted = set(_implemented(key))
    tasks = [
        op_probes.family_task(key, [op for op in ops if op in wanted], f"ops{i}__{key}")
        for i, ops in enumerate(op_probes.families().values())
        if any(op in wanted for op in ops)
    ]
    if _refused(key):
        tasks.append(op_probes.refusal_task(key, _refused(key)))
    return tasks


def _run_all(bench: Bench, key: str, work: Path) -> list[tuple[dict[str, Any], AdapterRun]]:
    found = found_or_skip(key)
    binding = load_binding(CATALOG, bench.endpoint.name, key) if CATALOG.is_file() else None

    async def go() -> list[tuple[dict[str, Any], AdapterRun]]:
        runner = open_adapter(found.command, "long_lived", key, work / "served.log")
        runs = []
        try:
            for attempt, task in enumerate(_tasks(key), start=1):
                folder = work / task["task_id"]
                folder.mkdir(parents=True, exist_ok=True)
                ids = AttemptIds("ops", attempt, "seed0", str(folder))
                payload = build_payload(task, key, bench.endpoint, bench.base_url, ids, binding)
                run = await runner.run(
                    payload, payload["task_timeout_ms"] / 1000 + 5, folder / "stderr.txt"
                )
                runs.append((task, run))
        finally:
            await runner.close()
        return runs

    return asyncio.run(go())


def _cells(runs: list[tuple[dict[str, Any], AdapterRun]]) -> dict[str, list[dict[str, Any]]]:
    """Check rows per op (label op:<op>:... or refused:<op>)."""
    cells: dict[str, list[dict[str, Any]]] = {}
    for _task, run in runs:
        for check in run.checks:
            name = str(check.get("name"))
            if name.startswith(("op:", "refused:")):
                cells.setdefault(name.split(":")[1], []).append(check)
    return cells


@pytest.fixture(scope="module")
def chrome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield from engine_bench("chrome", tmp_path_factory.mktemp("ops-chrome"), op_probes.FIXTURES)


@pytest.fixture(scope="module")
def lightpanda(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield from engine_bench("lightpanda", tmp_path_factory.mktemp("ops-lp"), op_probes.FIXTURES)


@pytest.mark.parametrize("key", driver_ops.INSTALLABLE)
def test_every_cell_of_a_path_on_chrome(key: str, chrome: Bench, tmp_path: Path) -> None:
    runs = _run_all(chrome, key, tmp_path)
    for task, run in runs:
        assert run.outcome == "result", (task["task_id"], run.detail, run.stderr_tail)
    cells = _cells(runs)
    failed = {op: [c for c in rows if c["status"] != "pass"] for op, rows in cells.items()}
    failed = {op: rows for op, rows in failed.items() if rows}
    assert failed == {}, json.dumps(failed, indent=1)
    assert sorted(cells) == sorted(_implemented(key) + _refused(key))
    for op in _refused(key):
        [row] = cells[op]
        reason = MATRIX.refusal(op, key)
        assert reason is not None and reason in str(row["evidence"]), row
    assert chrome.engine.is_alive()


RECORD = REPO / "drivers" / "ops_lightpanda.json"


def _outcomes(key: str, runs: list[tuple[dict[str, Any], AdapterRun]]) -> dict[str, dict[str, str]]:
    """Each implemented cell's outcome: pass, or fail with the engine's error (the failing
    checks' evidence, or the connect failure when the driver could not attach)."""
    cells = _cells(runs)
    connect = {
        str(c.get("evidence"))
        for _, run in runs
        for c in run.checks
        if c.get("name") == "driver_connect" and c.get("status") != "pass"
    }
    out = {}
    for op in _implemented(key):
        failed = [str(r.get("evidence")) for r in cells.get(op, []) if r["status"] != "pass"]
        if failed and connect:
            failed = sorted(connect)
        error = re.sub(TEMP_PATH, "", " | ".join(failed))  # no host temp paths
        out[op] = {"status": "fail", "error": error} if failed else {"status": "pass"}
    return out


@pytest.mark.parametrize("key", driver_ops.INSTALLABLE)
def test_every_cell_of_a_path_on_lightpanda_passes_or_names_the_engine_error(
    key: str, lightpanda: Bench, tmp_path: Path
) -> None:
    """A cell recorded as passing on Lightpanda (drivers/ops_lightpanda.json) still passes; a
    cell that fails carries the engine's error in its evidence, never an adapter crash.
    METEWAND_OPS_RECORD=1 rewrites this path's record from the run."""
    runs = _run_all(lightpanda, key, tmp_path)
    for task, run in runs:
        assert run.outcome == "result", (task["task_id"], run.detail, run.stderr_tail)
    outcomes = _outcomes(key, runs)
    for op, outcome in outcomes.items():
        if outcome["status"] == "fail":
            assert outcome["error"].strip() and "unsupported op" not in outcome["error"], (
                op,
                outcome,
            )
    record = json.loads(RECORD.read_text()) if RECORD.is_file() else {}
    if os.environ.get("METEWAND_OPS_RECORD") == "1":
        record[key] = outcomes
        RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    recorded = record.get(key, {})

    def regressed(seen: dict[str, dict[str, str]]) -> list[str]:
        return [
            op
            for op, o in seen.items()
            if o["status"] == "fail" and recorded.get(op, {}).get("status") == "pass"
        ]

    if regressed(outcomes):  # a loaded host can make one engine answer late: a second run decides
        outcomes = _outcomes(key, _run_all(lightpanda, key, tmp_path / "again"))
    assert regressed(outcomes) == [], {op: outcomes[op] for op in regressed(outcomes)}
    assert lightpanda.engine.is_alive()


@pytest.mark.parametrize("key", driver_ops.INSTALLABLE)
def test_the_adapter_op_table_is_the_matrix_column(key: str) -> None:
    """An adapter lists exactly the ops its column implements (``--list-ops``)."""
    found = found_or_skip(key)
    listed = subprocess.run(
        [*found.command.argv, "--list-ops"], capture_output=True, text=True, timeout=60, check=True
    )
    assert sorted(json.loads(listed.stdout.strip().splitlines()[-1])) == sorted(_implemented(key))


@pytest.mark.parametrize("key", ["playwright", "cdp_use"])
def test_after_a_failed_new_page_no_step_runs_on_the_previous_page(
    key: str, lightpanda: Bench, tmp_path: Path
) -> None:
    """Lightpanda holds one page: the second new_page fails, and the isolation read after it must
    fail naming that step, not read the first page (a check of isolation would pass wrongly)."""
    found = found_or_skip(key)
    task = op_probes.family_task(key, ["title"], f"guard__{key}")
    task["driver"]["steps"] += [
        {"op": "new_page"},
        {"op": "evaluate", "expression": "document.title", "save_as": "second_title"},
        {"op": "wait_ms", "ms": 1},
    ]
    steps = len(task["driver"]["steps"])
    task["driver"]["checks"] = [
        {"kind": "step_fails", "step": steps - 3, "label": "second_page_refused"},
        {
            "kind": "saved_contains",
            "name": "second_title",
            "label": "read_refused",
            "expected": f"no page: new_page at step {steps - 3} failed",
        },
        {"kind": "step_ok", "step": steps - 1, "label": "pageless_op_runs"},
    ]
    binding = load_binding(CATALOG, "lightpanda", key) if CATALOG.is_file() else None
    ids = AttemptIds("ops", 1, "seed0", str(tmp_path))
    payload = build_payload(task, key, lightpanda.endpoint, lightpanda.base_url, ids, binding)
    runner = open_adapter(found.command, "per_attempt", key)
    run = asyncio.run(runner.run(payload, 40, tmp_path / "stderr.txt"))
    assert run.outcome == "result", (run.detail, run.stderr_tail)
    assert [c["status"] for c in run.checks[1:]] == ["pass", "pass", "pass"], run.checks
