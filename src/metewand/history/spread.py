"""Each group's between-run spread in the run history, for ``compare`` (issue #22, section 2).

A comparison of one run against one run cannot see how much a group's level moves from one run
to the next on this host (the host's load, a new engine process, caches): that variance sits
between runs, and each run shows only its own. The history has seen many runs of the same
groups. For each group and metric this module gives the variance of a run's mean (natural log
of the values) over the earlier runs of the same suite on the same kind of host, with its
degrees of freedom; ``compare`` adds it to each side that has a single run, so a change must
exceed the noise the group showed between runs before (``compare.hierarchy.BetweenRun``).

Which runs count, and why:
- the same suite and the same host fingerprint as the BASE run (another machine's spread says
  nothing about this one's), when BASE's fingerprint is known;
- runs that started before the BASE run, the newest ``MAX_RUNS`` of them: the spread is what
  the history knew before the change being judged, and a step long ago (an earlier change) does
  not inflate it for ever;
- not the compared runs themselves;
- for a wall time, when no compared run's host pollution gate failed, not the runs whose gate
  failed either: a neighbour that doubled a run's wall time says nothing about the noise
  between clean runs, which are what is compared (``history check`` leaves them out of a wall
  time alike). On a work dir of ``benchmarks/compare_false_alarms.py`` whose history held five
  runs beside a CPU burner, they made the wall spread 0.2-0.46 (log sd) and hid a +20% change
  in every group of three comparisons. When a compared run was polluted (its wall-time gate
  is refused unless ``--allow-polluted``), every run counts: that is the noise it carries.
  CPU and other metrics keep every run, as ``history check`` does;
- a group needs ``MIN_RUNS`` such runs, else it gets no spread (the report then says the
  between-run noise could not be estimated for it).

A run's mean is the plain mean of its complete, counted attempts' log values. The variance of
run means holds each run's own sampling share (its attempts' variance over their number), which
the compared sides already carry in their own resampling: added again, it counted that noise
twice and made every CI wider than the runs' noise (``spread_controls.between`` takes it out,
the ANOVA estimator of the between-run component). A spread is then moderated by the other
groups' (``history.spread_moderate``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from metewand import canonical
from metewand.history import spread_controls, spread_moderate
from metewand.history.run_facts import read_manifest, run_facts, run_uid, suite_of

MIN_RUNS = 3
MAX_RUNS = 30


@dataclass(frozen=True)
class Spread:
    """Variance of a run's mean log value, over ``runs`` earlier runs (df = runs - 1); with a
    speed probe, the variance of the run's mean log probe and their covariance, so that
    ``compare`` can take the spread of a speed-adjusted metric (``compare.speed_sides``)."""

    variance: float
    probe_variance: float | None
    covariance: float | None
    runs: int
    # the same, each run's level less the drift its controls read (history.spread_controls)
    controlled: Spread | None = None
    # degrees of freedom after moderation by the other groups (history.spread_moderate);
    # None: not moderated, runs - 1
    df: float | None = None
    # the runs' own sampling shares of the moments above, still in them until
    # ``spread_controls.between`` takes their mean out (empty: taken out, or never there)
    shares: tuple[spread_controls.Within, ...] = ()


@dataclass(frozen=True)
class RunIdentity:
    uid: str
    suite: str
    started_at: str | None
    host_fingerprint: str | None


def identify(run_dir: Path) -> RunIdentity:
    """The history's identity of a run directory (the same ``run_uid`` ``history add`` uses)."""
    manifest = read_manifest(run_dir)
    suite = suite_of(manifest, set())
    facts = run_facts(run_dir, manifest, suite)
    host = json.loads(canonical.dumps_str(facts["host"]))
    return RunIdentity(run_uid(facts, host), suite, facts["started_at"], facts["host_fingerprint"])


