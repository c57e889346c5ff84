"""Fixture traffic: what the attempt's pages asked of the fixture server (``traffic``, the
peer's ``abb_fixture_traffic/1``), ended after every other reading so late requests still
count (``TrafficTracker.end_attempt_settled`` waits for those in flight)."""

from __future__ import annotations

from metewand.suites.browser.fixtures.traffic import TrafficCounters, TrafficTracker
from metewand.suites.browser.observers.base import AttemptEnd, Observed, Observer, ObserverSetup


class FixtureTraffic(Observer):
    def __init__(self, tracker: TrafficTracker, key: str) -> None:
        self.tracker = tracker
        self.key = key
        self.counters: TrafficCounters | None = None

    @classmethod
    def of(cls, setup: ObserverSetup) -> FixtureTraffic:
        return cls(setup.traffic, setup.planned.key)

    def begin(self) -> None:
        self.tracker.begin_attempt(self.key)

    async def stop(self) -> None:
        self.counters = await self.tracker.end_attempt_settled(self.key)

    def end(self, ended: AttemptEnd) -> Observed:
        assert self.counters is not None
        return Observed("traffic", {"traffic": self.counters.to_json()})
