"""``--parameter-scan`` / ``--parameter-list`` of ``metewand measure``, and the plan's size.

Every value is checked before anything runs, and a plan is counted before it is built: a scan
of 10^9 values is refused with the count, not expanded into memory. The limit is the compute
planner's: at most ``MAX_RUNS_CAP`` runs (commands x (warm-ups + runs)) in one measurement.
"""

from __future__ import annotations

import math
from typing import Any

from metewand.cli.measure_options import MAX_RUNS_CAP, BadValue, number

SCAN_EPSILON = 1e-9  # (HIGH - LOW) / STEP a hair under an integer still reaches HIGH


def _finite(text: str, what: str, name: str) -> float:
    try:
        return float(number()(text))
    except BadValue as exc:
        raise ValueError(f"--parameter-scan {name}: {what} {exc}") from None


def scan_values(scan: tuple[str, str, str] | None, step: str | None) -> list[dict[str, str]]:
    """The settings of ``--parameter-scan NAME LOW HIGH [--parameter-step-size STEP]``."""
    if scan is None:
        if step is not None:
            raise ValueError("--parameter-step-size needs --parameter-scan")
        return []
    name, low_text, high_text = scan
    low, high = _finite(low_text, "LOW", name), _finite(high_text, "HIGH", name)
    increment = _finite(step, "step", name) if step is not None else 1.0
    if increment <= 0 or high < low:
        raise ValueError(f"--parameter-scan {name}: need LOW <= HIGH and a step > 0")
    steps = (high - low) / increment  # counted before anything is built
    if not math.isfinite(steps) or steps + 1 > MAX_RUNS_CAP:
        many = f"{math.floor(steps + SCAN_EPSILON) + 1:,}" if math.isfinite(steps) else "too many"
        raise ValueError(
            f"--parameter-scan {name} {low_text} {high_text}: {many} values, more than the "
            f"{MAX_RUNS_CAP:,} runs one measurement may plan; narrow the range or raise the step"
        )
    count = math.floor(steps + SCAN_EPSILON) + 1
    integral = all(float(v).is_integer() for v in (low, high, increment))
    values = [low + i * increment for i in range(count)]
    return [{name: str(int(v)) if integral else f"{v:g}"} for v in values]


def parameters(
    scan: tuple[str, str, str] | None,
    step: str | None,
    listed: tuple[str, str] | None,
    commands: int,
) -> list[dict[str, str]]:
    settings = scan_values(scan, step)
    if listed is not None:
        if settings:
            raise ValueError("use --parameter-scan or --parameter-list, not both")
        name, values = listed
        settings = [{name: value} for value in values.split(",")]
    if len(settings) * commands > MAX_RUNS_CAP:
        raise ValueError(
            f"{len(settings):,} parameter values x {commands} command(s) plan more than "
            f"{MAX_RUNS_CAP:,} runs"
        )
    return settings


def planned_runs(commands: int, values: dict[str, Any]) -> int:
    """The fewest runs the options ask for (warm-ups included); refused above the limit."""
    runs = values["runs"] or values["min_runs"] or 10
    if values["runs"] is None and values["max_runs"] is not None:
        runs = min(runs, values["max_runs"])
    planned = commands * (values["warmup"] + runs)
    if planned > MAX_RUNS_CAP:
        raise ValueError(
            f"{commands:,} command(s) x ({values['warmup']} warm-up + {runs:,} runs) = "
            f"{planned:,} runs, more than the {MAX_RUNS_CAP:,} one measurement may plan"
        )
    return planned
