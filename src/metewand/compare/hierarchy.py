"""Nested samples — runs ⊃ process launches ⊃ repetitions — and NEW/BASE over them.

Kalibera & Jones ("Rigorous benchmarking in reasonable time", ISMM 2013) is the design: a
measurement varies at every level that is repeated (a run's host state, a process's heap layout
and caches, one repetition's noise), the variance of each level is estimated, and the
uncertainty of a mean comes from the highest level that was repeated, not from the repetitions
alone. Resampling repetitions inside one run as if they were independent (what a plain
bootstrap does) hides every level above them: two runs of unchanged code then differ
"significantly" because the host's load changed between them.

Everything here works on the log scale (a value v becomes log v), so a difference of means is
the log of a ratio of geometric means and a level's standard deviation reads as a relative
spread (0.05 ≈ 5%).

- A ``Nested`` sample keeps, per run, its launches, and per launch its repetitions.
- A side's own units are summarised by their 20%-trimmed mean (``_trimmed``): on a loaded host
  one attempt in a dozen can come out 2x its neighbours, and a plain mean follows it.
- The *unit level* of a comparison is the highest level with at least two members on each
  side: runs when both sides have several runs, else process launches, else repetitions (one
  process served them all, so its launch's noise cannot be seen). Its members are the
  independent units: their count is the ``n`` of the minimum-size rule and the rank test runs
  over their means.
- Between-run variance that one side cannot show (one run) may come from elsewhere
  (``BetweenRun``): the other side's runs, or a history of earlier runs. Without it, a
  one-run-per-side comparison cannot see between-run noise, and says so.
- The CI of the log ratio is a hierarchical bootstrap-t: every level from the unit level down is
  resampled with replacement (Kalibera & Jones resample at each level), and each resample is
  studentized by the same variance estimate as the data, which keeps the 95% coverage honest with
  few units (a plain percentile bootstrap of 5 units covers ~87%). With fewer than
  ``BOOTSTRAP_MIN_UNITS`` units on a side the resamples are too few to shape a tail, and the
  Student t quantile with Welch–Satterthwaite degrees of freedom is used instead (recorded).

Each level's variance and the JSON-ready figures of an estimate are in ``hierarchy_figures``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

RUN, LAUNCH, REPETITION = "run", "launch", "repetition"
LEVELS = (RUN, LAUNCH, REPETITION)
CI_LEVEL = 0.95
BOOTSTRAP_MIN_UNITS = 3  # fewer units on a side: Student quantiles instead of bootstrap-t
TRIM = 0.2  # each side's units are summarised by their 20%-trimmed mean (see _trimmed)
DEFAULT_RESAMPLES = 2000


class NotPositive(ValueError):
    """A value <= 0 has no logarithm: a ratio of such values is undefined."""


@dataclass(frozen=True)
class BetweenRun:
    """Between-run variance (log scale) known from outside one comparison's own runs.

    ``variance``: σ² of a run's mean around the true mean; ``df``: its degrees of freedom
    (``math.inf`` for a value taken as known); ``source``: where it came from, for the report
    (``"BASE's 3 runs"``, ``"history of 12 runs"``).
    """

    variance: float
    df: float
    source: str
    # with a speed probe (compare.speed_sides): the run means' log-probe variance and their
    # covariance with the metric's, over the same runs; None where unknown
    probe_variance: float | None = None
    probe_covariance: float | None = None
    # the same spread with each earlier run's host drift taken out as ``compare.controls`` takes
    # it out (``history.spread_controls``): the one to add to a group read against its controls
    controlled: BetweenRun | None = None


NO_EXTERNAL = BetweenRun(0.0, math.inf, "")


@dataclass(frozen=True)
class Nested:
    """Log values of one side in a rectangle padded with NaN: ``values[r, l, k]`` is
    repetition k of launch l of run r; ``launches[r]`` and ``reps[r, l]`` say how many are real."""

    values: np.ndarray  # (runs, max launches, max repetitions), NaN past the real ones
    launches: np.ndarray  # (runs,) launches per run
    reps: np.ndarray  # (runs, max launches) repetitions per launch, 0 past the real ones

    @property
    def n_runs(self) -> int:
        return int(self.values.shape[0])

    @property
    def n_launches(self) -> int:
        return int(self.launches.sum())

    @property
    def n_values(self) -> int:
        return int(self.reps.sum())

    def has_level(self, level: str) -> bool:
        """Whether the level is repeated inside its parent somewhere (it can show variance)."""
        if level == RUN:
            return self.n_runs >= 2
        if level == LAUNCH:
            return bool((self.launches >= 2).any())
        return bool((self.reps >= 2).any())

    def units(self, level: str) -> int:
        return {RUN: self.n_runs, LAUNCH: self.n_launches, REPETITION: self.n_values}[level]


def nested(items: Iterable[tuple[Hashable, Hashable, float]]) -> Nested:
    """``(run, launch, value)`` triples (in any order; keys only group) as a ``Nested``.

    Raises ``NotPositive`` for a value <= 0 and ``ValueError`` for no values at all.
    """
    runs: dict[Hashable, dict[Hashable, list[float]]] = {}
    for run, launch, value in items:
        if not value > 0:  # NaN too
            raise NotPositive(f"value {value!r} has no logarithm")
        runs.setdefault(run, {}).setdefault(launch, []).append(math.log(value))
    if not runs:
        raise ValueError("no values")
    max_l = max(len(launches) for launches in runs.values())
    max_k = max(len(reps) for launches in runs.values() for reps in launches.values())
    values = np.full((len(runs), max_l, max_k), np.nan)
    counts = np.zeros((len(runs), max_l), dtype=np.intp)
    for r, launches in enumerate(runs.values()):
        for launch_index, reps in enumerate(launches.values()):
            values[r, launch_index, : len(reps)] = reps
            counts[r, launch_index] = len(reps)
    return Nested(values, (counts > 0).sum(axis=1), counts)


# ---- means and variances of (possibly resampled) rectangles -----------------------------------
#
# Every function below takes arrays with any leading shape (``...`` = resamples) over the last
# three axes (run, launch, repetition) and a weight array of the same shape that is 1 where a
# value is real and 0 past it, so the statistic of 2000 resamples is one vectorised expression.


def _launch_means(values: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    count = weight.sum(axis=-1)
    total = np.where(weight > 0, values, 0.0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / count, count


def _run_means(launch_mean: np.ndarray, launch_real: np.ndarray) -> np.ndarray:
    count = launch_real.sum(axis=-1)
    return np.where(launch_real, launch_mean, 0.0).sum(axis=-1) / count


def _statistics(
    values: np.ndarray, weight: np.ndarray, level: str, external: float
) -> tuple[np.ndarray, np.ndarray]:
    """The hierarchical mean (each run, and each launch inside its run, weighs the same) and the
    estimated variance of that mean from ``level`` down, plus ``external`` (between-run variance
    known from elsewhere, divided by the number of runs). A level with one member has no
    variance: NaN, which the callers read as "no interval"."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return _statistics_of(values, weight, level, external)


