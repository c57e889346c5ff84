"""The browser suite's units: one round (a task-attempt on every engine, in the balanced order)
per unit, JSON-able, and a round a killed session cut runs only its missing engines."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from browser_run_helpers import ABOUT_BLANK_TASK, tiny_corpus
from metewand.runtime.suite import Unit
from metewand.suites.browser.run_config import RunConfig
from metewand.suites.browser.run_plan import build_plan
from metewand.suites.browser.suite import rounds

ENGINES = ("chrome", "lightpanda", "moli")


def _plan(tmp_path: Path):  # type: ignore[no-untyped-def]
    tasks = {}
    for n in range(3):
        task = copy.deepcopy(ABOUT_BLANK_TASK)
        task["task_id"] = f"tiny_{n}"
        tasks[f"t{n}.json"] = task
    corpus = tiny_corpus(tmp_path / "corpus", tasks)
    return build_plan(RunConfig(str(corpus), ENGINES, k=2, seed="s1"))


def test_a_unit_is_one_round_in_its_balanced_order(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    units = rounds(plan, set())
    assert len(units) == 3 * 2  # tasks x k
    by_key = {a.key: a for a in plan.attempts}
    for index, unit in enumerate(units):
        members = [by_key[key] for key in unit.keys]
        assert {a.round for a in members} == {index} and unit.payload == {"round": index}
        assert [a.position for a in members] == [0, 1, 2]
        assert sorted(a.engine for a in members) == sorted(ENGINES)
        assert len({(a.task.task_id, a.attempt) for a in members}) == 1
        assert Unit.from_json(json.loads(json.dumps(unit.to_json()))) == unit


def test_a_cut_round_runs_only_its_missing_engines(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    first, second = rounds(plan, set())[:2]
    done = set(first.keys[:2]) | set(second.keys)
    units = rounds(plan, done)
    assert units[0].keys == first.keys[2:] and units[0].payload == {"round": 0}
    assert all(unit.payload["round"] >= 2 for unit in units[1:])
    assert sum(len(u.keys) for u in units) == len(plan.attempts) - len(done)


def test_an_interrupt_after_one_slot_closed_stops_the_other(tmp_path: Path) -> None:
    """Real fixture servers on real loop threads: a slot whose queue ran out closes first."""
    from metewand.runtime.store import RunStore
    from metewand.suites.browser.profiler import ResourceProfiler
    from metewand.suites.browser.suite import BrowserSuite

    plan = _plan(tmp_path)
    with RunStore.create(tmp_path / "runs", "slots", {"suite": "browser"}) as store:
        profiler = ResourceProfiler(plan.config, store.run_dir, store.run_id)
        suite = BrowserSuite(plan, store, profiler, profiler)
        first, second = suite.open_slot("0"), suite.open_slot("1")
        first.close()
        suite.interrupt()  # the closed slot's loop is gone: nothing to cancel there
        assert second.stopping
        assert suite.run_unit(second, rounds(plan, set())[0]) == []  # refused, no attempt
        second.close()
        profiler.close()
    assert set(suite.teardown_reports) == {"worker-0", "worker-1"}
    assert not first.loop.is_running() and not second.loop.is_running()
