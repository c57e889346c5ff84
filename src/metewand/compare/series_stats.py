"""Statistics of ``metewand measure`` series: per command and against the first command.

Per command and metric: mean ± standard deviation (n - 1), median, min, max and a bootstrap 95%
CI of the median (runs resampled, seeded). Against the first command: the ratio of medians with
a bootstrap CI (each series resampled on its own: the runs of two commands are not paired).
Warnings: statistical outliers (modified z-score over 3.5, Iglewicz and Hoaglin's rule), a
first run much slower than the rest, a polluted host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from metewand.compare import stats

METRICS = (
    "wall_time_ns",
    "cpu_time_ns",
    "cpu_user_time_ns",
    "cpu_system_time_ns",
    "peak_memory_bytes",
    "process_count_peak",
)
OUTLIER_Z = 3.5
SLOW_FIRST_FACTOR = 1.5


def describe(values: Sequence[float], resamples: int, seed: int) -> dict[str, Any]:
    array = np.asarray(values, dtype=float)
    if not array.size:
        return {
            "n": 0,
            "mean": None,
            "stddev": None,
            "median": None,
            "min": None,
            "max": None,
            "median_ci95": None,
        }
    return {
        "n": int(array.size),
        "mean": float(array.mean()),
        "stddev": float(array.std(ddof=1)) if array.size > 1 else None,
        "median": float(np.median(array)),
        "min": float(array.min()),
        "max": float(array.max()),
        "median_ci95": stats.percentile_ci(stats.iid_median_replicates(array, resamples, seed)),
    }


def outliers(values: Sequence[float]) -> int:
    """How many runs lie beyond a modified z-score of 3.5 (median / MAD based)."""
    array = np.asarray(values, dtype=float)
    if array.size < 5:  # a median absolute deviation of 3 or 4 runs says little
        return 0
    mad = float(np.median(np.abs(array - np.median(array))))
    if mad == 0:
        return 0
    return int((0.6745 * np.abs(array - np.median(array)) / mad > OUTLIER_Z).sum())


def _values(runs: Sequence[Mapping[str, Any]], metric: str) -> list[float]:
    return [float(r[metric]) for r in runs if isinstance(r.get(metric), int | float)]


def command_summary(
    text: str, runs: Sequence[Mapping[str, Any]], resamples: int, seed: int
) -> dict[str, Any]:
    summary = {m: describe(_values(runs, m), resamples, seed) for m in METRICS}
    warnings = []
    walls = _values(runs, "wall_time_ns")
    if count := outliers(walls):
        warnings.append(
            f"{count} statistical outlier(s) in wall time (modified z-score > {OUTLIER_Z}): "
            "other programs or a cold cache may have interfered; consider --warmup or a "
            "quieter host"
        )
    if len(walls) >= 3 and walls[0] > SLOW_FIRST_FACTOR * float(np.median(walls[1:])):
        warnings.append(
            f"the first run took {walls[0] / 1e6:.2f} ms, over {SLOW_FIRST_FACTOR}x the median "
            "of the rest: caches were probably cold; use --warmup N"
        )
    failed = [r for r in runs if r.get("exit_status") != 0]
    if failed:
        warnings.append(f"{len(failed)} run(s) exited non-zero (measured anyway: --ignore-failure)")
    return {"command": text, "runs": len(runs), "metrics": summary, "warnings": warnings}


def ratios_to_first(
    series: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], resamples: int, seed: int
) -> list[dict[str, Any]]:
    """Each later command's median over the first one's, per metric, with a bootstrap CI."""
    if len(series) < 2:
        return []
    base_text, base_runs = series[0]
    out = []
    for text, runs in series[1:]:
        per_metric = {}
        for metric in ("wall_time_ns", "cpu_time_ns", "peak_memory_bytes"):
            block, _ = stats.ratio_describe(
                _values(runs, metric), _values(base_runs, metric), False, resamples, seed
            )
            per_metric[metric] = {"ratio": block["ratio"], "ratio_ci95": block["ratio_ci95"]}
        out.append({"command": text, "reference": base_text, "metrics": per_metric})
    return out
