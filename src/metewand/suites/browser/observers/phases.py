"""Phase marks (``phase_marks.AttemptPhases``): the driver marks each boundary of the attempt;
this observer holds the marks and renders the row's ``phases`` block once every observer has
stopped, outside every timed span (decoding the readings is not the attempt's cost).

None for ``--no-phase-marks`` and for an interleaved calibration's unprofiled twin, which runs
with no observer at all: it is the unobserved side of the pair, so the pair's difference holds
the marks' cost as well as the sampler's. An engine without a group gets its harness marks and
an engine record that says why.
"""

from __future__ import annotations

from metewand.suites.browser.observers.base import AttemptEnd, Observed, Observer, ObserverSetup
from metewand.suites.browser.phase_marks import AttemptPhases


class PhaseMarks(Observer):
    def __init__(self, setup: ObserverSetup) -> None:
        self.setup = setup

    @classmethod
    def of(cls, setup: ObserverSetup) -> PhaseMarks | None:
        if not setup.config.phase_marks or not setup.planned.observed:
            return None
        return cls(setup)

    def begin(self) -> None:
        setup = self.setup
        group = setup.groups.engine_group(setup.worker, setup.planned.engine, setup.process)
        granularity = setup.driver.phase_granularity(setup.planned.task)
        concurrent = setup.config.jobs > 1
        self.marks = AttemptPhases(group, granularity, concurrent, setup.groups.mark_probes())

    def end(self, ended: AttemptEnd) -> Observed:
        assert self.marks is not None
        return Observed("phases", {"phases": self.marks.to_json()})
