"""The settle wait of a resource profile: after the attempt, let the engine finish what closing
the page set off (a renderer exit, a spare renderer forked) before the attempt's CPU is read and
the next attempt starts. Outside the collection window, the same in baseline and profiled runs
(and for an interleaved calibration's unprofiled twin: it reads the engine's group too)."""

from __future__ import annotations

from metewand.measure.quiet import QuietOutcome, wait_quiet
from metewand.suites.browser.observers.base import AttemptEnd, Observed, Observer, ObserverSetup


class Settle(Observer):
    def __init__(self, setup: ObserverSetup, limit_ms: int) -> None:
        self.setup = setup
        self.limit_ms = limit_ms
        self.quiet: QuietOutcome | None = None

    @classmethod
    def of(cls, setup: ObserverSetup) -> Settle | None:
        limit_ms = setup.config.resource.settle_limit_ms
        if setup.config.resource.profile == "off" or limit_ms <= 0:
            return None
        return cls(setup, limit_ms)

    async def stop(self) -> None:
        process = self.setup.process
        if process.pid is None:
            return  # nothing to wait for: no settle field
        cpu_ns = self.setup.groups.tree_cpu(self.setup.worker, self.setup.planned.engine, process)
        self.quiet = await wait_quiet(process.pid, self.limit_ms / 1000, cpu_ns=cpu_ns)

    def end(self, ended: AttemptEnd) -> Observed:
        if self.quiet is None:
            return Observed("settle")
        return Observed("settle", {"settle": self.quiet.to_json()})
