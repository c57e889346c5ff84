"""One browser attempt, one shape: drivers and observers are registry entries the attempt runner
knows by no name, and a row is built once, whole.

- A toy observer and a toy driver, each one class and one registry entry, show up in the rows of
  a real run (real Chromium, real fixture server) beside the registered ones.
- The row builder refuses two owners for one field.
- Nothing patches a row after its builder: a walk of the attempt runner's and the suite's AST,
  with a planted patch of each kind it must catch.
"""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import ABOUT_BLANK_TASK, rows_of, tiny_corpus
from metewand.suites.browser import classify
from metewand.suites.browser.attempt_driver import (
    AttemptResult,
    DriverContext,
    write_artifacts,
)
from metewand.suites.browser.attempt_registry import (
    ATTEMPT_DRIVERS,
    ATTEMPT_OBSERVERS,
    AttemptRegistry,
)
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.observers.base import (
    AttemptEnd,
    Observed,
    Observer,
    ObserverSetup,
)
from metewand.suites.browser.rows import PlannedAttempt, attempt_row, base_row
from metewand.suites.browser.tasks import Task, load_corpus

SRC = Path(__file__).resolve().parents[1] / "src" / "metewand" / "suites" / "browser"
OWN_SUITE = SRC.parents[1] / "data" / "browser_suite"


class ToyObserver(Observer):
    """Records the steps it was called at and what it saw; writes one file."""

    def __init__(self, setup: ObserverSetup) -> None:
        self.setup = setup
        self.steps: list[str] = []

    @classmethod
    def of(cls, setup: ObserverSetup) -> ToyObserver:
        return cls(setup)

    def begin(self) -> None:
        self.steps.append("begin")

    def work_done(self) -> None:
        self.steps.append("work_done")

    async def stop(self) -> None:
        self.steps.append("stop")

    def end(self, ended: AttemptEnd) -> Observed:
        self.steps.append("end")
        (self.setup.out_dir / "toy_observer.txt").write_text(self.setup.planned.key)
        block = {
            "steps": list(self.steps),
            "status_seen": ended.result.status,
            "fields_before": sorted(ended.fields),
        }
        return Observed("toy", {"toy": block}, ("toy_observer.txt",))


class ToyDriver:
    """Takes the task ``toy_task`` and passes it without a word to the engine (a driver is
    whatever returns an ``AttemptResult``); its file goes through the one artifact writer."""

    def handles(self, task: Task) -> bool:
        return task.task_id == "toy_task"

    def phase_granularity(self, task: Task) -> str:
        return "toy"

    async def run(
        self, planned: PlannedAttempt, engine: EngineProcess, ctx: DriverContext
    ) -> AttemptResult:
        result = AttemptResult.of(
            classify.passed(),
            checks=(),
            duration_ms=0,
            cdp_wait_ms=None,
            cdp_commands=None,
            cdp_errors=None,
            answer=engine.pid is not None,
            isolation=ctx.isolation,
            row_fields={"toy_driver": True},
        )
        return write_artifacts(ctx.out_dir, result, None, [("toy_driver.txt", b"toy")])


@pytest.mark.engines
def test_a_toy_driver_and_a_toy_observer_registered_show_up_in_real_rows(tmp_path: Path) -> None:
    from metewand.suites.browser.run_config import RunConfig
    from metewand.suites.browser.runner import run_browser

    toy_task = {**copy.deepcopy(ABOUT_BLANK_TASK), "task_id": "toy_task"}
    corpus = tiny_corpus(tmp_path / "corpus", {"a.json": ABOUT_BLANK_TASK, "b.json": toy_task})
    registry = AttemptRegistry(
        drivers=(ToyDriver(), *ATTEMPT_DRIVERS), observers=(*ATTEMPT_OBSERVERS, ToyObserver.of)
    )
    config = RunConfig(str(corpus), ("chrome",))
    said: list[str] = []
    result = run_browser(config, tmp_path / "runs", "toy", echo=said.append, registry=registry)
    assert result.exit_code == 0, said
    run_dir = tmp_path / "runs" / "toy"
    rows = {row["task_id"]: row for row in rows_of(run_dir)}
    assert set(rows) == {"tiny_eval", "toy_task"}
    for row in rows.values():
        assert row["status"] == "pass", row["reason"]
        toy = row["toy"]
        assert toy["steps"] == ["begin", "work_done", "stop", "end"]
        assert toy["status_seen"] == "pass"
        # the registered observers rendered their blocks before the toy's
        assert {"traffic", "phases"} <= set(toy["fields_before"])
        assert row["artifacts"][-1] == f"artifacts/{row['key']}/toy_observer.txt"
        assert (run_dir / row["artifacts"][-1]).read_text() == row["key"]
        assert row["traffic"]["schema"] == "abb_fixture_traffic/1"
    own, toy_row = rows["tiny_eval"], rows["toy_task"]
    assert "toy_driver" not in own and own["phases"]["granularity"] == "steps"
    assert any(a.endswith("/cdp.jsonl") for a in own["artifacts"])
    assert toy_row["toy_driver"] is True and toy_row["answer"] is True
    assert toy_row["phases"]["granularity"] == "toy"
    names = [a.rsplit("/", 1)[1] for a in toy_row["artifacts"]]
    assert names == ["toy_driver.txt", "grader.json", "outcome.json", "toy_observer.txt"]
    outcome = json.loads((run_dir / "artifacts" / toy_row["key"] / "outcome.json").read_text())
    assert outcome["artifacts"] == ["toy_driver.txt", "grader.json"]


