"""Change points in one group's metric over runs: where it stepped, by how much, how surely.

The unit is the run: each run contributes one value per group (the median of its counted
attempts), because the noise a history must see past is the noise *between* runs (another
process launch, another hour of the host), which the attempts inside one run do not show.

The method (docs/history.md says why this one):

1. The series is taken on a log scale (a step is a ratio) and divided by the group's
   historical noise (``historical_noise``: the between-run spread, read robustly from
   successive differences, so a step or a few wild runs do not inflate it).
2. Candidate change points come from PELT (Killick, Fearnhead & Eckley 2012) with a mean-shift
   cost, as implemented in C by ``ruptures.KernelCPD(kernel="linear")``, at a BIC-type penalty.
3. Each candidate is tested as Otava (Apache, formerly Hunter; Fleming et al., ICPE 2023) tests
   E-divisive's candidates: Student's t-test of the segment before against the segment after
   (bounded by the neighbouring candidates), here on the log values, and the p-value is
   multiplied by the number of positions a split could have taken (Bonferroni), because PELT
   chose the position that looks most like a step. A candidate stays when its adjusted p-value
   is below ``alpha``, its step exceeds ``noise_multiple`` times the historical noise, and at
   least ``min_step`` in relative size.
4. A run standing alone in a segment (between two candidates, or first before one) is an
   outlier (a polluted hour), not a step: it is set aside and the search runs again without
   it. The newest run alone after a candidate is kept: it may start a step (``check`` asks).

The step's size is the ratio of the geometric means after/before, with the t-interval of the
same test (so the CI and the p-value say the same thing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

DEFAULT_ALPHA = 0.01
DEFAULT_MIN_STEP = 0.02
DEFAULT_NOISE_MULTIPLE = 2.0
PENALTY_PER_LOG_N = 3.0  # PELT's penalty, in squared noise units, per log(n)
NOISE_FLOOR = 1e-3  # a constant series still has a resolution (0.1%)
MIN_RUNS = 3  # fewer runs than this say nothing about a step
MAD_TO_SD = 1.4826
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)  # sd of a median over the sd of a mean (normal noise)


@dataclass(frozen=True)
class ChangePoint:
    index: int  # position in the series of the first run after the step
    before: int  # runs in the segment before
    after: int  # runs in the segment after
    step: float  # after/before - 1
    step_ci: tuple[float, float]
    p_value: float  # Bonferroni-adjusted over the positions a split could take
    p_raw: float
    noise: float  # the group's historical noise (relative sd between runs)


@dataclass
class Analysis:
    change_points: list[ChangePoint] = field(default_factory=list)
    outliers: list[int] = field(default_factory=list)  # runs set aside (alone mid-history)
    noise: float | None = None
    scale: str = "log"  # "log", or "linear" when a value is <= 0
    reason: str | None = None  # why nothing was analysed


def historical_noise(log_values: Sequence[float] | np.ndarray) -> float:
    """The group's between-run noise: the standard deviation of one run's value around its
    neighbours', estimated from the median absolute successive difference (a step moves one
    difference, an outlier two, so neither inflates it the way a plain SD would). On a log
    scale this is a relative spread (0.03: runs scatter by ~3%). Issue #22's between-run noise
    model is to be aligned with this one function."""
    values = np.asarray(log_values, dtype=float)
    if values.size < 2:
        return math.nan
    diffs = np.abs(np.diff(values))
    return float(MAD_TO_SD * np.median(diffs) / math.sqrt(2.0))


def _scaled(values: Sequence[float]) -> tuple[np.ndarray, str] | None:
    data = np.asarray(values, dtype=float)
    if np.all(data > 0):
        return np.log(data), "log"
    centre = float(np.median(np.abs(data)))
    return (data / centre, "linear") if centre > 0 else None


def _candidates(z: np.ndarray) -> list[int]:
    """PELT breakpoints (indices of the first point after each), without the series' end."""
    import ruptures

    n = len(z)
    algo = ruptures.KernelCPD(kernel="linear", min_size=1, jump=1).fit(z.reshape(-1, 1))
    ends = algo.predict(pen=PENALTY_PER_LOG_N * math.log(n))
    return [int(b) for b in ends if 0 < int(b) < n]


def _location_test(
    before: np.ndarray, after: np.ndarray, noise: float
) -> tuple[float, float, float] | None:
    """(difference of the segments' medians, its standard error, degrees of freedom).

    The scale is the historical noise (robust, from the whole series), not the segments' own
    spread: a wild run inside a segment moves neither the medians nor the scale, where it would
    move a mean and a pooled SD. 1.2533 is the median's efficiency factor under normal noise;
    the degrees of freedom are the series' (the noise was estimated from all of it)."""
    a, b = len(before), len(after)
    df = a + b - 2
    if a < 1 or b < 1 or df < 1:
        return None
    se = MEDIAN_SE_FACTOR * noise * math.sqrt(1 / a + 1 / b)
    return float(np.median(after) - np.median(before)), se, float(df)


