"""Driver paths: which task drivers the suite runs today, kept as data.

A task's *driver path* is its ``driver.kind``; for ``node_cdp_probe`` tasks it is also the probe
script, because each script is a harness of its own (``node_cdp_probe:l2_fixture_probe.js``).

Every driver path of ``driver_registry.DRIVER_PATHS`` (Playwright, Puppeteer, thin CDP clients,
WebDriver, MCP, ...) is runnable: its tasks are planned like the others and run through the
path's adapter (``adapter_attempt``); a path whose adapter or library is not installed gives
``unsupported`` rows with reason ``driver_unavailable``, never a silent skip. Files of a driver
block metewand still has no runner for (a probe script it has no equivalent of) are *pending*:
listed with the reason, never counted as invalid and never planned. A probe script may also be an
adapter path of its own (``driver_registry.PROBE_PATHS``: the agent-browser tool probe
``l1_ab_probe.js`` runs through ``agent_browser_tool.js``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from metewand.suites.browser.driver_registry import BY_TASK_KIND, PROBE_PATHS, path_for_driver
from metewand.suites.browser.probes import probe_for

PROBE_KIND: Final = "node_cdp_probe"

# driver.kind -> whether a task's driver block of that kind is runnable today.
RUNNABLE_PATHS: Final[dict[str, Callable[[Mapping[str, Any]], bool]]] = {
    "raw_cdp": lambda driver: True,
    PROBE_KIND: lambda driver: probe_for(driver) is not None or _script(driver) in PROBE_PATHS,
    # driver paths: planned whether or not their adapter is installed here (a missing one gives
    # unsupported rows with the reason, on every engine)
    **{kind: (lambda driver: True) for kind in BY_TASK_KIND},
}


def driver_path_key(task: Any) -> str:
    """The driver path a task runs through, as rows and reports group by it: the registry key
    (``playwright``, ``selenium``, ...) or, for the tasks metewand drives itself, ``raw_cdp``
    and ``node_cdp_probe:<script>``."""
    path = path_for_driver(task.driver)
    return path.key if path is not None else driver_path(task.driver)


def _script(driver: Mapping[str, Any]) -> str:
    return str(driver.get("script", "")).rsplit("/", 1)[-1]


def driver_path(driver: Mapping[str, Any]) -> str:
    """The name of the path a driver block takes, as reasons and listings show it."""
    kind = str(driver.get("kind"))
    if kind == PROBE_KIND:
        script = str(driver.get("script", "")).rsplit("/", 1)[-1]
        return f"{kind}:{script}"
    return kind


def pending_reason(driver: Mapping[str, Any]) -> str | None:
    """None when metewand runs this driver block; otherwise why the task is not run yet."""
    runnable = RUNNABLE_PATHS.get(str(driver.get("kind")))
    if runnable is not None and runnable(driver):
        return None
    return f"driver path {driver_path(driver)} not implemented yet"
