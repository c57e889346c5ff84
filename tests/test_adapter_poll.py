"""The adapters' poll (drivers/python/raw_cdp_ops.py, drivers/node/adapters/common.js) probes every
50 ms, and at once when the page event it waits on lands: a navigation's load event comes a few
ms after Page.navigate answers, and waiting out the tick cost each goto and reload ~50 ms. An
event that lands while the probe runs is not missed. Each check races the poll against a 40 ms
timer: woken, the poll ends first; left to its tick, the timer does."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from typing import Any

import pytest

from shared_paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "drivers" / "python"))
import raw_cdp_ops  # noqa: E402
from adapter_common import Budget, State  # noqa: E402


async def _race(event_during_probe: bool) -> tuple[list[str], int]:
    events = raw_cdp_ops.PageEvents()
    calls: list[int] = []

    async def probe() -> bool:
        calls.append(1)
        if len(calls) == 1:
            if event_during_probe:
                events.saw("Page.loadEventFired")
            return False
        return True

    order: list[str] = []

    async def timer() -> None:
        await asyncio.sleep(0.04)
        order.append("40 ms")

    started = asyncio.create_task(timer())
    state = State({}, Budget({"task_timeout_ms": 30_000}))
    await raw_cdp_ops.poll(state, None, probe, "load", events.arrived)
    order.append("poll")
    await started
    return order, len(calls)


@pytest.mark.parametrize(
    ("event_during_probe", "first"), [(True, "poll"), (False, "40 ms")], ids=["event", "no-event"]
)
def test_python_poll_wakes_on_the_event_it_waits_on(event_during_probe: bool, first: str) -> None:
    order, probes = asyncio.run(_race(event_during_probe))
    assert order[0] == first and probes == 2


NODE_RACE = """
const { poll } = require('./adapters/common');
const budget = { wait: () => 30000 };
const waiters = [];
const nextEvent = () => new Promise((resolve) => waiters.push(resolve));
const eventDuringProbe = process.argv[1] === 'event';
let calls = 0;
const order = [];
setTimeout(() => order.push('40 ms'), 40);
poll(budget, null, async () => {
  calls += 1;
  if (calls === 1) { if (eventDuringProbe) waiters.splice(0).forEach((r) => r()); return false; }
  return true;
}, 'load', nextEvent).then(() => {
  order.push('poll');
  setTimeout(() => { process.stdout.write(JSON.stringify({ order, calls })); }, 60);
});
"""


@pytest.mark.parametrize(
    ("argument", "first"), [("event", "poll"), ("none", "40 ms")], ids=["event", "no-event"]
)
def test_node_poll_wakes_on_the_event_it_waits_on(argument: str, first: str) -> None:
    node = shutil.which("node")
    assert node is not None, "node is part of this machine's set-up (README)"
    done = subprocess.run(
        [node, "-e", NODE_RACE, argument],
        cwd=REPO_ROOT / "drivers" / "node",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout)
    assert seen["order"][0] == first and seen["calls"] == 2
