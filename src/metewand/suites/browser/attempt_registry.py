"""What runs and watches a browser attempt, as data: a new driver or observer is a module of its
own and one line here.

``ATTEMPT_DRIVERS`` are asked in order whether they run a task; the first that does runs it (the
harness's own CDP steps take whatever no driver path claims). ``ATTEMPT_OBSERVERS`` are the
factories of every attempt's observers, outermost first (``observers.base``: begun in this
order, stopped in reverse, their blocks rendered in this order): fixture traffic spans every
reading; the collection window holds the sampler's scans; engine resources read the attempt's
CPU after the settle wait; phase marks begin once the sampler runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from metewand.suites.browser.adapter_attempt import AdapterDriver
from metewand.suites.browser.attempt import CdpStepsDriver
from metewand.suites.browser.attempt_driver import AttemptDriver
from metewand.suites.browser.observers.base import ObserverFactory
from metewand.suites.browser.observers.phases import PhaseMarks
from metewand.suites.browser.observers.resources import EngineResources
from metewand.suites.browser.observers.settle import Settle
from metewand.suites.browser.observers.traffic import FixtureTraffic
from metewand.suites.browser.observers.window import CollectionWindow
from metewand.suites.browser.tasks import Task

ATTEMPT_DRIVERS: Final[tuple[AttemptDriver, ...]] = (AdapterDriver(), CdpStepsDriver())

ATTEMPT_OBSERVERS: Final[tuple[ObserverFactory, ...]] = (
    FixtureTraffic.of,
    CollectionWindow.of,
    EngineResources.of,
    PhaseMarks.of,
    Settle.of,
)


@dataclass(frozen=True)
class AttemptRegistry:
    """The drivers and observers an attempt runner uses (the ones above unless a caller, e.g. a
    test, gives its own)."""

    drivers: tuple[AttemptDriver, ...] = ATTEMPT_DRIVERS
    observers: tuple[ObserverFactory, ...] = ATTEMPT_OBSERVERS

    def driver_for(self, task: Task) -> AttemptDriver:
        return next(driver for driver in self.drivers if driver.handles(task))
