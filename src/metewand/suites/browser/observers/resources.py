"""Engine and harness resources of one warm attempt (``--resource-profile engine``).

One reading, two scopes, kept apart:

- engine_scope (``resource_forms``, ours with measurement forms, and ``resource``, the peer's
  ``abb_engine_resources/1`` layout of it): the worker x engine accounting group's CPU over the
  attempt (read after the page's cleanup and the settle wait, so closing the page stays charged
  to it), its memory high-water restarted for the attempt, and a ``Sampler`` over the tree from
  a baseline scan to an end scan taken while the page still lives (the collection window);
- harness_scope: this process's CPU (CDP client, driver, grader, fixture server all run here)
  over the same span, minus the sampler's threads and the host-telemetry thread, which are the
  observer's cost. The two are one observer because the harness figure is the process's CPU
  less this sampler's, over the sampler's own span: read apart, either the sampler's baseline
  scan or the engine record's writing would land on the wrong side.

The engine's record carries the row's duration and fixture traffic, as the peer's record does.
Measurement trouble (a sampler fault, an unreadable group) becomes the record's ``fault`` and a
``sampler_fault`` flag, never a changed status.
"""

from __future__ import annotations

import time
from typing import Any

from metewand import canonical
from metewand.measure.accounting import TreeAccounting
from metewand.measure.sampler import Sampler, SamplerSummary
from metewand.runtime import rundir
from metewand.suites.browser.observers.base import AttemptEnd, Observed, Observer, ObserverSetup
from metewand.suites.browser.profiler import ResourceProfiler
from metewand.suites.browser.resource_record import (
    cpu_delta,
    engine_resources_record,
    peer_resources_record,
    peer_sample_line,
)

RESOURCE_FILE = rundir.ATTEMPT_RESOURCE_SAMPLES


def harness_scope(
    process_cpu_ns: int, sampler_cpu_ns: int, jobs: int, host_cpu_ns: int = 0
) -> dict[str, Any]:
    """The harness's CPU over one attempt: this process (CDP client, driver, grader, fixture
    server) minus the sampler's threads and the host-telemetry thread, which are the observer's
    cost, not the harness's. At jobs > 1 the process serves several attempts at once, so the
    figure is not this attempt's alone; ``concurrent`` says so."""
    observer_ns = sampler_cpu_ns + host_cpu_ns
    return {
        "scope": "harness_scope",
        "cpu_ms": round(max(0, process_cpu_ns - observer_ns) / 1e6, 3),
        "process_cpu_ms": round(process_cpu_ns / 1e6, 3),
        "sampler_cpu_ms_excluded": round(sampler_cpu_ns / 1e6, 3),
        "host_telemetry_cpu_ms_excluded": round(host_cpu_ns / 1e6, 3),
        "parts": ["cdp_client", "driver", "grader", "fixture_server"],
        "source": "process_time_ns minus sampler and host-telemetry thread_time",
        "concurrent": jobs > 1,
    }