def _statistics_of(
    values: np.ndarray, weight: np.ndarray, level: str, external: float
) -> tuple[np.ndarray, np.ndarray]:
    launch_mean, reps = _launch_means(values, weight)
    launch_real = reps > 0
    run_mean = _run_means(launch_mean, launch_real)
    n_runs = values.shape[-3]
    flat = _flat_units(values, launch_mean, run_mean, level)
    if flat is not None:  # the side's own units: a trimmed mean, robust to a spiked unit
        mean, variance = _trimmed(flat)
        return mean, variance + (external / n_runs if level != RUN else 0.0)
    mean = run_mean.mean(axis=-1)
    launches = launch_real.sum(axis=-1)  # (..., runs)
    if level == LAUNCH:  # launches pooled over several runs (a comparison's unit level only)
        deviation = np.where(launch_real, launch_mean - run_mean[..., None], 0.0)
        pooled = (deviation**2).sum(axis=(-1, -2)) / (launches - 1).sum(axis=-1)
        # Var(mean of run means) with run r's mean the average of its launches
        variance = pooled * (1.0 / launches).sum(axis=-1) / n_runs**2
        return mean, variance + external / n_runs
    deviation = np.where(weight > 0, values - launch_mean[..., None], 0.0)
    pooled = (deviation**2).sum(axis=(-1, -2, -3)) / (reps - 1).clip(min=0).sum(axis=(-1, -2))
    per_launch = np.where(launch_real, 1.0 / reps, 0.0).sum(axis=-1) / launches**2
    variance = pooled * per_launch.sum(axis=-1) / n_runs**2
    return mean, variance + external / n_runs


