"""The change points of a suite's groups (one function, ``detect``, for ``check`` and ``report``)
and ``history check``: whether the newest run starts one.

For CI: after a run has added itself, ``check --fail-on-change`` exits 1 when the newest run
(or one of the newest ``recent`` runs) is the first run after a significant step beyond the
group's historical noise, 0 otherwise, and 2 when no group has enough runs to say (or when the
metric is a wall time and the newest run's host pollution gate failed).

Each change point says whether the group's declared inputs changed near it (``inputs``): the
store keeps a digest of them per run and group (``ingest``). A step across which they stayed
the same (``unchanged``) is an *environment shift*: the host, the interpreter or metewand moved
that group, no commit to what the benchmark declares did. It is listed and kept in the
report, and it fails the check only with ``count_environment``. ``changed`` and ``unknown``
(a run that did not record them) steps count as before.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metewand.history import changepoints
from metewand.history.inputs import (
    CHANGED,
    REACH,
    UNCHANGED,
    UNKNOWN,
    input_changes,
    inputs_near,
    window,
)
from metewand.history.series import Filters, Point, Series, default_metric, metric_kind
from metewand.history.series import read_series as read_series
from metewand.history.settings import Settings

RUN_WIDE = ("(every group)", "(run-wide factor)")
# degrees of freedom the suite's typical noise is worth as a prior for one group's noise
PRIOR_DF = 4.0


def _tests(settings: Settings) -> changepoints.Settings:
    return changepoints.Settings(settings.alpha, settings.min_step, settings.noise_multiple)


@dataclass
class GroupResult:
    series: Series
    kept: list[int]  # indices (into series.points) of the points analysed
    analysis: changepoints.Analysis | None = None  # None: too few runs to judge
    polluted_aside: int = 0  # wall metric: points of polluted runs left out

    @property
    def points(self) -> list[Point]:
        return [self.series.points[i] for i in self.kept]


@dataclass
class Detection:
    suite: str
    metric: str
    groups: list[GroupResult] = field(default_factory=list)
    run_wide: GroupResult | None = None
    factors: dict[str, float] = field(default_factory=dict)
    typical_noise: float = 0.0


def level(point: Point, statistic: str) -> float:
    return point.minimum if statistic == "floor" else point.median


def _kept(series: Series, metric: str, settings: Settings) -> list[int]:
    """The points a group is judged on: all, but for a wall time without ``allow_polluted``
    the runs whose host pollution gate failed are left out (their wall times say more about
    the host than about the code; CPU and memory stay)."""
    if metric_kind(metric) != "wall" or settings.allow_polluted:
        return list(range(len(series.points)))
    return [i for i, p in enumerate(series.points) if not p.polluted]


def _values(group: GroupResult, statistic: str, factors: dict[str, float]) -> list[float]:
    return [level(p, statistic) / factors.get(p.run_uid, 1.0) for p in group.points]


def _analyse_all(groups: list[GroupResult], factors: dict[str, float], settings: Settings) -> float:
    """Analyse every judged group, its own noise moderated by the suite's typical noise (the
    median of the groups' own); returns that typical noise."""
    own = []
    for g in groups:
        scaled = changepoints._scaled(_values(g, settings.statistic, factors))
        if scaled is not None:
            own.append(changepoints.historical_noise(scaled[0]))
    typical = float(np.median(own)) if own else math.nan
    prior = changepoints.Prior(typical, PRIOR_DF)
    for g in groups:
        g.analysis = changepoints.analyse(
            _values(g, settings.statistic, factors), _tests(settings), prior
        )
    return typical


STATIONARY_SHARE = 2 / 3  # of the groups without a known step, the run factor reads these


def _factors(groups: list[GroupResult], settings: Settings, fitted: bool) -> dict[str, float]:
    """The run factors: per run, the median over groups of each group's value against its own
    level (its median; with ``fitted``, the levels its change points fit, when it has any).
    A code change moves a minority of the groups, and a step in a third of them would move the
    median, and with it every other group, by a few percent: so of the groups without a known
    step, the factor reads only the most stationary two thirds (the smallest rank-CUSUM
    against a first factor from every group)."""
    values = {id(g): [level(p, settings.statistic) for p in g.points] for g in groups}

    def factors_of(chosen: list[GroupResult]) -> dict[str, float]:
        series = []
        for g in chosen:
            mine = values[id(g)]
            found = fitted and g.analysis is not None and g.analysis.change_points
            levels = (
                g.analysis.levels(mine)
                if found and g.analysis
                else [float(np.median(mine))] * len(mine)
            )
            series.append(list(zip((p.run_uid for p in g.points), mine, levels, strict=True)))
        return changepoints.run_factors(series)

    first = factors_of(groups)
    stepped = [g for g in groups if fitted and g.analysis and g.analysis.change_points]
    others = [g for g in groups if g not in stepped]

    def unrest(g: GroupResult) -> float:
        return changepoints.rank_cusum(
            [v / first.get(p.run_uid, 1.0) for v, p in zip(values[id(g)], g.points, strict=True)]
        )

    calm = sorted(others, key=unrest)[
        : max(changepoints.MIN_GROUPS_FOR_RUN_FACTOR, math.ceil(len(others) * STATIONARY_SHARE))
    ]
    return factors_of(stepped + calm)


