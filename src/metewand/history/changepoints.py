"""Change points in one group's metric over runs: where it stepped, by how much, how surely.

The unit is the run: each run contributes one value per group (its level: the median, or the
floor, of its counted attempts; ``detect`` chooses), because the noise a history must see past
is the noise *between* runs (another process launch, another hour of the host), which the
attempts inside one run do not show.

The method (docs/history.md says why this one):

1. The series is taken on a log scale (a step is a ratio) and divided by the group's noise:
   its own between-run spread (``historical_noise``, read robustly from successive
   differences, so a step or a few wild runs do not inflate it), moderated by the suite's
   typical spread when ``detect`` passes it (a ``Prior``: 16 runs estimate a spread to
   +-25%, and a group that looks quiet by chance would otherwise cry wolf); the tests use
   Student's t with the degrees of freedom the two estimates carry.
2. Candidate change points come from PELT (Killick, Fearnhead & Eckley 2012) with a mean-shift
   cost, as implemented in C by ``ruptures.KernelCPD(kernel="linear")``, at a BIC-type penalty.
3. Each candidate is tested as Otava (Apache, formerly Hunter; Fleming et al., ICPE 2023) tests
   E-divisive's candidates: the segment before against the segment after (bounded by the
   neighbouring candidates). Here the segments' medians are compared on the scale of the noise
   (a robust z, so a wild run inside a segment moves neither), and the p-value is multiplied
   by the number of positions a split could have taken (Bonferroni), because PELT chose the
   position that looks most like a step. A candidate stays when its adjusted p-value is below
   ``alpha``, its step exceeds ``noise_multiple`` times the noise, and ``min_step``.
4. A run standing alone in a segment (between two candidates, or first before one) is an
   outlier (a polluted hour), not a step: it is set aside and the search runs again without
   it. The newest run alone after a candidate is kept: it may start a step (``check`` asks).

The step's size is the ratio of the segments' medians, with the interval of the same test (so
the CI and the p-value say the same thing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from metewand.history.settings import DEFAULT_ALPHA, DEFAULT_MIN_STEP, DEFAULT_NOISE_MULTIPLE

PENALTY_PER_LOG_N = 3.0  # PELT's penalty, in squared noise units, per log(n)
NOISE_FLOOR = 1e-3  # a constant series still has a resolution (0.1%)
MIN_RUNS = 3  # fewer runs than this say nothing about a step
MIN_SEGMENT = 3  # runs a level needs between two steps (the newest segment excepted)
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)  # sd of a median over the sd of a mean (normal noise)
NOISE_DF_PER_RUN = 0.58  # degrees of freedom ``historical_noise`` carries per run (simulated)


@dataclass(frozen=True)
class Settings:
    alpha: float = DEFAULT_ALPHA
    min_step: float = DEFAULT_MIN_STEP
    noise_multiple: float = DEFAULT_NOISE_MULTIPLE


@dataclass(frozen=True)
class Prior:
    """What the suite's other groups say about a group's noise: their typical spread, worth
    ``df`` degrees of freedom (moderated statistics, Smyth 2004: a group's own estimate from
    16 runs is uncertain by +-25%, and a group that looks quiet by chance would cry wolf)."""

    noise: float
    df: float


@dataclass(frozen=True)
class ChangePoint:
    index: int  # position in the series of the first run after the step
    before: int  # runs in the segment before
    after: int  # runs in the segment after
    step: float  # after/before - 1
    step_ci: tuple[float, float]
    p_value: float  # Bonferroni-adjusted over the positions a split could take (not: shared)
    p_raw: float
    noise: float  # the noise the step was judged against (relative sd between runs)
    shared: bool = False  # tested at a run where other groups' change points are
    positions: int = 0  # the positions its p-value is corrected for (Bonferroni)


@dataclass
class Analysis:
    change_points: list[ChangePoint] = field(default_factory=list)
    outliers: list[int] = field(default_factory=list)  # runs set aside (alone mid-history)
    noise: float | None = None  # the noise used: the group's own, moderated by the suite's
    own_noise: float | None = None  # the group's own between-run spread
    scale: str = "log"  # "log", or "linear" when a value is <= 0
    reason: str | None = None  # why nothing was analysed
    df: float = math.inf  # degrees of freedom of ``noise`` (the t reference of the tests)

    def levels(self, values: Sequence[float]) -> list[float]:
        """Each run's fitted level: the median of its segment (outliers: their own value)."""
        cuts = [0, *(p.index for p in self.change_points), len(values)]
        kept = np.setdiff1d(np.arange(len(values)), self.outliers)
        data = np.asarray(values, dtype=float)
        fitted = data.copy()
        for start, end in zip(cuts, cuts[1:], strict=False):
            inside = kept[(kept >= start) & (kept < end)]
            if inside.size:
                fitted[start:end] = np.median(data[inside])
        fitted[self.outliers] = data[self.outliers]
        return [float(v) for v in fitted]


