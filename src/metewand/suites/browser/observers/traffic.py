"""Fixture traffic: what the attempt's pages asked of the fixture server (``traffic``, the
peer's ``abb_fixture_traffic/1``), ended after every other reading so late requests still
count (``TrafficTracker.end_attempt_settled`` waits for those in flight)."""

from __future__ import annotations

from metewand.suites.browser.fixtures.traffic import TrafficCounters, TrafficTracker
from metewand.suites.browser.observers.base import AttemptEnd, Observed, Observer, ObserverSetup

FIXTURE_SCENE = "self_hosted_fixture"


class FixtureTraffic(Observer):
    def __init__(self, tracker: TrafficTracker, key: str, fixture_scene: bool = False) -> None:
        self.tracker = tracker
        self.key = key
        self.fixture_scene = fixture_scene  # the task's page is one of the fixture server's
        self.counters: TrafficCounters | None = None

    @classmethod
    def of(cls, setup: ObserverSetup) -> FixtureTraffic:
        scene = setup.planned.task.data.get("scene") or {}
        return cls(setup.traffic, setup.planned.key, scene.get("kind") == FIXTURE_SCENE)

    def begin(self) -> None:
        self.tracker.begin_attempt(self.key)

    async def stop(self) -> None:
        self.counters = await self.tracker.end_attempt_settled(self.key)

    def end(self, ended: AttemptEnd) -> Observed:
        assert self.counters is not None
        # a pass on a fixture page the server never served: the page was not loaded (an adapter
        # answering from what it was told); flagged, the status is the driver's and grader's
        unvisited = None
        if self.counters.available and self.fixture_scene:
            unvisited = ended.result.status == "pass" and self.counters.app.requests == 0
        return Observed(
            "traffic",
            {"traffic": self.counters.to_json(), "pass_without_fixture_request": unvisited},
        )