def detect(all_series: Sequence[Series], suite: str, metric: str, settings: Settings) -> Detection:
    """Every group's change points: each group searched on its own, then asked again near the
    runs other groups named (``_shared``), the changes several groups share placed together
    (``_align``), and each group asked at the runs where its declared inputs changed
    (``_declared``). With ``run_factor``, what the host did to every group of a run alike is
    divided out first, in two passes (``_factors``; the second knows the first's steps); the
    factors are then analysed as a group of their own."""
    result = Detection(suite, metric)
    for series in all_series:
        result.groups.append(GroupResult(series, _kept(series, metric, settings)))
        result.groups[-1].polluted_aside = len(series.points) - len(result.groups[-1].kept)
    judged = [g for g in result.groups if len(g.kept) >= settings.min_runs]
    if not judged:
        return result
    for fitted in (False, True) if settings.run_factor else (False,):
        result.factors = _factors(judged, settings, fitted) if settings.run_factor else {}
        result.typical_noise = _analyse_all(judged, result.factors, settings)
        _shared(judged, result.factors, settings)
        _align(judged, result.factors, settings)
        _declared(judged, result.factors, settings)
    if settings.run_factor:
        result.run_wide = _run_wide(suite, judged, result.factors, settings)
    return result


# runs: change points of different groups this close may be one change (``inputs.REACH``)
ALIGN_REACH = REACH


def _align(groups: list[GroupResult], factors: dict[str, float], settings: Settings) -> None:
    """Change points of several groups within ``ALIGN_REACH`` runs of each other, all in the
    same direction, are taken as one change (a commit moves every group it touches at the
    same run) and placed where their summed least-squares gain is largest: one group's noise
    can pull its own estimate a run off, five groups' together rarely. A group keeps its
    change at the common run only when it is still significant there."""
    order = sorted({(p.started_at, p.run_uid) for g in groups for p in g.points})
    position = {uid: i for i, (_, uid) in enumerate(order)}

    def run_of(item: tuple[GroupResult, changepoints.ChangePoint]) -> int:
        return position[item[0].points[item[1].index].run_uid]

    pending = sorted(
        ((g, cp) for g in groups if g.analysis for cp in g.analysis.change_points), key=run_of
    )
    while pending:
        first = pending[0]
        cluster = [
            item
            for item in pending
            if run_of(item) - run_of(first) <= 2 * ALIGN_REACH
            and (item[1].step > 0) == (first[1].step > 0)
        ]
        pending = [item for item in pending if item not in cluster]
        if len({id(g) for g, _ in cluster}) > 1:
            runs = [run_of(item) for item in cluster]
            choices = range(
                max(1, min(runs) - ALIGN_REACH), min(len(order) - 1, max(runs) + ALIGN_REACH) + 1
            )
            _place(cluster, [order[i][1] for i in choices], factors, settings)


def _place(
    cluster: list[tuple[GroupResult, changepoints.ChangePoint]],
    choices: list[str],
    factors: dict[str, float],
    settings: Settings,
) -> None:
    """Move each change of ``cluster`` to the run (of ``choices``) with the largest summed
    gain, where it stays significant."""

    def score(run_uid: str) -> float:
        total = 0.0
        for g, cp in cluster:
            index = _index_of(g, run_uid)
            if index is None or g.analysis is None:
                return -1.0
            others = changepoints.Analysis(
                [p for p in g.analysis.change_points if p != cp],
                g.analysis.outliers,
                g.analysis.noise,
                g.analysis.own_noise,
                g.analysis.scale,
            )
            total += (
                changepoints.gain(_values(g, settings.statistic, factors), others, index) or 0.0
            )
        return total

    best = max(choices, key=score)
    for g, cp in cluster:
        index = _index_of(g, best)
        if g.analysis is None or index is None or index == cp.index:
            continue
        new = changepoints.moved(
            _values(g, settings.statistic, factors), g.analysis, cp, index, _tests(settings)
        )
        if new is not None:
            g.analysis.change_points = sorted(
                [p for p in g.analysis.change_points if p != cp] + [new], key=lambda p: p.index
            )