SPREAD_SQL = """
WITH eligible AS (
    SELECT run_uid, started_at, pollution_passed FROM runs
    WHERE suite = $suite
      AND NOT list_contains($exclude, run_uid)
      AND ($fingerprint IS NULL OR host_fingerprint = $fingerprint)
      AND ($before IS NULL OR started_at < $before::TIMESTAMPTZ)
), logs AS (
    SELECT v.metric, v.task, v.subject, v.driver, v.run_uid, e.started_at,
           ln(v.value) AS lv, ln(p.value) AS lp
    FROM attempt_values v JOIN eligible e USING (run_uid)
    LEFT JOIN attempt_values p
      ON p.metric = list_extract($probes, list_position($metrics, v.metric))
     AND p.run_uid = v.run_uid AND p.task = v.task
     AND p.subject = v.subject AND p.driver = v.driver AND p.attempt_key = v.attempt_key
     AND p.form = 'complete' AND p.value > 0
    WHERE list_contains($metrics, v.metric) AND v.form = 'complete' AND v.counted
      AND v.value > 0
      AND (NOT list_contains($clean_only, v.metric) OR e.pollution_passed IS NOT FALSE)
), per_run AS (
    SELECT metric, task, subject, driver, run_uid, started_at, avg(lv) AS level,
           avg(lp) AS probe_level, count(lp) > 0 AS probed,
           coalesce(var_samp(lv) / count(lv), 0) AS within,
           coalesce(var_samp(lp) / count(lp), 0) AS probe_within,
           coalesce(covar_samp(lv, lp) / count(lp), 0) AS covariance_within
    FROM logs GROUP BY ALL
), recent AS (
    SELECT *, row_number() OVER (
        PARTITION BY metric, task, subject, driver ORDER BY started_at DESC) AS newest
    FROM per_run
)
SELECT metric, task, subject, driver, run_uid, level,
       CASE WHEN probed THEN probe_level END AS probe_level,
       within, probe_within, covariance_within
FROM recent WHERE newest <= $max_runs
"""


def group_spreads(
    con: Any,
    base: RunIdentity,
    exclude: Iterable[str],
    metrics: Sequence[str],
    probes: Mapping[str, str | None] | None = None,
    min_controls: int | None = None,
    clean_only: Sequence[str] = (),
) -> dict[tuple[str, str, str], Spread]:
    """``{(metric, task, subject): Spread}`` for the groups with enough earlier runs. A task and
    subject measured through several driver paths has no single spread and is left out.
    ``probes``: per metric, a metric of the same attempts (its speed probe) whose run-level
    moments come too, where every run has it (a run's probe level is the mean over its
    attempts that have one: a phase shorter than the scheduler's tick may read 0 CPU, as the
    kernel charges a running task's time to its group only at a tick or a switch).
    ``min_controls``: also give each group's spread read against its controls
    (``history.spread_controls``), where each of ``MIN_RUNS`` runs had that many groups of
    other implementations. ``clean_only``:
    the metrics for which the runs whose host pollution gate failed are left out (a wall time
    of clean compared runs)."""
    found = con.execute(
        SPREAD_SQL,
        {
            "suite": base.suite,
            "exclude": sorted(set(exclude)),
            "fingerprint": base.host_fingerprint,
            "before": base.started_at,
            "metrics": list(metrics),
            "max_runs": MAX_RUNS,
            "probes": [(probes or {}).get(metric) for metric in metrics],
            "clean_only": list(clean_only),
        },
    ).fetchall()
    return spreads_of(*_series(found), min_controls)


def spreads_of(
    series: Mapping[tuple[str, str, str], spread_controls.Levels],
    within: Mapping[tuple[str, str, str], Mapping[str, spread_controls.Within]],
    min_controls: int | None,
) -> dict[tuple[str, str, str], Spread]:
    """The groups' spreads from their run levels and each run's own sampling shares: plain and
    (with ``min_controls``) less each run's drift, moderated by the other groups of the metric,
    then less the runs' own sampling share (the between-run component).

    Moderated before the share is taken out, not after: the prior's model is a scaled
    chi-square per group, which the variance of run means is and the difference of two
    estimates is not. Moderating the differences (floored at ``FLOOR``) pulled the spreads of
    4 runs 7% below the truth on average (simulated, tests/test_history_spread_controls.py),
    and their CIs covered 92.7-92.8% at 2000 resamples."""
    centred = spread_controls.centred(series) if min_controls else {}
    out: dict[tuple[str, str, str], Spread] = {}
    for key, runs in series.items():
        if len(runs) < MIN_RUNS:
            continue
        controlled = None
        if min_controls:
            left = spread_controls.residuals(key, centred, min_controls)
            if len(left) >= MIN_RUNS:
                moments = spread_controls.moments(list(left.values()))
                shares = tuple(within[key][run] for run in left)
                controlled = Spread(*moments, runs=len(left), shares=shares)
        moments = spread_controls.moments(list(runs.values()))
        shares = tuple(within[key].values())
        out[key] = Spread(*moments, runs=len(runs), controlled=controlled, shares=shares)
    return {key: _between(one) for key, one in moderated(out).items()}


