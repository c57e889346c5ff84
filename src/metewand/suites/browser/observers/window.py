"""The collection window of a resource profile (baseline or engine): the same span in both, so
their difference is the sampler's cost, baseline and end scans included.

It begins before the sampler's baseline scan and ends when the task's work is done, after the
end scan and before the page is closed (the end scan then walks a live, idle renderer, not one
whose address space is being torn down): ``collection_wall_ms``. ``attempt_span_ms`` is the
whole attempt as the run pays for it: the window, the page's cleanup, the settle wait and the
CPU readings.
"""

from __future__ import annotations

import time

from metewand.suites.browser.observers.base import AttemptEnd, Observed, Observer, ObserverSetup


class CollectionWindow(Observer):
    def __init__(self) -> None:
        self.start = 0.0
        self.closed_at: float | None = None
        self.stopped_at: float | None = None

    @classmethod
    def of(cls, setup: ObserverSetup) -> CollectionWindow | None:
        return None if setup.config.resource.profile == "off" else cls()

    def begin(self) -> None:
        self.start = time.perf_counter()

    def work_done(self) -> None:
        if self.closed_at is None:
            self.closed_at = time.perf_counter()

    async def stop(self) -> None:
        self.stopped_at = time.perf_counter()

    def end(self, ended: AttemptEnd) -> Observed:
        assert self.closed_at is not None and self.stopped_at is not None
        wall_ms = (self.closed_at - self.start) * 1000
        span_ms = (self.stopped_at - self.start) * 1000
        fields = {"collection_wall_ms": round(wall_ms, 3), "attempt_span_ms": round(span_ms, 3)}
        return Observed("collection_window", fields)
