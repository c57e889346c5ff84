"""Statistics of ``metewand measure`` series, in plain Python (no numpy on measure's path).

Per command and metric: mean ± standard deviation (n - 1), median, min, max, and the
distribution-free order-statistic interval of the median (``measure.order_stats``: its exact
coverage is recorded as its level; none below 6 runs, never made up).

Against the first command, per metric:
- **paired** (interleaved rounds, the default with several commands): per round the ratio
  NEW/BASE of the two runs of that round; the median of those ratios with the same
  order-statistic interval over rounds (rounds are the independent units, so host drift that
  moves both runs of a round cancels inside its ratio), and the two-sided sign test of
  "ratio = 1" over the rounds;
- **unpaired** (commands run one after the other): the ratio of the two medians; its interval
  divides the two medians' 97.5% intervals (``[lo_new / hi_base, hi_new / lo_base]``): when both
  cover their medians, which happens with probability at least the sum of their coverages
  minus 1 (Bonferroni; >= 95%, recorded as the level), the ratio lies in it.
  Drift between the two series is in neither interval: the text says so.
Warnings: statistical outliers (modified z-score over 3.5, Iglewicz and Hoaglin's rule), a first
run much slower than the rest, runs that exited non-zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from metewand.measure.order_stats import LEVEL, binomial_half_cdf, median, median_ci
from metewand.measure.series import RUN_FIELDS as METRICS  # every figure of a run

RATIO_METRICS = ("wall_time_ns", "cpu_time_ns", "peak_memory_bytes")
OUTLIER_Z = 3.5
SLOW_FIRST_FACTOR = 1.5
METHOD = {
    "median_ci": "order_statistic",
    "median_ci_text": "distribution-free interval of the median from two order statistics "
    "(binomial, the sign test's interval); level = its exact coverage, at least 0.95",
    "ratio_paired": "median of per-round ratios NEW/BASE with the order-statistic interval over "
    "rounds; sign test of ratio = 1 over rounds",
    "ratio_unpaired": "ratio of medians; interval from the two medians' 97.5% order-statistic "
    "intervals (Bonferroni: at least 0.95); drift between the two series is not in it",
    "level": LEVEL,
}


def describe(values: Sequence[float]) -> dict[str, Any]:
    n = len(values)
    if not n:
        return {
            "n": 0,
            "mean": None,
            "stddev": None,
            "median": None,
            "min": None,
            "max": None,
            "median_ci95": None,
            "median_ci_level": None,
        }
    mean = math.fsum(values) / n
    stddev = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None
    ci = median_ci(values)
    return {
        "n": n,
        "mean": mean,
        "stddev": stddev,
        "median": median(values),
        "min": float(min(values)),
        "max": float(max(values)),
        "median_ci95": ci[0] if ci else None,
        "median_ci_level": ci[1] if ci else None,
    }


def outliers(values: Sequence[float]) -> int:
    """How many runs lie beyond a modified z-score of 3.5 (median / MAD based)."""
    if len(values) < 5:  # a median absolute deviation of 3 or 4 runs says little
        return 0
    centre = median(values)
    assert centre is not None
    mad = median([abs(v - centre) for v in values])
    if not mad:
        return 0
    return sum(0.6745 * abs(v - centre) / mad > OUTLIER_Z for v in values)


def values_of(runs: Sequence[Mapping[str, Any]], metric: str) -> list[float]:
    return [float(r[metric]) for r in runs if isinstance(r.get(metric), int | float)]


def command_summary(text: str, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    summary = {m: describe(values_of(runs, m)) for m in METRICS}
    warnings = []
    walls = values_of(runs, "wall_time_ns")
    if count := outliers(walls):
        warnings.append(
            f"{count} statistical outlier(s) in wall time (modified z-score > {OUTLIER_Z}): "
            "other programs or a cold cache may have interfered; consider --warmup or a "
            "quieter host"
        )
    rest = median(walls[1:])
    if len(walls) >= 3 and rest is not None and walls[0] > SLOW_FIRST_FACTOR * rest:
        warnings.append(
            f"the first run took {walls[0] / 1e6:.2f} ms, over {SLOW_FIRST_FACTOR}x the median "
            "of the rest: caches were probably cold; use --warmup N"
        )
    failed = [r for r in runs if r.get("exit_status") != 0]
    if failed:
        warnings.append(f"{len(failed)} run(s) exited non-zero (measured anyway: --ignore-failure)")
    return {"command": text, "runs": len(runs), "metrics": summary, "warnings": warnings}


def sign_test_p(ratios: Sequence[float]) -> float | None:
    """Two-sided sign test of "the median ratio is 1": rounds with a ratio of exactly 1 carry
    no sign and are left out; None when none is left."""
    above = sum(r > 1 for r in ratios)
    below = sum(r < 1 for r in ratios)
    n = above + below
    if not n:
        return None
    return min(1.0, 2 * binomial_half_cdf(n, min(above, below)))


def paired_ratio(pairs: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """NEW/BASE from rounds: ``pairs`` are (new, base) of one round each."""
    ratios = [new / base for new, base in pairs if base > 0]
    ci = median_ci(ratios)
    return {
        "ratio": median(ratios),
        "ratio_ci95": ci[0] if ci else None,
        "level": ci[1] if ci else None,
        "method": "paired",
        "units": len(ratios),
        "p_value": sign_test_p(ratios),
    }


def unpaired_ratio(new: Sequence[float], base: Sequence[float]) -> dict[str, Any]:
    """NEW/BASE of two separate series: the ratio of medians, interval at least 95%."""
    new_median, base_median = median(new), median(base)
    ratio = new_median / base_median if new_median is not None and base_median else None
    half = 1 - (1 - LEVEL) / 2
    new_ci, base_ci = median_ci(new, half), median_ci(base, half)
    interval = level = None
    if ratio is not None and new_ci and base_ci and base_ci[0][0] > 0:
        interval = [new_ci[0][0] / base_ci[0][1], new_ci[0][1] / base_ci[0][0]]
        level = new_ci[1] + base_ci[1] - 1  # Bonferroni: both cover with at least this
    return {
        "ratio": ratio,
        "ratio_ci95": interval,
        "level": level,
        "method": "unpaired",
        "units": min(len(new), len(base)),
        "p_value": None,
    }


def _pairs(
    new_runs: Sequence[Mapping[str, Any]], base_runs: Sequence[Mapping[str, Any]], metric: str
) -> list[tuple[float, float]]:
    """(new, base) per round both commands have a value in."""
    base_by_round = {
        r.get("round"): r[metric] for r in base_runs if isinstance(r.get(metric), int | float)
    }
    return [
        (float(r[metric]), float(base_by_round[r["round"]]))
        for r in new_runs
        if isinstance(r.get(metric), int | float) and r.get("round") in base_by_round
    ]


def ratios_to_first(
    series: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], paired: bool
) -> list[dict[str, Any]]:
    """Each later command against the first one, per metric in ``RATIO_METRICS``."""
    if len(series) < 2:
        return []
    base_text, base_runs = series[0]
    out = []
    for text, runs in series[1:]:
        per_metric = {}
        for metric in RATIO_METRICS:
            if paired:
                per_metric[metric] = paired_ratio(_pairs(runs, base_runs, metric))
            else:
                per_metric[metric] = unpaired_ratio(
                    values_of(runs, metric), values_of(base_runs, metric)
                )
        out.append({"command": text, "reference": base_text, "metrics": per_metric})
    return out


def verdict(ratio: Mapping[str, Any]) -> str | None:
    """ "slower"/"faster" when the whole interval lies beyond 1, "no difference" when it holds
    1, None without an interval."""
    ci = ratio.get("ratio_ci95")
    if not ci:
        return None
    if ci[0] > 1:
        return "slower"
    if ci[1] < 1:
        return "faster"
    return "no difference"