def _shared(groups: list[GroupResult], factors: dict[str, float], settings: Settings) -> None:
    """Every group asked again at each run where some group's change point is: a commit that
    moved one group may have moved others by less than a search over every position can tell.
    At a run other groups named, the test corrects for the runs so named near it (usually one),
    not for the whole series (the other groups' noise chose the run, not this group's), so a
    15% step the search misses at 4% noise is found there; such a step shows as shared."""
    order = sorted({(p.started_at, p.run_uid) for g in groups for p in g.points})
    position = {uid: i for i, (_, uid) in enumerate(order)}
    named = sorted(
        {
            position[g.points[cp.index].run_uid]
            for g in groups
            if g.analysis
            for cp in g.analysis.change_points
        }
    )
    for g in groups:
        if g.analysis is None:
            continue
        for run in named:
            own = [position[g.points[cp.index].run_uid] for cp in g.analysis.change_points]
            if any(abs(run - at) <= 2 * ALIGN_REACH for at in own):
                continue
            index = _index_of(g, order[run][1])
            if index is None:
                continue
            near = sum(1 for other in named if abs(other - run) <= ALIGN_REACH)
            found = changepoints.shared_at(
                _values(g, settings.statistic, factors), g.analysis, index, near, _tests(settings)
            )
            if found is not None:
                g.analysis.change_points = sorted(
                    [*g.analysis.change_points, found], key=lambda p: p.index
                )


def _declared(groups: list[GroupResult], factors: dict[str, float], settings: Settings) -> None:
    """Every group asked at each run where its declared inputs changed: a change point not on
    such a run is moved onto the nearest one within ``ALIGN_REACH`` runs when it stays
    significant there (a position estimate can be a run or two off; the commit cannot), and
    such a run without one near is tested on its own (``changepoints.declared_at``): the commit named the run, the values did not. The test
    is corrected (Bonferroni) for the group's input changes times the groups whose inputs
    changed at that run: a commit that touched every group (a shared file, a new corpus) says
    no more about which of them moved than a search would, so it buys no power there, and the
    false steps it can add stay at about ``alpha`` per such commit, not per group."""
    judged = [g for g in groups if g.analysis is not None]
    changes_of_group = {id(g): input_changes(g.points) for g in judged}
    touched = Counter(g.points[i].run_uid for g in judged for i in changes_of_group[id(g)])
    for g in judged:
        assert g.analysis is not None
        changes = changes_of_group[id(g)]
        values = _values(g, settings.statistic, factors)
        _onto_declared(g.analysis, values, changes, settings)
        for index in changes:  # a declared run without a change point near: tested there
            if any(abs(cp.index - index) <= ALIGN_REACH for cp in g.analysis.change_points):
                continue
            positions = len(changes) * touched[g.points[index].run_uid]
            trial = changepoints.first_runs_restored(g.analysis, index, index)
            found = changepoints.declared_at(values, trial, index, positions, _tests(settings))
            if found is not None:
                g.analysis.change_points = sorted(
                    [*g.analysis.change_points, found], key=lambda p: p.index
                )
                g.analysis.outliers = trial.outliers


def _onto_declared(
    analysis: changepoints.Analysis, values: list[float], changes: list[int], settings: Settings
) -> None:
    """Each change point not on a declared run, moved onto the nearest one within
    ``ALIGN_REACH`` runs when it stays significant there."""
    for cp in list(analysis.change_points):
        near = sorted((abs(i - cp.index), i) for i in changes if abs(i - cp.index) <= ALIGN_REACH)
        if not near or cp.index in changes:
            continue
        target = near[0][1]
        trial = changepoints.first_runs_restored(analysis, target, cp.index)
        found = changepoints.moved(values, trial, cp, target, _tests(settings))
        if found is not None:
            kept = [p for p in analysis.change_points if p != cp]
            analysis.change_points = sorted([*kept, found], key=lambda p: p.index)
            analysis.outliers = trial.outliers


def _index_of(group: GroupResult, run_uid: str) -> int | None:
    """The position of a run in the group's analysed points (None: not among them)."""
    for i, p in enumerate(group.points):
        if p.run_uid == run_uid:
            return i
    return None