class EngineResources(Observer):
    def __init__(self, profiler: ResourceProfiler, setup: ObserverSetup, group: TreeAccounting):
        self.profiler = profiler
        self.setup = setup
        self.group = group
        self.sampler: Sampler | None = None
        self.cpu_before: Any = None
        self.error: str | None = None
        self.peak_reset = False  # the cgroup memory high-water was restarted for this attempt
        self.summary: SamplerSummary | None = None
        self.wall_start = 0.0
        self.harness_cpu_start = 0  # this process's CPU (all threads) in ns at the start
        self.host_cpu_start = 0  # the host-telemetry thread's CPU in ns at the start
        self.start_ms = 0.0  # observer wall of the baseline scan (+ setup)
        self.stop_ms = 0.0  # observer wall of the end scan (+ sampler teardown)
        self.wall_ms = 0.0  # the collection window: baseline scan start to end scan end
        self.record: dict[str, Any] = {}
        self.harness: dict[str, Any] = {}

    @classmethod
    def of(cls, setup: ObserverSetup) -> EngineResources | None:
        """Warm attempts of an engine-profiled run whose engine has a group (an interleaved
        calibration's unprofiled twin has none of this)."""
        profiler = setup.groups
        if not isinstance(profiler, ResourceProfiler) or not profiler.sampling:
            return None
        if not setup.planned.observed:
            return None
        group = profiler.group(setup.worker, setup.planned.engine)
        return cls(profiler, setup, group) if group is not None else None

    def begin(self) -> None:
        setup, group = self.setup, self.group
        self.profiler.attach(setup.worker, setup.planned.engine, setup.process)  # a rejoin: no-op
        self.wall_start = time.perf_counter()
        self.harness_cpu_start = time.process_time_ns()
        self.host_cpu_start = self.profiler.host_cpu_ns()
        try:
            # the high-water must cover this attempt only, or one spike marks every later one
            self.peak_reset = group.reset_memory_peak()
            self.cpu_before = group.cpu()
            self.sampler = self.profiler.sampler(setup.worker, setup.planned.engine, group)
            self.sampler.start()
        except Exception as exc:  # the observer never takes an attempt down
            self.error = f"{type(exc).__name__}: {exc}"
        self.start_ms = (time.perf_counter() - self.wall_start) * 1000

    def work_done(self) -> None:
        """Stop the sampler with its end scan: the task's work is done, its page still open."""
        try:
            if self.sampler is None:
                raise RuntimeError(self.error or "sampler not started")
            stop_start = time.perf_counter()
            self.summary = self.sampler.stop()
            self.stop_ms = (time.perf_counter() - stop_start) * 1000
        except Exception as exc:  # the observer never takes an attempt down
            self.error = f"{type(exc).__name__}: {exc}"
        self.wall_ms = (time.perf_counter() - self.wall_start) * 1000

    async def stop(self) -> None:
        """The attempt's CPU in both scopes, after the page's cleanup and the settle wait; the
        samples file."""
        process_cpu_ns = time.process_time_ns() - self.harness_cpu_start
        host_cpu_ns = self.profiler.host_cpu_ns() - self.host_cpu_start
        try:
            self.record = self._engine_record()
        except Exception as exc:
            self.record = {
                "schema": "metewand_engine_resources/1",
                "scope": "engine_scope",
                "engine": self.setup.planned.engine,
                "fault": f"{type(exc).__name__}: {exc}",
                "quality_flags": ["sampler_fault"],
            }
        sampler_ns = self.summary.sampler_cpu_ns if self.summary is not None else 0
        self.harness = harness_scope(process_cpu_ns, sampler_ns, self.profiler.jobs, host_cpu_ns)

    def _engine_record(self) -> dict[str, Any]:
        if self.summary is None:
            raise RuntimeError(self.error or "sampler not stopped")
        summary, group = self.summary, self.group
        # avg_cores divides by the wall this CPU reading spans
        attempt_cpu = cpu_delta(self.cpu_before, group.cpu())
        cpu_wall_ms = (time.perf_counter() - self.wall_start) * 1000
        record = engine_resources_record(
            summary,
            attempt_cpu,
            backend=group.backend,
            duration_ms=None,
            collection_wall_ms=self.wall_ms,
            fallback_reasons=group.fallback_reasons,
            engine=self.setup.planned.engine,
            memory_peak_per_attempt=self.peak_reset,
            cpu_wall_ms=cpu_wall_ms,
        )
        # where the observer's wall goes: baseline scan (+ setup) and end scan (+ teardown)
        record["observer_wall_ms"] = {
            "start": round(self.start_ms, 3),
            "stop": round(self.stop_ms, 3),
        }
        with open(self.setup.out_dir / RESOURCE_FILE, "wb") as handle:
            for sample in summary.samples:
                handle.write(canonical.line(peer_sample_line(sample, None)))
        return record

    def end(self, ended: AttemptEnd) -> Observed:
        # the peer's record carries the row's duration and fixture traffic
        forms = {
            **self.record,
            "duration_ms": ended.result.duration_ms,
            "fixture_traffic": ended.fields.get("traffic"),
        }
        fields = {
            "harness_scope": self.harness,
            # ours (measurement forms) beside the peer's layout (plain numbers + unavailable)
            "resource_forms": forms,
            "resource": peer_resources_record(forms),
        }
        files = (RESOURCE_FILE,) if (self.setup.out_dir / RESOURCE_FILE).exists() else ()
        return Observed("engine_resources", fields, files)
