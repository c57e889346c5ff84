"""The change-point settings ``history check`` and ``history report`` share (numpy-free, so the
CLI can show their defaults without loading the analysis)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ALPHA = 0.01
DEFAULT_MIN_STEP = 0.02
DEFAULT_NOISE_MULTIPLE = 2.0
DEFAULT_MIN_RUNS = 6
STATISTICS = ("median", "floor")


@dataclass(frozen=True)
class Settings:
    alpha: float = DEFAULT_ALPHA
    min_step: float = DEFAULT_MIN_STEP
    noise_multiple: float = DEFAULT_NOISE_MULTIPLE
    recent: int = 1
    min_runs: int = DEFAULT_MIN_RUNS
    run_factor: bool = True  # divide out what the host did to every group of a run alike
    statistic: str = "floor"  # a run's level: the lowest of its attempts (floor) or their median
    allow_polluted: bool = False  # judge wall times of runs whose pollution gate failed
    count_environment: bool = False  # a step whose group's inputs did not change fails too