def _run_wide(
    suite: str, groups: list[GroupResult], factors: dict[str, float], settings: Settings
) -> GroupResult:
    """The runs' factors as a group of their own: a change shared by most groups shows here
    (judged by its own noise: the host's, which the groups' is not)."""
    newest = {p.run_uid: p for g in groups for p in g.points}
    points = sorted(newest.values(), key=lambda p: p.started_at)
    series = Series(suite, RUN_WIDE[0], RUN_WIDE[1], "")
    for p in points:
        f = factors.get(p.run_uid, 1.0)
        series.points.append(
            p._replace(median=f, ci_low=f, ci_high=f, n=1, ci_level=0.0, minimum=f)
        )
    out = GroupResult(series, list(range(len(points))))
    values = [p.median for p in series.points]
    if len(values) >= settings.min_runs:
        out.analysis = changepoints.analyse(values, _tests(settings))
    return out


def change_entry(group: GroupResult, cp: changepoints.ChangePoint, recent: bool) -> dict[str, Any]:
    """One change point as the CLI, JSON and the report show it: its group, the first run
    after it (id, commit, branch, start), the run before it, the step with its CI, the p-value,
    and whether the host pollution gate failed on either run."""
    series = group.series
    position = group.kept[cp.index]
    after, before = series.points[position], series.points[group.kept[cp.index - 1]]
    return {
        "task": series.task,
        "subject": series.subject,
        "driver": series.driver,
        "run_id": after.run_id,
        "commit": after.commit,
        "branch": after.branch,
        "started_at": after.started_at,
        "position": position + 1,
        "runs_before": cp.before,
        "runs_after": cp.after,
        "step": cp.step,
        "step_ci95": list(cp.step_ci),
        "p_value": cp.p_value,
        "historical_noise": cp.noise,
        "shared": cp.shared,
        "base_run": {
            "run_id": before.run_id,
            "run_dir": before.run_dir,
            "commit": before.commit,
            "polluted": before.polluted,
        },
        "new_run": {
            "run_id": after.run_id,
            "run_dir": after.run_dir,
            "commit": after.commit,
            "polluted": after.polluted,
        },
        "recent": recent,
    }


def _run_wide_inputs(detection: Detection, group: GroupResult, index: int) -> str:
    """A run-wide step is the environment's when no judged group's inputs changed near it."""
    runs = {p.run_uid for p in window(group.points, index)}
    verdicts = [
        inputs_near([p for p in g.points if p.run_uid in runs])[0]
        for g in detection.groups
        if g.analysis is not None
    ]
    if not verdicts or UNKNOWN in verdicts:
        return UNKNOWN
    return CHANGED if CHANGED in verdicts else UNCHANGED


def attribute(
    detection: Detection, group: GroupResult, cp: changepoints.ChangePoint, entry: dict[str, Any]
) -> None:
    """Add to a change entry whether its group's declared inputs changed near it."""
    moved: Point | None = None
    if group is detection.run_wide:
        verdict = _run_wide_inputs(detection, group, cp.index)
    else:
        verdict, moved = inputs_near(window(group.points, cp.index))
    entry["inputs"] = verdict
    entry["inputs_changed_in"] = (
        None if moved is None else {"run_id": moved.run_id, "commit": moved.commit}
    )
    entry["environment_shift"] = verdict == UNCHANGED


def described(
    detection: Detection, group: GroupResult, cp: changepoints.ChangePoint, recent: bool
) -> dict[str, Any]:
    """A change point's entry as ``check`` and ``report`` give it: where, how much, whether a
    host shift, and whether the group's declared inputs changed near it."""
    entry = change_entry(group, cp, recent)
    entry["host_shift"] = group is detection.run_wide and bool(
        entry["base_run"]["polluted"] or entry["new_run"]["polluted"]
    )
    attribute(detection, group, cp, entry)
    return entry


def changes_of(detection: Detection, newest: Point | None, recent: int) -> list[dict[str, Any]]:
    """Every change point of the suite (the run-wide group's last), each marked ``recent``
    when it starts at one of the newest ``recent`` runs of a group whose newest point is the
    suite's newest run. A step of the run-wide factor across a run whose host pollution gate
    failed is a ``host_shift``: every group moved at once on a disturbed host, which the host's
    other tenants explain as well as the code (it is listed, and fails no check)."""
    out = []
    groups = [*detection.groups, *([detection.run_wide] if detection.run_wide else [])]
    for group in groups:
        if group.analysis is None:
            continue
        points = group.points
        for cp in group.analysis.change_points:
            starts_now = (
                cp.index >= len(points) - recent
                and newest is not None
                and (points[-1].run_uid == newest.run_uid)
            )
            out.append(described(detection, group, cp, starts_now))
    return out


