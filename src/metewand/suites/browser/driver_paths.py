"""Driver paths: which task drivers the suite runs today, kept as data.

A task's *driver path* is its ``driver.kind``; for ``node_cdp_probe`` tasks it is also the probe
script, because each script is a harness of its own (``node_cdp_probe:l2_fixture_probe.js``).

The peer corpus also holds subsets for drivers metewand does not run yet (Playwright,
Puppeteer, thin CDP clients, WebDriver, MCP, the agent-browser tool). Their files are *pending*:
listed with the reason, never counted as invalid (their formats are the peer harness's, not
checked here) and never planned. Switching a driver on (issue #15) is one entry in
``RUNNABLE_PATHS`` beside its runner in ``drivers.DRIVERS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from metewand.suites.browser.probes import probe_for

PROBE_KIND: Final = "node_cdp_probe"

# driver.kind -> whether a task's driver block of that kind is runnable today.
RUNNABLE_PATHS: Final[dict[str, Callable[[Mapping[str, Any]], bool]]] = {
    "raw_cdp": lambda driver: True,
    PROBE_KIND: lambda driver: probe_for(driver) is not None,
}


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
