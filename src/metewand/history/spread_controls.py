"""A group's between-run spread with each run's host drift taken out, as ``compare`` takes it out.

``compare`` reads each implementation of two runs of one host against the drift that the other
unchanged implementations read (``compare.controls``): NEW's values are divided by the median
ratio of their groups. Whatever moved every process of a run alike is gone from a group
judged so. The history's plain spread (``history.spread``) still holds that shared drift, so a
group read against its controls and given the plain spread pays for the drift twice, once as
removed and once as noise, and a real change must be larger than it needs to be.

So each earlier run's level of a group is read the same way: less the drift of that run that
the groups of the *other* implementations (subjects) read. A run's drift for an implementation
is the median, over the other implementations' groups of the same metric present in that run,
of their levels centred on their own mean over the runs used. The spread is the sample
variance of what is left, over the runs that had enough control groups.

What this assumes, and how it errs:
- in the history, an implementation's code may change from run to run (that is what a history
  follows), unlike the unchanged controls of one comparison. A changed control moves a run's
  median only as far as it is the middle of the groups; what it moves stays in the spread,
  which errs towards a wider interval;
- the left-over spread still holds the noise of each run's drift estimate, which ``compare``
  also adds as the controls' standard error: a second small widening, again on the safe side.
- the probe (the speed-adjusted metric's prepare phase) is centred and read against its
  controls' median alike, so the adjusted spread (``compare.speed_sides``) is of the adjusted
  metric less its drift, as ``compare`` reads it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

GroupKey = tuple[str, str, str]  # metric, task, subject
# a run's own sampling share of its mean's moments: var/n of the log values, of the log probes,
# and their covariance/n
Within = tuple[float, float, float]
# the between-run component is floored at this share of the raw variance: on 3-9 runs the
# difference of two estimates often falls below zero, and a spread of zero would claim the
# group never moves between runs
FLOOR = 0.05
# per run: the run's mean log value and mean log probe (None when not every attempt had one)
Levels = dict[str, tuple[float, float | None]]


def centred(series: Mapping[GroupKey, Levels]) -> dict[GroupKey, Levels]:
    """Each group's levels (and probes) less their own mean over the runs that have them."""
    out: dict[GroupKey, Levels] = {}
    for key, runs in series.items():
        level_mean = statistics.fmean(level for level, _ in runs.values())
        probes = [probe for _, probe in runs.values() if probe is not None]
        probe_mean = statistics.fmean(probes) if probes else 0.0
        out[key] = {
            run: (level - level_mean, None if probe is None else probe - probe_mean)
            for run, (level, probe) in runs.items()
        }
    return out


def residuals(
    key: GroupKey, centred_series: Mapping[GroupKey, Levels], min_controls: int
) -> Levels:
    """The group's centred levels, each run's less the median of the other implementations'
    groups of the same metric in that run; runs with fewer than ``min_controls`` such groups
    are left out. A probe is left as None where a control group lacked it."""
    metric, _, subject = key
    controls = [runs for (m, _, s), runs in centred_series.items() if m == metric and s != subject]
    out: Levels = {}
    for run, (level, probe) in centred_series[key].items():
        present = [runs[run] for runs in controls if run in runs]
        if len(present) < min_controls:
            continue
        drift = statistics.median(value for value, _ in present)
        probe_drifts = [p for _, p in present if p is not None]
        probe_left = None
        if probe is not None and len(probe_drifts) == len(present):
            probe_left = probe - statistics.median(probe_drifts)
        out[run] = (level - drift, probe_left)
    return out


def moments(
    levels: Sequence[tuple[float, float | None]],
) -> tuple[float, float | None, float | None]:
    """Sample variance of the levels; of the probes and their covariance when every run has one."""
    values = [level for level, _ in levels]
    variance = statistics.variance(values)
    probes = [probe for _, probe in levels]
    if any(probe is None for probe in probes):
        return variance, None, None
    known = [float(probe) for probe in probes if probe is not None]
    return variance, statistics.variance(known), statistics.covariance(values, known)


def between(
    moments: tuple[float, float | None, float | None], shares: Sequence[Within]
) -> tuple[float, float | None, float | None]:
    """The between-run component of ``moments`` (variance, probe variance, covariance of run
    means): each less the mean of the runs' own sampling shares, the variances floored at
    ``FLOOR`` of their raw value."""
    variance, probe_variance, covariance = moments
    count = len(shares)
    level = sum(w for w, _, _ in shares) / count
    out_variance = max(variance - level, FLOOR * variance)
    if probe_variance is None or covariance is None:
        return out_variance, probe_variance, covariance
    probe = sum(p for _, p, _ in shares) / count
    cross = sum(c for _, _, c in shares) / count
    return out_variance, max(probe_variance - probe, FLOOR * probe_variance), covariance - cross
