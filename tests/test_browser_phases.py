"""Phase marks inside browser attempts, on real engines in real accounting groups (issue #16).

The truth check: a raw-CDP task whose one step burns ~300 ms of renderer CPU (a Runtime.evaluate
fixed-work loop) must carry that CPU in that step's engine phase. The witness is independent of the
group counters the marks read: every thread of every process in the engine's group is read from
``/proc/<pid>/task/<tid>/schedstat`` (the scheduler's own ns run time) at each mark, and the busy
thread is the one whose run time grew most during the step.

Tolerance, and why: the group's CPU over the step holds the busy thread's CPU entirely, so it is
at least 98% of it (both count the same ns of run time; the 2% covers the two readings being
taken a few µs apart). It is at most the CPU of all the group's threads over the step + 2% + 5 ms
(threads that exit during the step are missing from the witness, and Chrome's browser, GPU and
network processes do their own share of the work). In the neighbouring steps the burning thread
ran less than 10% of its burn, and the group less than in the burn step: the loop ran inside its
step and nowhere else (the group's own background work there is Chrome's, not the loop's).
"""

from __future__ import annotations

import asyncio
import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_engine_fixtures import resolved_or_skip
from browser_run_helpers import ABOUT_BLANK_TASK, tiny_corpus
from metewand.measure.accounting import TreeAccounting, open_accounting
from metewand.runtime.schemas import violations
from metewand.suites.browser.attempt import run_task_attempt
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.phase_marks import AttemptPhases
from metewand.suites.browser.tasks import load_corpus

pytestmark = pytest.mark.engines

# A fixed amount of work (~300 ms of one core on this host's V8), so a loaded host stretches its
# wall, not shrinks its CPU; capped at 3 s of wall in case an engine runs it far slower.
BURN = (
    "(() => { const t = performance.now(); let x = 0;"
    " for (let i = 0; i < 80e6; i++) { x = (x * 31 + i) % 1000003;"
    " if (i % 1e6 === 0 && performance.now() - t > 3000) break; } return x >= 0; })()"
)
BURN_STEP = "step1:Runtime.evaluate"


def _burn_task() -> dict[str, Any]:
    task = copy.deepcopy(ABOUT_BLANK_TASK)
    task["task_id"] = "burn"
    task["driver"]["steps"] = [
        {"method": "Runtime.evaluate", "params": {"expression": "1+1", "returnByValue": True}},
        {
            "method": "Runtime.evaluate",
            "params": {"expression": BURN, "returnByValue": True},
            "save_as": "value",
        },
        {"method": "Runtime.evaluate", "params": {"expression": "2+2", "returnByValue": True}},
    ]
    task["grader"]["checks"] = [{"kind": "value_equals", "expected": True}]
    return task


def _thread_cpu(pids: list[int]) -> dict[tuple[int, int], int]:
    """ns on CPU of every thread of ``pids`` (the scheduler's own count)."""
    out = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as handle:
                    out[(pid, int(tid))] = int(handle.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return out


class Witnessed(AttemptPhases):
    """The suite's marks, with every thread's schedstat read right after each one."""

    def __init__(self, group: TreeAccounting) -> None:
        super().__init__(group, "steps", concurrent=False)
        self.group = group
        self.witness: list[tuple[str | None, dict[tuple[int, int], int]]] = []

    def mark(self, name: str | None) -> None:
        super().mark(name)
        self.witness.append((name, _thread_cpu(self.group.pids())))


@pytest.fixture
def engine_in_group(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    resolved = resolved_or_skip(request.param)
    group = open_accounting(label=f"phases-test-{os.getpid()}")
    process = EngineProcess(resolved, tmp_path / "logs", preexec_fn=group.preexec_join())
    asyncio.run(process.start())
    assert process.pid is not None
    group.attach(process.pid)
    try:
        yield process, group
    finally:
        report = asyncio.run(process.stop())
        group.close()
        assert report.clean, report


def _cpu(phase: dict[str, Any]) -> int:
    form = phase["cpu_time_ns"]
    assert form["status"] == "complete", form
    return int(form["value"])


@pytest.mark.parametrize("engine_in_group", ["chrome", "lightpanda"], indirect=True)
def test_a_busy_step_is_charged_to_that_step(engine_in_group: Any, tmp_path: Path) -> None:
    process, group = engine_in_group
    root = tiny_corpus(tmp_path / "corpus", {"burn.json": _burn_task()})
    task = load_corpus(root).tasks[0]
    phases = Witnessed(group)
    outcome = asyncio.run(
        run_task_attempt(
            task,
            process.ws_url,
            process.engine.name,
            "http://127.0.0.1:9",
            tmp_path / "out",
            engine_alive=process.is_alive,
            phases=phases,
        )
    )
    assert outcome.status == "pass", (outcome.reason, outcome.checks)
    record = phases.to_json()
    assert violations("metewand_browser_attempt_phases-1", record) == []
    engine = record["engine"]
    names = [p["name"] for p in engine["phases"]]
    assert names == [
        "connect",
        "page_create",
        "scene",
        "step0:Runtime.evaluate",
        BURN_STEP,
        "step2:Runtime.evaluate",
        "grade",
        "page_close",
        "disconnect",
    ]
    by_name = {p["name"]: p for p in engine["phases"]}
    # the witness over each step: from its own mark to the next one
    marks = [name for name, _ in phases.witness]

    def grown(step: str) -> dict[tuple[int, int], int]:
        start = phases.witness[marks.index(step)][1]
        end = phases.witness[marks.index(step) + 1][1]
        return {k: end[k] - start.get(k, 0) for k in end}

    grew = grown(BURN_STEP)
    burner = max(grew, key=lambda k: grew[k])
    burn_ns, all_ns = grew[burner], sum(grew.values())
    step_ns = _cpu(by_name[BURN_STEP])
    print(
        f"{process.engine.name}: burning thread {burn_ns / 1e6:.1f} ms, all threads "
        f"{all_ns / 1e6:.1f} ms, step's engine CPU {step_ns / 1e6:.1f} ms"
    )
    assert burn_ns >= 150e6, "the loop hardly ran: no burn to attribute"
    assert step_ns >= 0.98 * burn_ns
    # above the witnessed threads only by what they cannot see: threads that ended within the
    # step (absent from its end sample) and the engine's other processes (at load 20 in CI:
    # 809 ms against 782 ms witnessed)
    assert step_ns <= 1.05 * all_ns + 30e6
    for neighbour in ("step0:Runtime.evaluate", "step2:Runtime.evaluate"):
        # the burning thread did next to nothing there (1+1 and 2+2), and the group less
        # than in the burn step (what it did do is the engine's own background work)
        assert grown(neighbour).get(burner, 0) < 0.1 * burn_ns, neighbour
        assert _cpu(by_name[neighbour]) < step_ns, neighbour
    # the phases add up to the attempt's total, or the rest is reported between marks
    total = _cpu(engine["total"])
    between = _cpu(engine["between_marks"])
    phases_ns = sum(_cpu(p) for p in engine["phases"])
    assert phases_ns + between == total
    assert engine["cpu_adds_up"] == (abs(total - phases_ns) <= 0.01 * total)