def _base() -> dict[str, Any]:
    task = next(t for t in load_corpus(OWN_SUITE).tasks if t.task_id == "own_eval_values")
    return base_row("r1", PlannedAttempt(task, "chrome", 1, 0, 0), "shared", "s")


def _result() -> AttemptResult:
    return AttemptResult.of(
        classify.passed(),
        checks=(),
        duration_ms=5,
        cdp_wait_ms=1.0,
        cdp_commands=2,
        cdp_errors=0,
        answer=2,
        isolation="shared",
    )


@pytest.mark.parametrize(
    "blocks",
    [
        [Observed("a", {"traffic": 1}), Observed("b", {"traffic": 2})],  # two observers
        [Observed("a", {"status": "fail"})],  # the head's
        [Observed("a", {"engine": "other"})],  # the base's
        [Observed("a", {"checks": []})],  # the result's
    ],
)
def test_the_row_builder_refuses_two_owners_for_one_field(blocks: list[Observed]) -> None:
    with pytest.raises(ValueError, match="row fields another part owns"):
        attempt_row(
            _base(),
            _result(),
            blocks,
            started_at="t0",
            finished_at="t1",
            engine_process={},
            engine_provenance={},
            run_context={},
        )


def test_the_row_builder_returns_the_whole_row_with_each_block() -> None:
    row = attempt_row(
        _base(),
        _result(),
        [Observed("a", {"x": 1}, ("a.txt",)), Observed("b")],
        started_at="t0",
        finished_at="t1",
        engine_process={},
        engine_provenance={},
        run_context={},
    )
    assert row["x"] == 1 and row["status"] == "pass" and row["cdp_call_count"] == 2
    key = row["key"]
    assert row["artifacts"] == [f"artifacts/{key}/outcome.json", f"artifacts/{key}/a.txt"]


# --- nothing patches a row after its builder ------------------------------------------------

ROW_BUILDERS = frozenset({"attempt_row", "not_run_row"})
# calls whose value is a row: the builders, and what hands a built row on
ROW_SOURCES = ROW_BUILDERS | {"attempt", "run", "_attempt", "_not_run"}
MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__"})


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Await):
        node = node.value
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _row_sources(value: ast.AST) -> bool:
    return any(_call_name(node) in ROW_SOURCES for node in ast.walk(value))


def row_patches(source: str) -> list[str]:
    """Where ``source`` could change a row after its builder returned: a builder call that is
    not returned as it is, or a name bound to a row that is then written into."""
    tree = ast.parse(source)
    found: list[str] = []
    returned = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Return) and n.value}
    for node in ast.walk(tree):
        builder = isinstance(node, ast.Call) and _call_name(node) in ROW_BUILDERS
        if builder and id(node) not in returned:
            found.append(f"line {node.lineno}: {_call_name(node)}(...) not returned as built")
    rows = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and node.value is not None
        and _row_sources(node.value)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):
        written: ast.AST | None = None
        if isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            written = next((t.value for t in targets if isinstance(t, ast.Subscript)), None)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            written = node.func.value if node.func.attr in MUTATORS else None
        if isinstance(written, ast.Name) and written.id in rows:
            found.append(f"line {node.lineno}: row {written.id!r} written after it was built")
    return found


@pytest.mark.parametrize("module", ["attempt_runner.py", "suite.py"])
def test_nothing_patches_a_row_after_its_builder(module: str) -> None:
    assert row_patches((SRC / module).read_text()) == []


@pytest.mark.parametrize(
    "planted",
    [
        "def f(b, r):\n    row = attempt_row(b, r)\n    return row\n",
        "def f(b, r):\n    row = attempt_row(b, r)\n    row['traffic'] = 1\n",
        "def f(b, r):\n    return {**attempt_row(b, r), 'x': 1}\n",
        "async def f(s, p):\n    row = await s.attempt(p)\n    row.update(x=1)\n",
        "def f(s, p):\n    row = s._not_run(p) or s.attempt(p)\n    del row['x']\n",
        "def f(s, p):\n    row = s.attempt(p)\n    row['n'] += 1\n",
    ],
)
def test_the_row_patch_walk_catches_a_planted_patch(planted: str) -> None:
    assert row_patches(planted) != []