@dataclass
class SuiteCheck:
    suite: str
    metric: str
    newest: Point | None
    groups: int = 0
    analysed: int = 0
    changes: list[dict[str, Any]] = field(default_factory=list)
    too_short: int = 0
    longest: int = 0
    typical_noise: float = 0.0
    polluted_newest: bool = False  # a wall metric and the newest run's gate failed
    count_environment: bool = False  # environment shifts fail the check too

    @property
    def starts_now(self) -> list[dict[str, Any]]:
        return [
            c
            for c in self.changes
            if c["recent"]
            and not c["host_shift"]
            and (self.count_environment or not c["environment_shift"])
        ]

    @property
    def environment_now(self) -> list[dict[str, Any]]:
        """Recent environment shifts the check does not count."""
        if self.count_environment:
            return []
        return [c for c in self.changes if c["recent"] and c["environment_shift"]]


def check_suite(
    con: Any, suite: str, metric: str | None, filters: Filters, settings: Settings
) -> SuiteCheck:
    metric = metric or default_metric(con, suite)
    all_series = read_series(con, metric, Filters(**{**filters.__dict__, "suite": suite}))
    newest = max(
        (s.points[-1] for s in all_series if s.points), key=lambda p: p.started_at, default=None
    )
    detection = detect(all_series, suite, metric, settings)
    groups = detection.groups + ([detection.run_wide] if detection.run_wide else [])
    result = SuiteCheck(
        suite,
        metric,
        newest,
        groups=len(groups),
        typical_noise=detection.typical_noise,
        count_environment=settings.count_environment,
    )
    for group in groups:
        result.longest = max(result.longest, len(group.kept))
        if group.analysis is None:
            result.too_short += 1
        else:
            result.analysed += 1
    result.changes = changes_of(detection, newest, settings.recent)
    result.polluted_newest = bool(
        newest is not None
        and newest.polluted
        and metric_kind(metric) == "wall"
        and not settings.allow_polluted
    )
    return result


def exit_status(results: Sequence[SuiteCheck]) -> int:
    """1: a step starts at a recent run; 2: no group has enough runs, or a wall metric whose
    newest run is polluted; 0: otherwise."""
    if any(r.starts_now for r in results):
        return 1
    if not any(r.analysed for r in results) or any(r.polluted_newest for r in results):
        return 2
    return 0


def run_check(
    path: Any, metric: str | None, filters: Filters, settings: Settings
) -> list[SuiteCheck]:
    from metewand.history.series import suites_in
    from metewand.history.store import reading

    with reading(path) as con:
        suites = [filters.suite] if filters.suite else suites_in(con)
        return [check_suite(con, s, metric, filters, settings) for s in suites]


def check_json(results: Sequence[SuiteCheck], settings: Settings, status: int) -> dict[str, Any]:
    return {
        "schema": "metewand_history_check/1",
        "settings": settings.__dict__,
        "exit_status": status,
        "suites": [
            {
                "suite": r.suite,
                "metric": r.metric,
                "newest_run": r.newest.run_id if r.newest else None,
                "newest_commit": r.newest.commit if r.newest else None,
                "newest_polluted": r.newest.polluted if r.newest else None,
                "groups": r.groups,
                "groups_analysed": r.analysed,
                "groups_too_short": r.too_short,
                "typical_noise": r.typical_noise,
                "change_points": r.changes,
            }
            for r in results
        ],
    }


def print_check(
    results: Sequence[SuiteCheck],
    settings: Settings,
    fail_on_change: bool,
    as_json: bool,
    echo: Any,
) -> int:
    """Print the check and return the exit status (0 unless ``fail_on_change``)."""
    import json

    from metewand.history import text

    status = exit_status(results) if fail_on_change else 0
    if as_json:
        echo(json.dumps(check_json(results, settings, status), sort_keys=True))
        return status
    for r in results:
        echo(text.check_header(r, settings))
        for change in r.changes:
            echo(
                f"  {'NEW ' if change['recent'] else ''}change: {text.change_line(change, r.metric)}"
            )
        if not r.changes and r.analysed:
            echo("  no significant change point")
    for line in text.check_verdict(results, settings, status):
        echo(line, err=True)
    return status