def biweight_scale(x: np.ndarray, c: float = 9.0) -> float:
    """The biweight midvariance's scale (Mosteller & Tukey 1977; Beers, Flynn & Gebhardt 1990):
    values beyond ``c`` MADs from the median get no weight, the rest a smoothly falling one.
    As robust as the MAD (half the values may be wild) and about twice as efficient."""
    centre = float(np.median(x))
    mad = float(np.median(np.abs(x - centre)))
    if mad == 0:
        return 0.0
    u = (x - centre) / (c * mad)
    inside = np.abs(u) < 1
    num = float(np.sum(((x - centre) ** 2 * (1 - u**2) ** 4)[inside]))
    den = float(np.sum(((1 - u**2) * (1 - 5 * u**2))[inside]))
    return math.sqrt(x.size * num) / abs(den) if den else 0.0


def historical_noise(log_values: Sequence[float] | np.ndarray) -> float:
    """The group's between-run noise: the standard deviation of one run's value around its
    neighbours', from the biweight scale of the successive differences (a step moves one
    difference, an outlier run two, and the biweight gives such a difference no weight, where
    a plain SD would grow with them). On a log scale this is a relative spread (0.03: runs
    scatter by ~3%). From n runs it carries about ``NOISE_DF_PER_RUN`` x (n - 1) degrees of
    freedom (simulated: 8.8 for 16 runs; the MAD of the same differences gives 4.7)."""
    values = np.asarray(log_values, dtype=float)
    if values.size < 2:
        return math.nan
    return biweight_scale(np.diff(values)) / math.sqrt(2.0)


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


def _step(diff: float, scale: str) -> float:
    return math.expm1(diff) if scale == "log" else diff


def _z(y: np.ndarray, bounds: tuple[int, int, int], noise: float) -> tuple[float, float]:
    """(difference of the segments' medians, its standard error) for the cut ``bounds[1]``."""
    start, cut, end = bounds
    before, after = y[start:cut], y[cut:end]
    se = MEDIAN_SE_FACTOR * noise * math.sqrt(1 / before.size + 1 / after.size)
    return float(np.median(after) - np.median(before)), se


def judge(
    y: np.ndarray,
    bounds: tuple[int, int, int],
    noise: float,
    scale: str,
    settings: Settings,
    positions: int | None = None,
    df: float = math.inf,
) -> ChangePoint | None:
    """The candidate at ``bounds[1]``: the medians of the segments either side compared on the
    scale of the noise (Student's t with the noise's ``df``), the p-value multiplied by the
    ``positions`` the cut was chosen among (Bonferroni):
    every position of the series when PELT chose it from this series (the default); the few
    around a run other groups' change points named, whose noise is not this group's."""
    # scipy.special, not scipy.stats: the same t distribution without stats' ~2 s import
    from scipy.special import stdtr, stdtrit

    start, cut, end = bounds
    diff, se = _z(y, bounds, noise)
    p_raw = float(2 * stdtr(df, -abs(diff) / se))  # both tails of Student's t
    searched = positions is None
    p_value = min(1.0, p_raw * (len(y) - 1 if positions is None else positions))
    step = _step(diff, scale)
    if p_value >= settings.alpha or abs(diff) < settings.noise_multiple * noise:
        return None
    if abs(step) < settings.min_step:
        return None
    half = float(stdtrit(df, 0.975)) * se
    ci = (_step(diff - half, scale), _step(diff + half, scale))
    return ChangePoint(
        cut,
        cut - start,
        end - cut,
        step,
        ci,
        p_value,
        p_raw,
        noise,
        not searched,
        len(y) - 1 if positions is None else positions,
    )


def _merged(cuts: list[int], y: np.ndarray, noise: float) -> list[int]:
    """The cuts without those that bound a segment shorter than ``MIN_SEGMENT`` runs (but the
    newest, which may be short: ``check`` asks whether the newest run starts a step). Of a
    short segment's two cuts the weaker goes; a median of one or two runs is no level."""
    cuts = list(cuts)
    while True:
        bounds = [0, *cuts, len(y)]
        short = [i for i in range(len(bounds) - 2) if bounds[i + 1] - bounds[i] < MIN_SEGMENT]
        if not short or not cuts:
            return cuts
        i = short[0]  # segment i lies between bounds[i] and bounds[i + 1]
        weakest = [j for j in (i - 1, i) if 0 <= j < len(cuts)]
        strength = {j: abs(_ratio(y, [0, *cuts, len(y)], j, noise)) for j in weakest}
        cuts.pop(min(strength, key=strength.__getitem__))