def _flat_units(
    values: np.ndarray, launch_mean: np.ndarray, run_mean: np.ndarray, level: str
) -> np.ndarray | None:
    """The unit values (..., n) when ``level`` is a side's highest repeated level: the run
    means; one run's launch means (a resample keeps its launch count, in the first slots); one
    launch's repetitions. None for launches pooled over several runs."""
    runs, launches, reps = values.shape[-3:]
    if level == RUN:
        return run_mean
    if runs != 1:
        return None
    if level == LAUNCH:
        first = launch_mean.reshape(-1, launches)[0]  # every resample keeps the run's count
        return launch_mean[..., 0, : int(np.count_nonzero(~np.isnan(first)))]
    return values[..., 0, 0, :] if launches == 1 else None


def trim_count(n: int) -> int:
    """Units trimmed from each end: ``TRIM`` of them, rounded down (none below 5 units)."""
    return int(TRIM * n)


def _trimmed(units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 20%-trimmed mean of the last axis and its variance (Yuen: the winsorized variance,
    (n - 1) s_w² / (h (h - 1)) with h the units kept). Trimming keeps one unit hit by a load
    spike (a wall time 2.5x its neighbours at load 20 here) from moving the estimate; with
    normal data it costs ~5% of the mean's efficiency."""
    n = units.shape[-1]
    g = trim_count(n)
    ordered = np.sort(units, axis=-1)
    kept = n - 2 * g
    mean = ordered[..., g : n - g].mean(axis=-1)
    winsorized = np.clip(ordered, ordered[..., g : g + 1], ordered[..., n - g - 1 : n - g])
    variance = (
        (n - 1) * winsorized.var(axis=-1, ddof=1) / (kept * (kept - 1))
        if kept > 1
        else (np.full(mean.shape, np.nan))
    )
    return mean, variance


def _weight(sample: Nested) -> np.ndarray:
    return (~np.isnan(sample.values)).astype(float)


def mean_and_variance(sample: Nested, level: str, external: float = 0.0) -> tuple[float, float]:
    mean, variance = _statistics(sample.values, _weight(sample), level, external)
    return float(mean), float(variance)


def degrees_of_freedom(sample: Nested, level: str) -> int:
    flat = {
        RUN: sample.n_runs,
        LAUNCH: sample.n_launches if sample.n_runs == 1 else 0,
        REPETITION: sample.n_values if sample.n_launches == 1 else 0,
    }[level]
    if flat:  # a trimmed mean of the side's own units: Yuen's h - 1
        return flat - 2 * trim_count(flat) - 1
    if level == RUN:
        return sample.n_runs - 1
    if level == LAUNCH:
        return int((sample.launches - 1).sum())
    return int((sample.reps - 1).clip(min=0).sum())


def unit_means(sample: Nested, level: str) -> np.ndarray:
    """The means of the independent units at ``level`` (what the rank test compares)."""
    launch_mean, reps = _launch_means(sample.values, _weight(sample))
    if level == RUN:
        return _run_means(launch_mean, reps > 0)
    if level == LAUNCH:
        return launch_mean[reps > 0]
    return sample.values[~np.isnan(sample.values)]


def _resample(sample: Nested, level: str, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` hierarchical resamples of the rectangle: with replacement at ``level`` and
    at every level below it; the levels above stay as they are. Returns (B, runs, L, K) values
    with NaN past the real ones (a drawn run keeps its own launch count, a drawn launch its own
    repetition count)."""
    n_runs, max_l, max_k = sample.values.shape
    runs = np.broadcast_to(np.arange(n_runs), (resamples, n_runs))
    if level == RUN:
        runs = rng.integers(0, n_runs, size=(resamples, n_runs))
    launch_count = sample.launches[runs]  # (B, R)
    launches = np.broadcast_to(np.arange(max_l), (resamples, n_runs, max_l))
    if level in (RUN, LAUNCH):
        draw = rng.random((resamples, n_runs, max_l))
        launches = (draw * launch_count[..., None]).astype(np.intp)
    launch_real = np.arange(max_l) < launch_count[..., None]
    launches = np.where(launch_real, launches, 0)
    cell = runs[..., None] * max_l + launches  # (B, R, L): the drawn launch's flat index
    rep_count = sample.reps.ravel().take(cell)
    real = (np.arange(max_k) < rep_count[..., None]) & launch_real[..., None]
    if max_k == 1:  # one repetition per launch: nothing to draw below the launches
        picked = sample.values.ravel().take(cell)[..., None]
    else:
        draw = rng.random((resamples, n_runs, max_l, max_k))
        reps = (draw * rep_count[..., None]).astype(np.intp)
        picked = sample.values.ravel().take(cell[..., None] * max_k + reps)
    return np.where(real, picked, np.nan)


@dataclass
class Estimate:
    """NEW/BASE (or one paired sample's ratio) with its CI, on the unit level it was judged at."""

    level: str
    units: tuple[int, ...]  # units per side (one entry for a paired sample)
    log_ratio: float
    standard_error: float
    df: float
    ci: tuple[float, float] | None  # of the ratio (exp of the log interval)
    method: str  # "bootstrap_t" | "student_t"
    between_run: str  # "estimated" (runs are the units) | "borrowed" | "external" | "not estimable"
    between_run_source: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)


def unit_level(*sides: Nested) -> str:
    """The highest level with at least two members on every side."""
    for level in LEVELS:
        if all(
            side.units(level) >= 2 and (level != LAUNCH or side.n_launches > side.n_runs)
            for side in sides
        ):
            return level
    return REPETITION


def satterthwaite(parts: Sequence[tuple[float, float]]) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of variance estimates (variance, df)."""
    total = sum(v for v, _ in parts)
    denominator = sum(v * v / df for v, df in parts if df > 0 and math.isfinite(df))
    if total <= 0:
        return math.inf
    return total * total / denominator if denominator > 0 else math.inf


def side_level(side: Nested) -> str:
    """The highest level this side repeats: the level its own mean's variance comes from."""
    if side.n_runs >= 2:
        return RUN
    return LAUNCH if side.n_launches > side.n_runs else REPETITION


def _externals(
    sides: Sequence[Nested], given: BetweenRun | None
) -> tuple[list[BetweenRun], str, str | None]:
    """Per side, the between-run variance to add (zero for a side with several runs, whose own
    runs show it), the comparison's between-run status and where an added variance came from."""
    several = [side for side in sides if side.n_runs >= 2]
    if len(several) == len(sides):
        return [NO_EXTERNAL] * len(sides), "estimated", None
    external = given
    status = "external"
    if external is None and several:
        borrowed = [_run_component(side) for side in several]
        runs = " + ".join(str(side.n_runs) for side in several)
        external = BetweenRun(
            sum(v for v, _ in borrowed) / len(borrowed),
            float(sum(d for _, d in borrowed)),
            f"the side with {runs} runs",
        )
        status = "borrowed"
    if external is None:
        return [NO_EXTERNAL] * len(sides), "not estimable", None
    added = [NO_EXTERNAL if side.n_runs >= 2 else external for side in sides]
    return added, status, external.source


def _run_component(side: Nested) -> tuple[float, float]:
    """The variance of one run's mean on a side with several runs, with its degrees of freedom.

    Lent to a side with one run, whose own launches then add their share again: the raw variance
    of the run means is used, not Kalibera & Jones's component with that share subtracted, since
    the subtracted estimate, clamped at 0 and from few runs, reads 0 too often (CIs that lean on it
    covered ~90%; this one, a little wider, covers ~95%)."""
    launch_mean, reps = _launch_means(side.values, _weight(side))
    run_mean = _run_means(launch_mean, reps > 0)
    return float(run_mean.var(ddof=1)), float(side.n_runs - 1)


TIED_VARIANCE = 1e-9  # a resample's variance below this share of the observed one is none
# a ratio CI beyond 2^53 either way says nothing, and a float that large is integral, which the
# canonical JSON of scores.json refuses (unsafe_integer): a 2-repetition case on Dask gave 1.4e16
MAX_LOG_BOUND = math.log(2.0**53 - 1)


def _bootstrap_quantiles(
    sides: Sequence[Nested],
    signs: Sequence[float],
    levels: Sequence[str],
    externals: Sequence[BetweenRun],
    resamples: int,
    seed: int,
) -> tuple[float, float] | None:
    """The 2.5% and 97.5% quantiles of the studentized resampled statistic (None if degenerate)."""
    rng = np.random.default_rng(seed)
    estimate = np.zeros(resamples)
    variance = np.zeros(resamples)
    observed, observed_variance = 0.0, 0.0
    for side, sign, level, external in zip(sides, signs, levels, externals, strict=True):
        drawn = _resample(side, level, resamples, rng)
        mean, var = _statistics(drawn, (~np.isnan(drawn)).astype(float), level, 0.0)
        estimate += sign * mean
        variance += sign * sign * var
        side_mean, side_variance = mean_and_variance(side, level)
        observed += sign * side_mean
        observed_variance += sign * sign * side_variance
        if external.variance > 0:  # the runs this side cannot show, drawn as the model has them
            share = sign * sign * external.variance / side.n_runs
            estimate += rng.normal(0.0, math.sqrt(share), resamples)
            # the estimate of that variance is itself uncertain with few degrees of freedom
            if math.isfinite(external.df):
                variance += share * rng.chisquare(external.df, resamples) / external.df
            else:
                variance += share
    # A resample of tied units (CPU read in clock ticks) has no spread but for rounding: its
    # variance of ~1e-33 made t astronomically large and the CI overflow. No spread is no spread.
    variance = np.where(variance <= observed_variance * TIED_VARIANCE, 0.0, variance)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (estimate - observed) / np.sqrt(variance)
    finite = t[np.isfinite(t)]
    if finite.size < resamples * 0.9:  # too many resamples with no spread at all
        return None
    low, high = np.percentile(finite, [2.5, 97.5])
    return float(low), float(high)


def student_quantile(df: float) -> float:
    from scipy.special import stdtrit  # the t distribution's inverse CDF (scipy.special is light)

    return float(stdtrit(df, 0.5 + CI_LEVEL / 2)) if math.isfinite(df) else 1.959963984540054


def _interval(
    sides: Sequence[Nested],
    signs: Sequence[float],
    externals: Sequence[BetweenRun],
    resamples: int,
    seed: int,
) -> tuple[float, float, float, tuple[float, float] | None, str]:
    """(log estimate, standard error, df, log CI or None, method) of Σ sign·mean(side), each
    side's variance from its own highest repeated level plus its added between-run variance."""
    levels = [side_level(side) for side in sides]
    estimate, parts = 0.0, []
    for side, sign, level, extra in zip(sides, signs, levels, externals, strict=True):
        mean, variance = mean_and_variance(side, level)
        estimate += sign * mean  # a weighted sum of the sides' means: variances scale by sign²
        parts.append((sign * sign * variance, float(max(degrees_of_freedom(side, level), 0))))
        if extra.variance > 0:
            parts.append((sign * sign * extra.variance / side.n_runs, extra.df))
    total = sum(v for v, _ in parts)
    se = math.sqrt(total) if total > 0 else (0.0 if total == 0 else math.nan)
    df = satterthwaite(parts)
    units = [side.units(level) for side, level in zip(sides, levels, strict=True)]
    if min(units) < 2 or not math.isfinite(se):
        return estimate, math.nan, df, None, "none"
    if se == 0:
        return estimate, se, df, (estimate, estimate), "no spread"
    if min(units) >= BOOTSTRAP_MIN_UNITS:
        quantiles = _bootstrap_quantiles(sides, signs, levels, externals, resamples, seed)
        if quantiles is not None:
            low, high = quantiles
            return estimate, se, df, (estimate - high * se, estimate - low * se), "bootstrap_t"
    q = student_quantile(df)
    return estimate, se, df, (estimate - q * se, estimate + q * se), "student_t"


def _estimate(
    sides: Sequence[Nested],
    signs: Sequence[float],
    between_run: BetweenRun | None,
    resamples: int,
    seed: int,
) -> Estimate:
    level = unit_level(*sides)
    externals, status, source = _externals(sides, between_run)
    log_ratio, se, df, log_ci, method = _interval(sides, signs, externals, resamples, seed)
    notes = []
    if status == "not estimable" and len(sides) == 2:  # pairs ran back to back: it cancels
        notes.append("between-run noise could not be estimated (one run per side)")
    if level == REPETITION and any(side.n_values > side.n_launches for side in sides):
        notes.append("one process served every repetition: its launch noise could not be seen")
    if log_ci is not None and max(abs(bound) for bound in log_ci) > MAX_LOG_BOUND:
        notes.append("the CI is unbounded (too little spread among the units to bound it)")
        log_ci, method = None, "none"
    ci = (math.exp(log_ci[0]), math.exp(log_ci[1])) if log_ci is not None else None
    return Estimate(
        level=level,
        units=tuple(side.units(level) for side in sides),
        log_ratio=log_ratio,
        standard_error=se,
        df=df,
        ci=ci,
        method=method,
        between_run=status,
        between_run_source=source,
        notes=notes,
    )


def two_sample(
    base: Nested,
    new: Nested,
    between_run: BetweenRun | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Estimate:
    """NEW/BASE as a ratio of hierarchical geometric means (each side's units 20%-trimmed), with
    its CI.

    ``between_run``: a per-group between-run variance known from elsewhere (the run history of
    earlier runs); it is added to each side judged below the run level, and it replaces the
    estimate borrowed from a side that has several runs."""
    return _estimate((base, new), (-1.0, 1.0), between_run, resamples, seed)


def one_sample(
    differences: Nested,
    between_run: BetweenRun | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Estimate:
    """A paired design's ratio: ``differences`` holds log(NEW) - log(BASE) of each pair
    (use ``nested`` on exp of them, or ``paired`` below), nested the same way."""
    return _estimate((differences,), (1.0,), between_run, resamples, seed)


def paired(items: Iterable[tuple[Hashable, Hashable, float, float]]) -> Nested:
    """``(run, pair, base value, new value)`` as a one-sample ``Nested`` of NEW/BASE ratios,
    each pair a launch-level unit (a pair is two launches that ran back to back)."""
    ratios = []
    for run, pair, base_value, new_value in items:
        if not (base_value > 0 and new_value > 0):
            raise NotPositive(f"pair {pair!r}: a value <= 0 has no logarithm")
        ratios.append((run, pair, new_value / base_value))
    return nested(ratios)


def median_interval(
    sample: Nested, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile 95% CI of the median of the values, resampled hierarchically from the
    sample's highest repeated level down (None with a single value)."""
    level = side_level(sample)
    if sample.units(level) < 2:
        return None
    if sample.n_runs == 1 and (sample.n_launches == 1 or (sample.reps <= 1).all()):
        # one level varies: the plain bootstrap of the values, whose sorted draws
        # compare.stats shares between every metric and case of a report
        from metewand.compare import stats

        values = np.exp(sample.values[~np.isnan(sample.values)])
        ci = stats.percentile_ci(stats.iid_median_replicates(values, resamples, seed))
        return (ci[0], ci[1]) if ci else None
    drawn = _resample(sample, level, resamples, np.random.default_rng(seed))
    medians = np.nanmedian(drawn.reshape(resamples, -1), axis=1)
    low, high = np.percentile(np.exp(medians), [2.5, 97.5])
    return float(low), float(high)