def _step(diff: float, scale: str) -> float:
    return math.expm1(diff) if scale == "log" else diff


def _judge(
    y: np.ndarray, bounds: tuple[int, int, int], noise: float, scale: str, settings: _Settings
) -> ChangePoint | None:
    from scipy import stats

    start, cut, end = bounds
    tested = _location_test(y[start:cut], y[cut:end], noise)
    if tested is None:
        return None
    diff, se, df = tested
    df = float(len(y) - 2)
    p_raw = float(2 * stats.t.sf(abs(diff) / se, df))
    p_value = min(1.0, p_raw * (len(y) - 1))
    half = float(stats.t.ppf(0.975, df)) * se
    step = _step(diff, scale)
    if p_value >= settings.alpha or abs(diff) < settings.noise_multiple * noise:
        return None
    if abs(step) < settings.min_step:
        return None
    ci = (_step(diff - half, scale), _step(diff + half, scale))
    return ChangePoint(cut, cut - start, end - cut, step, ci, p_value, p_raw, noise)


@dataclass(frozen=True)
class _Settings:
    alpha: float = DEFAULT_ALPHA
    min_step: float = DEFAULT_MIN_STEP
    noise_multiple: float = DEFAULT_NOISE_MULTIPLE


def _search(y: np.ndarray, noise: float, scale: str, settings: _Settings) -> list[ChangePoint]:
    z = (y - np.median(y)) / noise
    cuts = _candidates(z)
    bounds = [0, *cuts, len(y)]
    found = []
    for i in range(1, len(bounds) - 1):
        judged = _judge(y, (bounds[i - 1], bounds[i], bounds[i + 1]), noise, scale, settings)
        if judged is not None:
            found.append(judged)
    return found


def _lone_runs(points: list[ChangePoint], n: int) -> list[int]:
    """Runs standing alone in a segment, the newest excepted: outliers, not steps (the first
    run alone before a step is one too)."""
    lone = {p.index for p in points if p.after == 1 and p.index + 1 < n}
    lone |= {0 for p in points if p.before == 1 and p.index == 1}
    return sorted(lone)


def analyse(
    values: Sequence[float],
    alpha: float = DEFAULT_ALPHA,
    min_step: float = DEFAULT_MIN_STEP,
    noise_multiple: float = DEFAULT_NOISE_MULTIPLE,
) -> Analysis:
    """The significant change points of a series of per-run values (oldest first)."""
    if len(values) < MIN_RUNS:
        return Analysis(reason=f"{len(values)} runs (a step needs at least {MIN_RUNS})")
    scaled = _scaled(values)
    if scaled is None:
        return Analysis(reason="every value is 0")
    y, scale = scaled
    settings = _Settings(alpha, min_step, noise_multiple)
    noise = max(historical_noise(y), NOISE_FLOOR)
    found = _search(y, noise, scale, settings)
    outliers = _lone_runs(found, len(y))
    if outliers:
        keep = np.setdiff1d(np.arange(len(y)), outliers)
        noise = max(historical_noise(y[keep]), NOISE_FLOOR)
        found = [_reindexed(p, keep) for p in _search(y[keep], noise, scale, settings)]
    return Analysis(found, outliers, noise, scale)


def _reindexed(point: ChangePoint, kept: np.ndarray) -> ChangePoint:
    """A change point found on the series without its outliers, at its index in the whole."""
    from dataclasses import replace

    return replace(point, index=int(kept[point.index]))


MIN_GROUPS_FOR_RUN_FACTOR = 4


def run_factors(series: Sequence[Sequence[tuple[str, float]]]) -> dict[str, float]:
    """Per run, the factor the host applied to every group alike (``run id -> factor``).

    A busy hour, a slower machine or another CPU frequency moves every group of a run together;
    a code change moves the groups it touches. Each group's values are divided by that group's
    own median, and a run's factor is the median of those ratios over the groups it has (when it
    has at least ``MIN_GROUPS_FOR_RUN_FACTOR``; else 1). Dividing a group's series by the factors
    leaves what is its own: the planted change of one implementation stays, the host's shifts
    go. A change in most groups at once moves the factor itself, so the factors are analysed as
    a series of their own (``check`` reports it as the run-wide group)."""
    ratios: dict[str, list[float]] = {}
    for points in series:
        if len(points) < MIN_RUNS:
            continue
        centre = float(np.median([value for _, value in points]))
        if centre <= 0:
            continue
        for run, value in points:
            ratios.setdefault(run, []).append(value / centre)
    return {
        run: float(np.median(found)) if len(found) >= MIN_GROUPS_FOR_RUN_FACTOR else 1.0
        for run, found in ratios.items()
    }