def _ratio(y: np.ndarray, bounds: list[int], j: int, noise: float) -> float:
    diff, se = _z(y, (bounds[j], bounds[j + 1], bounds[j + 2]), noise)
    return diff / se


def _search(
    y: np.ndarray, noise: float, df: float, scale: str, settings: Settings
) -> tuple[list[ChangePoint], list[int]]:
    """(the significant change points, the lone runs PELT isolated: outlier candidates)."""
    raw = _candidates((y - np.median(y)) / noise)
    bounds = [0, *_merged(raw, y, noise), len(y)]
    found = []
    for i in range(1, len(bounds) - 1):
        judged = judge(y, (bounds[i - 1], bounds[i], bounds[i + 1]), noise, scale, settings, df=df)
        if judged is not None:
            found.append(judged)
    return found, _lone_runs(raw, len(y))


def _lone_runs(cuts: list[int], n: int) -> list[int]:
    """Runs PELT put alone in a segment, the newest excepted: outliers (a polluted hour), not
    two steps."""
    bounds = [0, *cuts, n]
    return [
        bounds[i]
        for i in range(len(bounds) - 1)
        if bounds[i + 1] - bounds[i] == 1 and bounds[i + 1] < n
    ]


def _noise(y: np.ndarray, prior: Prior | None) -> tuple[float, float, float]:
    """(the noise to judge by, the group's own, the degrees of freedom): the group's own,
    moderated by the suite's when a prior is given."""
    own = historical_noise(y)
    df = NOISE_DF_PER_RUN * (len(y) - 1)
    if prior is None or not math.isfinite(prior.noise):
        return max(own, NOISE_FLOOR), own, df
    moderated = math.sqrt((prior.df * prior.noise**2 + df * own**2) / (prior.df + df))
    return max(moderated, NOISE_FLOOR), own, prior.df + df


def analyse(
    values: Sequence[float], settings: Settings = Settings(), prior: Prior | None = None
) -> Analysis:
    """The significant change points of a series of per-run values (oldest first)."""
    if len(values) < MIN_RUNS:
        return Analysis(reason=f"{len(values)} runs (a step needs at least {MIN_RUNS})")
    scaled = _scaled(values)
    if scaled is None:
        return Analysis(reason="every value is 0")
    y, scale = scaled
    noise, own, df = _noise(y, prior)
    found, outliers = _search(y, noise, df, scale, settings)
    if outliers:
        keep = np.setdiff1d(np.arange(len(y)), outliers)
        noise, own, df = _noise(y[keep], prior)
        found = [
            replace(p, index=int(keep[p.index]))
            for p in _search(y[keep], noise, df, scale, settings)[0]
        ]
    found = [p for p in found if not _unconfirmed(y, p)]
    return Analysis(found, outliers, noise, own, scale, df=df)


def _unconfirmed(y: np.ndarray, point: ChangePoint) -> bool:
    """A step that only the newest one or two runs show must take them beyond every earlier
    run (outliers set aside included): on a host whose noise has heavy tails, a run as far
    out as an earlier one is the same weather again, not yet a new level. Once
    ``MIN_SEGMENT`` runs show it, the test of the medians alone decides."""
    newest = y[point.index :]
    if point.index + point.after != len(y) or point.after >= MIN_SEGMENT:
        return False
    earlier = y[: point.index]
    return not (newest.min() > earlier.max() if point.step > 0 else newest.max() < earlier.min())


def gain(values: Sequence[float], analysis: Analysis, index: int) -> float | None:
    """How much a cut before run ``index`` explains, in squared noise units (the least-squares
    gain PELT maximises), within the segment the analysis's other change points leave around
    it; None when the cut would leave a segment without runs. ``detect`` sums it over groups
    to place a change several groups share."""
    kept, y, bounds = _segment_of(values, analysis, index)
    if bounds is None or analysis.noise is None:
        return None
    start, cut, end = bounds
    a, b = cut - start, end - cut
    diff = float(np.mean(y[cut:end]) - np.mean(y[start:cut]))
    return a * b / (a + b) * (diff / analysis.noise) ** 2


def first_runs_restored(analysis: Analysis, declared: int, found: int) -> Analysis:
    """The analysis with the runs from the declared run up to the found change point taken
    back from the outliers. The search sets a run standing alone aside as an outlier; but the
    first runs after a commit are where a new level begins, often overshooting it (a cold
    cache, a transient), so such runs alone are the step's evidence, not a polluted hour
    (the sorting example once put the step two runs late: its first two runs were lone)."""
    back = set(range(declared, max(found, declared + 1)))
    if not back & set(analysis.outliers):
        return analysis
    return replace(analysis, outliers=[o for o in analysis.outliers if o not in back])


