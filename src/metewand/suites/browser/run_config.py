"""What a browser run was asked to do: one serialisable record, stored in the run manifest so
``--resume`` repeats exactly the same plan."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Final

from metewand.measure.host import MIN_INTERVAL_S

ISOLATIONS: Final = ("shared", "context")
# Where a driver-path adapter opens an attempt's pages, as it is asked and as it says: context,
# in a browser context of the attempt's own, disposed of at its end; shared, in the engine's
# default context, as the peer's adapters do (on Chrome a new context's first page starts a
# renderer, the default context's takes Chrome's spare one: docs/driver-ops.md).
PAGE_PLACES: Final = ("context", "shared")
# --driver-isolation: cleared (default), the adapters asked for the default context and the
# harness clearing the engine's cookies, the fixture origins' storage and the HTTP cache after
# each attempt (state_clear): no state passes on, and every path pays the same few ms for it;
# context, a browser context per attempt (any path that can only open shared pages is cleared
# after as well); shared, nothing cleared (cookies and storage pass from one attempt to the next).
DRIVER_ISOLATIONS: Final = ("cleared", "context", "shared")
DEFAULT_DRIVER_ISOLATION: Final = "cleared"
# independent: every engine scored on its own attempts, every declared check must pass;
# peer-compatible: the same, but an L1 server-graded row is graded by the server's verdict alone,
# as the peer's published numbers were (opt-in, to reproduce them)
SCORE_MODES: Final = ("independent", "peer-compatible")
RESOURCE_PROFILES: Final = ("off", "baseline", "engine")
# interleaved (the default of a profiled run): each task-attempt x engine also runs once
# unprofiled, beside its profiled twin, on the same engine process, so a host drifting through
# the run cancels out of the pairs; separate: against a separate profiler-off run (the document's
# and the peer's A/B), whose figure also holds whatever drifted between the two runs (three runs
# on one quiet host gave Chrome +11.07%, +11.41% and +5.32%: the verdict flipped, issue 24).
CALIBRATION_MODES: Final = ("interleaved", "separate")
# what the command line calls them: the separate A/B is named as the peer's mode
CALIBRATION_CHOICES: Final = {
    "interleaved": "interleaved",
    "peer-ab": "separate",
    "separate": "separate",
}
# How driver-path adapters run: a process per attempt, or one served (long-lived) adapter per
# driver path × engine process in each slot. Long-lived is the default: the same pass counts
# at 1.45-4.28x the attempts per minute (benchmarks/README.md, adapter_startup.py).
ADAPTER_MODES: Final = ("per_attempt", "long_lived")
# Engines are launched once per worker and reused across attempts; a dead engine is relaunched
# before the next attempt. Each attempt opens its own CDP connection and page target.
REUSE_POLICY: Final = "reuse_per_worker_relaunch_on_death"
CONNECTION_POLICY: Final = "fresh_cdp_connection_per_attempt"
# Bounds that keep a typo from planning for hours or overflowing a timeout: every attempt is
# held in memory as a planned row before the first one runs.
MAX_K: Final = 10_000
MAX_JOBS: Final = 64
MAX_TIMEOUT_SCALE: Final = 100.0
MAX_HOST_SAMPLE_INTERVAL_S: Final = 3600.0
MAX_CALIBRATION_EVERY: Final = 1000


def builtin_suite_dir() -> Path:
    """The task suite shipped with metewand (``src/metewand/data/browser_suite``)."""
    return Path(__file__).resolve().parents[2] / "data" / "browser_suite"


@dataclass(frozen=True)
class ResourceOptions:
    profile: str = "off"
    sample_interval_ms: int = 500
    calibration_baseline: str | None = None
    calibration: str | None = None  # None: ``calibration_mode`` decides
    # interleaved calibration: twins in one round of every N, drawn with the run's seed (1: every
    # round). The observer's figure is a median over pairs, and a big run has far more pairs than
    # its CI needs: 1 in 4 cuts a profiled run's attempts from 2x to 1.25x (issue 26).
    calibration_every: int = 1
    max_observer_effect_pct: float = 10.0
    reference_engine: str | None = None
    host_telemetry: bool = True
    # the seed's normal run (``--host-sample-interval-s 2``), as the peer's default: each sample
    # scans every process on the host (~3 ms of harness CPU during a Chrome run here), and at
    # 1 s that was the largest measurement item of a driver attempt (docs/performance.md)
    host_sample_interval_s: float = 2.0
    # foreign_cpu_load: CPU beside the benchmark above this many cores for 3 samples in a row
    host_foreign_cpu_max: float = 0.10
    cold_start_samples: int = 5
    # After each attempt's cleanup, wait up to this long for the engine's tree to go quiet
    # (resource profiles only; 0 = no wait). See measure/quiet.py for why.
    settle_limit_ms: int = 1000

    @property
    def calibration_mode(self) -> str:
        """The asked mode; unasked, ``interleaved`` for a profiled run with no baseline to
        calibrate against, else ``separate`` (a baseline was named, or nothing is profiled)."""
        if self.calibration is not None:
            return self.calibration
        if self.profile == "engine" and self.calibration_baseline is None:
            return "interleaved"
        return "separate"

    def float_problems(self) -> list[str]:
        """NaN passes every ``<``/``>`` test and inf overflows later: refuse both by name."""
        out = []
        pct = self.max_observer_effect_pct
        if not (math.isfinite(pct) and 0 < pct <= 100):
            out.append(f"--resource-max-observer-effect-pct must be > 0 and <= 100, got {pct}")
        interval = self.host_sample_interval_s
        if not (
            math.isfinite(interval) and MIN_INTERVAL_S <= interval <= MAX_HOST_SAMPLE_INTERVAL_S
        ):
            out.append(
                f"--host-sample-interval-s must be between {MIN_INTERVAL_S:g} and "
                f"{MAX_HOST_SAMPLE_INTERVAL_S:g}, got {interval}"
            )
        foreign = self.host_foreign_cpu_max
        if not (math.isfinite(foreign) and foreign >= 0):
            out.append(f"--host-foreign-cpu-max must be a finite number >= 0, got {foreign}")
        return out


@dataclass(frozen=True)
class RunConfig:
    tasks_dir: str
    engines: tuple[str, ...]
    k: int = 1
    seed: str = "0"
    jobs: int = 1
    score_mode: str = "independent"
    isolation: str = "shared"
    subsets: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    keep_going: bool = False
    timeout_scale: float = 1.0
    adapter_mode: str = "long_lived"
    driver_isolation: str = DEFAULT_DRIVER_ISOLATION
    # phase marks in every attempt (engine group and harness counters at each boundary, each
    # driver op an adapter marks). None: on, except in a baseline run (``marks_default``)
    phase_marks: bool | None = None
    engine_paths: dict[str, str] = field(default_factory=dict)
    resource: ResourceOptions = field(default_factory=ResourceOptions)

    def __post_init__(self) -> None:
        if self.phase_marks is None:
            object.__setattr__(self, "phase_marks", marks_default(self.resource.profile))

    def problems(self) -> list[str]:
        """Flag combinations that cannot run (exit 2 before anything starts)."""
        out = []
        if not self.engines:
            out.append("--engines: at least one engine is required")
        if len(set(self.engines)) != len(self.engines):
            out.append("--engines: an engine is named twice")
        out += _out_of_bounds("--k", self.k, 1, MAX_K)
        out += _out_of_bounds("--jobs", self.jobs, 1, MAX_JOBS)
        if self.isolation not in ISOLATIONS:
            out.append(f"--isolation must be one of {ISOLATIONS}")
        if self.driver_isolation not in DRIVER_ISOLATIONS:
            out.append(f"--driver-isolation must be one of {DRIVER_ISOLATIONS}")
        if self.adapter_mode not in ADAPTER_MODES:
            out.append(f"--adapter-mode must be one of {ADAPTER_MODES}")
        if self.score_mode not in SCORE_MODES:
            out.append(f"--score-mode must be one of {SCORE_MODES}")
        if not (math.isfinite(self.timeout_scale) and 0 < self.timeout_scale <= MAX_TIMEOUT_SCALE):
            out.append(
                f"--timeout-scale must be > 0 and <= {MAX_TIMEOUT_SCALE:g}, "
                f"got {self.timeout_scale}"
            )
        if self.resource.profile not in RESOURCE_PROFILES:
            out.append(f"--resource-profile must be one of {RESOURCE_PROFILES}")
        resource = self.resource
        out += _out_of_bounds(
            "--resource-sample-interval-ms", resource.sample_interval_ms, 10, 60000
        )
        out += resource.float_problems()
        out += _calibration_problems(resource)
        out += _out_of_bounds("--cold-start-samples", resource.cold_start_samples, 0, 1000)
        out += _out_of_bounds("--settle-limit-ms", resource.settle_limit_ms, 0, 60000)
        ref = self.resource.reference_engine
        if ref is not None and ref not in self.engines:
            out.append(f"--reference-engine {ref!r} is not one of --engines")
        return out

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("engines", "subsets", "task_ids", "tags"):
            data[key] = list(data[key])
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunConfig:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for key in ("engines", "subsets", "task_ids", "tags"):
            values[key] = tuple(values.get(key, ()))
        # a run recorded before the adapter mode existed ran every adapter per attempt
        values.setdefault("adapter_mode", "per_attempt")
        # and one recorded before phase marks had none: a resume keeps it that way
        values.setdefault("phase_marks", False)
        # and one recorded before --driver-isolation asked each adapter for a context of its own
        values.setdefault("driver_isolation", "context")
        values["resource"] = ResourceOptions(**values.get("resource", {}))
        values["engine_paths"] = dict(values.get("engine_paths", {}))
        return cls(**values)


def marks_default(profile: str) -> bool:
    """Phase marks unless asked otherwise, except in a baseline run: the baseline is the A/B's
    profiler-off side, which the document runs unobserved. Marks there would read counters in
    every attempt, and the A/B would no longer hold the profiled side's marks in its figures
    (the calibration refuses a marked baseline, ``compare.calibration``)."""
    return profile != "baseline"


def _calibration_problems(resource: ResourceOptions) -> list[str]:
    if resource.calibration_mode not in CALIBRATION_MODES:
        return [f"--resource-calibration must be one of {CALIBRATION_MODES}"]
    every = resource.calibration_every
    out = _out_of_bounds("--resource-calibration-every", every, 1, MAX_CALIBRATION_EVERY)
    if resource.calibration_mode != "interleaved":
        if every != 1:
            out.append("--resource-calibration-every samples interleaved calibration's twins")
        return out
    if resource.profile != "engine":
        out.append("--resource-calibration interleaved needs --resource-profile engine")
    if resource.calibration_baseline is not None:
        out.append(
            "--resource-calibration interleaved calibrates within the run: "
            "drop --resource-calibration-baseline"
        )
    return out


def _out_of_bounds(flag: str, value: int, low: int, high: int) -> list[str]:
    if low <= value <= high:
        return []
    return [f"{flag} must be between {low} and {high}, got {value}"]
