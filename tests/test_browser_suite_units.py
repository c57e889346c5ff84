"""The browser suite's units: one round (a task-attempt on every engine, in the balanced order)
per unit, JSON-able, and a round a killed session cut runs only its missing engines."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

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


def _worker_ref(tmp_path: Path, config: RunConfig, corpus_sha256: str | None = None) -> Any:
    from metewand.runtime.store import RunStore
    from metewand.runtime.suite import SuiteRef
    from metewand.suites.browser.run_plan import corpus_digest
    from metewand.suites.browser.suite import suite_config

    with RunStore.create(tmp_path / "runs", "r", {"suite": "browser"}) as store:
        run_dir = store.run_dir
    digest = corpus_sha256 or corpus_digest(Path(config.tasks_dir))["sha256"]
    return SuiteRef("browser", json.loads(json.dumps(suite_config(config, run_dir, digest))))


def test_a_dask_worker_rebuilds_the_clients_plan_and_writes_no_manifest(tmp_path: Path) -> None:
    from metewand.runtime.suite import build

    plan = _plan(tmp_path)
    ref = _worker_ref(tmp_path, plan.config)
    manifest = Path(ref.config["run_dir"]) / "run_manifest.json"
    before = manifest.read_bytes()
    suite: Any = build(ref)  # the registry's from_ref, as a worker calls it
    assert suite.worker_side
    assert [a.key for a in suite.plan.attempts] == [a.key for a in plan.attempts]
    assert [u.keys for u in rounds(suite.plan, set())] == [u.keys for u in rounds(plan, set())]
    suite.slot_closed("dask-w1", {"chrome": {"clean": True}})
    assert suite.take_facts() == [
        {"kind": "teardown", "slot": "dask-w1", "reports": {"chrome": {"clean": True}}}
    ]
    assert suite.take_facts() == []
    assert manifest.read_bytes() == before


def test_a_dask_worker_refuses_another_corpus_and_profiles_its_own_engines(
    tmp_path: Path,
) -> None:
    import dataclasses

    import pytest

    from metewand.runtime.host_name import worker_place
    from metewand.runtime.suite import build
    from metewand.suites.browser.profiler import ResourceProfiler
    from metewand.suites.browser.run_config import ResourceOptions
    from metewand.suites.browser.run_plan import PlanError

    plan = _plan(tmp_path)
    with pytest.raises(PlanError, match="corpus sha256 .* on this worker differs from the client"):
        build(_worker_ref(tmp_path, plan.config, corpus_sha256="0" * 64))
    profiled = dataclasses.replace(plan.config, resource=ResourceOptions(profile="engine"))
    ref = _worker_ref(tmp_path / "p", profiled)
    suite: Any = build(ref)  # its own groups, sampler, telemetry and cold starts
    assert isinstance(suite.profiler, ResourceProfiler) and suite.cold_starts_here
    telemetry = suite.worker_telemetry(1)
    assert telemetry is not None and telemetry.foreign.member_pids is not None
    ref.config["cold_start_places"] = [worker_place()]  # this place has them from a session
    assert not build(ref).cold_starts_here


def test_a_worker_whose_engine_binaries_differ_from_the_pins_is_refused(tmp_path: Path) -> None:
    import dataclasses

    from metewand.suites.browser.engines import resolve
    from metewand.suites.browser.run_config import ResourceOptions
    from metewand.suites.browser.suite import admit, engine_pins

    plan = _plan(tmp_path)
    config = dataclasses.replace(
        plan.config, engines=("lightpanda",), resource=ResourceOptions(profile="engine")
    )
    ref = _worker_ref(tmp_path, config)
    assert admit(ref) is None  # no pins: a functional run takes each host's own binaries
    pins = engine_pins(build_plan(config))
    ref.config["engine_pins"] = pins
    assert admit(ref) is None
    ref.config["engine_pins"] = {"lightpanda": "0" * 64}
    found = resolve("lightpanda")
    assert admit(ref) == (
        f"engine lightpanda binary {found.binary} has sha256 {pins['lightpanda']}, not the "  # type: ignore[union-attr]
        f"run's pin {'0' * 64} (a profiled comparison runs the same binaries on every host)"
    )
    missing = dataclasses.replace(config, engine_paths={"lightpanda": str(tmp_path / "none")})
    ref = _worker_ref(tmp_path / "m", missing)
    ref.config["engine_pins"] = pins
    assert admit(ref).startswith("engine lightpanda not found on this host (configured path ")


def test_a_profiled_dask_unit_is_a_whole_rotation_cycle(tmp_path: Path) -> None:
    """Each host then holds whole cycles: every engine once in every position per unit."""
    plan = _plan(tmp_path)
    by_key = {a.key: a for a in plan.attempts}
    units = rounds(plan, set(), cycles=True)
    assert [u.payload["rounds"] for u in units] == [[0, 1, 2], [3, 4, 5]]
    for unit in units:
        members = [by_key[key] for key in unit.keys]
        slots = {(a.engine, a.position) for a in members}
        assert len(slots) == len(members) == 9  # 3 engines x 3 positions, each once
    done = set(units[0].keys[:4])  # a cut cycle keeps the rest of it together
    assert rounds(plan, done, cycles=True)[0].keys == units[0].keys[4:]


def test_rows_of_a_host_name_that_hosts_binary_once_a_run_had_workers(tmp_path: Path) -> None:
    """A run with per-host identities (a Dask session) hands a local session's rows only this
    host's hash: the workers' hosts may have other binaries. A run without them is unchanged."""
    import socket

    from metewand.runtime.store import RunStore
    from metewand.suites.browser.suite import BrowserSuite

    plan = _plan(tmp_path)
    theirs = {"found": True, "binary_sha256": "a" * 64}
    ours = {"found": True, "binary_sha256": "b" * 64}
    cases = [
        ({"engines": {"chrome": theirs}}, theirs),
        ({"engines": {"chrome": theirs}, "engines_by_host": {"elsewhere": {"chrome": theirs}}}, {}),
        (
            {
                "engines": {"chrome": theirs},
                "engines_by_host": {
                    "elsewhere": {"chrome": theirs},
                    socket.gethostname(): {"chrome": ours},
                },
            },
            ours,
        ),
    ]
    for index, (data, expected) in enumerate(cases):
        with RunStore.create(tmp_path / "runs", f"r{index}", {"suite": "browser", **data}) as store:
            suite = BrowserSuite(plan, store, None)
            assert suite.identity_of("chrome") == expected, data


def test_a_local_slot_runs_its_rounds_on_its_loop_thread_one_row_before_the_next_attempt(
    tmp_path: Path,
) -> None:
    """Real Lightpanda attempts and a missing engine's rows: every event comes from the slot's
    event loop thread (no hand-over to the slot thread around an attempt), in plan order."""
    import threading

    from metewand.runtime.executor import LocalExecutor
    from metewand.runtime.store import RunStore
    from metewand.suites.browser.profiler import ResourceProfiler
    from metewand.suites.browser.suite import BrowserSuite

    tasks = {
        f"t{n}.json": {**copy.deepcopy(ABOUT_BLANK_TASK), "task_id": f"tiny_{n}"} for n in range(2)
    }
    corpus = tiny_corpus(tmp_path / "corpus", tasks)
    plan = build_plan(RunConfig(str(corpus), ("lightpanda", "moli"), k=1, seed="s1"))
    events: list[tuple[str, str, str]] = []

    class Sink:
        def attempt_started(self, label: str) -> None:
            events.append(("started", label, threading.current_thread().name))

        def attempt_finished(self, row: dict[str, Any]) -> None:
            events.append(("finished", row["key"], threading.current_thread().name))
            finished[row["key"]] = row["status"]

    finished: dict[str, str] = {}
    with RunStore.create(tmp_path / "runs", "loop", {"suite": "browser"}) as store:
        profiler = ResourceProfiler(plan.config, store.run_dir, store.run_id)
        suite = BrowserSuite(plan, store, profiler)
        try:
            LocalExecutor(1).run(suite, suite.units(), Sink())
        finally:
            suite.teardown()
            profiler.close()
    assert {thread for _, _, thread in events} == {"mw-slot-loop-0"}
    by_key = {a.key: a for a in plan.attempts}
    order = [key for unit in rounds(plan, set()) for key in unit.keys]
    assert [kind for kind, _, _ in events] == ["started", "finished"] * len(order)
    assert [key for kind, key, _ in events if kind == "finished"] == order
    assert [label for kind, label, _ in events if kind == "started"] == [
        by_key[key].label for key in order
    ]
    statuses = {by_key[key].engine: status for key, status in finished.items()}
    assert statuses == {"lightpanda": "pass", "moli": "unsupported"}