def moved(
    values: Sequence[float], analysis: Analysis, old: ChangePoint, index: int, settings: Settings
) -> ChangePoint | None:
    """``old`` judged again with its cut before run ``index`` instead (None: not significant
    there), corrected for as many positions as before."""
    others = replace(analysis, change_points=[p for p in analysis.change_points if p != old])
    return _judged_at(values, others, index, settings, old.positions if old.shared else None)


def shared_at(
    values: Sequence[float], analysis: Analysis, index: int, positions: int, settings: Settings
) -> ChangePoint | None:
    """A step before run ``index``, a run other groups' change points named, judged with
    Bonferroni over the ``positions`` so named near it instead of the whole series: the run
    was chosen by other groups' data, not this series'. None when not significant."""
    return _judged_at(values, analysis, index, settings, positions)


def declared_at(
    values: Sequence[float], analysis: Analysis, index: int, positions: int, settings: Settings
) -> ChangePoint | None:
    """A step before run ``index``, the run at which the group's declared inputs changed (a
    commit to its code or data), judged with Bonferroni over the ``positions`` the commits
    named (``check._declared``) instead of over the whole series: the run was named before the
    values were looked at, so no search chose it. None when not significant."""
    return _judged_at(values, analysis, index, settings, positions)


def _judged_at(
    values: Sequence[float],
    analysis: Analysis,
    index: int,
    settings: Settings,
    positions: int | None,
) -> ChangePoint | None:
    kept, y, bounds = _segment_of(values, analysis, index)
    if bounds is None or analysis.noise is None:
        return None
    found = judge(y, bounds, analysis.noise, analysis.scale, settings, positions, analysis.df)
    if found is None:
        return None
    found = replace(found, index=int(kept[found.index]))
    scaled = _scaled(values)
    return None if scaled is None or _unconfirmed(scaled[0], found) else found


def _segment_of(
    values: Sequence[float], analysis: Analysis, index: int
) -> tuple[np.ndarray, np.ndarray, tuple[int, int, int] | None]:
    """(kept run indices, their scaled values, (start, cut, end) in kept positions) for a cut
    before run ``index`` between the analysis's change points around it."""
    kept = np.setdiff1d(np.arange(len(values)), analysis.outliers)
    scaled = _scaled([values[i] for i in kept])
    if scaled is None or index not in kept:
        return kept, np.zeros(0), None
    y = scaled[0]
    cut = int(np.searchsorted(kept, index))
    cuts = sorted(int(np.searchsorted(kept, p.index)) for p in analysis.change_points)
    start = max([c for c in cuts if c < cut], default=0)
    end = min([c for c in cuts if c > cut], default=len(y))
    if not start < cut < end:
        return kept, y, None
    return kept, y, (start, cut, end)


MIN_GROUPS_FOR_RUN_FACTOR = 4


def rank_cusum(values: Sequence[float]) -> float:
    """How much a series looks like it stepped, whatever its noise: the largest standardized
    rank sum of the runs before a split over every split (Pettitt's statistic, standardized:
    about N(0, 1) at each split for a series without a change)."""
    ranks = np.argsort(np.argsort(np.asarray(values, dtype=float))) + 1.0
    n = ranks.size
    if n < 2:
        return 0.0
    k = np.arange(1, n)
    excess = np.cumsum(ranks)[:-1] - k * (n + 1) / 2
    return float(np.max(np.abs(excess) / np.sqrt(k * (n - k) * (n + 1) / 12)))


def run_factors(series: Sequence[Sequence[tuple[str, float, float]]]) -> dict[str, float]:
    """Per run, the factor the host applied to every group alike (``run id -> factor``), from
    each group's ``(run, value, level)``: a run's factor is the median over its groups of
    value / level (when it has at least ``MIN_GROUPS_FOR_RUN_FACTOR`` groups; else 1).

    A busy hour, a slower machine or another CPU frequency moves every group of a run together;
    a code change moves the groups it touches. The level is the group's own (its median, or
    once its steps are known, the levels they fit: then a change in a third of the groups does
    not move the factor, and with it every other group). Dividing a group's series by the
    factors leaves what is its own: the planted change of one implementation stays, the host's
    run-to-run shifts go."""
    ratios: dict[str, list[float]] = {}
    for points in series:
        if len(points) < MIN_RUNS:
            continue
        for run, value, level in points:
            if level > 0:
                ratios.setdefault(run, []).append(value / level)
    return {
        run: float(np.median(found)) if len(found) >= MIN_GROUPS_FOR_RUN_FACTOR else 1.0
        for run, found in ratios.items()
    }