def _between(one: Spread) -> Spread:
    """``one`` (and its controlled spread) less the runs' own sampling share."""
    controlled = _between(one.controlled) if one.controlled is not None else None
    if not one.shares:
        return replace(one, controlled=controlled)
    variance, probe_variance, covariance = spread_controls.between(
        (one.variance, one.probe_variance, one.covariance), one.shares
    )
    return replace(
        one,
        variance=variance,
        probe_variance=probe_variance,
        covariance=covariance,
        controlled=controlled,
        shares=(),
    )


def moderated(spreads: dict[tuple[str, str, str], Spread]) -> dict[tuple[str, str, str], Spread]:
    """Each metric's groups' spreads, plain and controlled, moderated by each other's."""
    out = dict(spreads)
    for metric in {key[0] for key in spreads}:
        keys = [key for key in spreads if key[0] == metric]
        plain = _moderate_all([spreads[key] for key in keys])
        controlled = _moderate_all([spreads[key].controlled for key in keys])
        for key, one, other in zip(keys, plain, controlled, strict=True):
            out[key] = replace(one, controlled=other) if one is not None else spreads[key]
    return out


def _moderate_all(spreads: Sequence[Spread | None]) -> list[Spread | None]:
    known = [s for s in spreads if s is not None]
    fitted = spread_moderate.prior([s.variance for s in known], [float(s.runs - 1) for s in known])
    if fitted is None or len(known) < len(spreads):
        return list(spreads)
    weights = [float(s.runs - 1) for s in known]
    probe = _weighted([s.probe_variance for s in known], weights)
    covariance = _weighted([s.covariance for s in known], weights)
    # the prior is itself estimated from these groups: a moderated spread knows no more than
    # all of their degrees of freedom together (limma caps its df.total the same way)
    pooled = sum(weights)
    out: list[Spread | None] = []
    for one in known:
        df = float(one.runs - 1)
        variance, total = spread_moderate.moderated(one.variance, df, fitted.variance, fitted)
        total = min(total, pooled)
        pv = cov = None
        if probe is not None and covariance is not None:
            assert one.probe_variance is not None and one.covariance is not None
            pv = spread_moderate.moderated(one.probe_variance, df, probe, fitted)[0]
            cov = spread_moderate.moderated(one.covariance, df, covariance, fitted)[0]
        out.append(replace(one, variance=variance, probe_variance=pv, covariance=cov, df=total))
    return out


def _weighted(values: Sequence[float | None], weights: Sequence[float]) -> float | None:
    """The weighted mean, None when any value is unknown."""
    if any(v is None for v in values):
        return None
    return sum(float(v) * w for v, w in zip(values, weights, strict=True) if v is not None) / sum(
        weights
    )


def _series(
    rows: Iterable[Sequence[Any]],
) -> tuple[
    dict[tuple[str, str, str], spread_controls.Levels],
    dict[tuple[str, str, str], dict[str, spread_controls.Within]],
]:
    """Per group, each run's level and probe, and the within-run shares of their moments;
    groups seen through several drivers left out."""
    series: dict[tuple[str, str, str], spread_controls.Levels] = {}
    within: dict[tuple[str, str, str], dict[str, spread_controls.Within]] = {}
    drivers: dict[tuple[str, str, str], set[str]] = {}
    for metric, task, subject, driver, uid, level, probe, w, pw, cw in rows:
        key = (metric, task, subject)
        drivers.setdefault(key, set()).add(driver)
        series.setdefault(key, {})[uid] = (float(level), _float(probe))
        within.setdefault(key, {})[uid] = (float(w), float(pw), float(cw))
    kept = {key: runs for key, runs in series.items() if len(drivers[key]) == 1}
    return kept, {key: within[key] for key in kept}


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
