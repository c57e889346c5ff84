"""``history check``: the change points of every group, and whether the newest run starts one.

For CI: after a run has added itself, ``check --fail-on-change`` exits 1 when the newest run
(or one of the newest ``recent`` runs) is the first run after a significant step beyond the
group's historical noise, 0 otherwise, and 2 when no group has enough runs to say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from metewand.history import changepoints
from metewand.history.series import Filters, Point, Series, read_series

# The metric a history question defaults to, per suite: CPU first (the figure a busy host
# disturbs least; wall time is what the pollution gate warns about), then what every row has.
DEFAULT_METRICS = {
    "compute": ("cpu_time_ns", "timed_wall_time_ns"),
    "browser": ("phase.total.cpu_ns", "cpu_total_ms", "duration_ms"),
}
DEFAULT_MIN_RUNS = 6
RUN_WIDE = ("(every group)", "(run-wide factor)")


@dataclass(frozen=True)
class Settings:
    alpha: float = changepoints.DEFAULT_ALPHA
    min_step: float = changepoints.DEFAULT_MIN_STEP
    noise_multiple: float = changepoints.DEFAULT_NOISE_MULTIPLE
    recent: int = 1
    min_runs: int = DEFAULT_MIN_RUNS
    run_factor: bool = True  # divide out what the host did to every group of a run alike


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

    @property
    def starts_now(self) -> list[dict[str, Any]]:
        return [c for c in self.changes if c["recent"]]


def suites_in(con: Any) -> list[str]:
    return [r[0] for r in con.execute("SELECT DISTINCT suite FROM runs ORDER BY 1").fetchall()]


def default_metric(con: Any, suite: str) -> str:
    """The first of the suite's preferred metrics the store has counted values of."""
    for metric in DEFAULT_METRICS.get(suite, ()):
        found = con.execute(
            "SELECT 1 FROM attempt_values a JOIN runs r USING (run_uid) WHERE r.suite = $s "
            "AND a.metric = $m AND a.counted AND a.value IS NOT NULL LIMIT 1",
            {"s": suite, "m": metric},
        ).fetchone()
        if found:
            return metric
    return DEFAULT_METRICS.get(suite, ("duration_ms",))[-1]


def change_entry(series: Series, points: Sequence[Point], cp: changepoints.ChangePoint,
                 recent: bool) -> dict[str, Any]:  # fmt: skip
    """One change point as the CLI, JSON and the report show it: its group, the first run
    after it (id, commit, branch, start), the run before it, the step with its CI, the p-value."""
    after, before = points[cp.index], points[cp.index - 1]
    return {
        "task": series.task,
        "subject": series.subject,
        "driver": series.driver,
        "run_id": after.run_id,
        "commit": after.commit,
        "branch": after.branch,
        "started_at": after.started_at,
        "position": cp.index + 1,
        "runs_before": cp.before,
        "runs_after": cp.after,
        "step": cp.step,
        "step_ci95": list(cp.step_ci),
        "p_value": cp.p_value,
        "historical_noise": cp.noise,
        "base_run": {"run_id": before.run_id, "run_dir": before.run_dir, "commit": before.commit},
        "new_run": {"run_id": after.run_id, "run_dir": after.run_dir, "commit": after.commit},
        "recent": recent,
    }


def analyse_series(
    series: Series, settings: Settings, factors: dict[str, float] | None = None
) -> changepoints.Analysis:
    """The change points of one group, its values divided by the runs' factors when given."""
    factors = factors or {}
    values = [p.median / factors.get(p.run_uid, 1.0) for p in series.points]
    return changepoints.analyse(values, settings.alpha, settings.min_step, settings.noise_multiple)


def check_suite(
    con: Any, suite: str, metric: str | None, filters: Filters, settings: Settings
) -> SuiteCheck:
    metric = metric or default_metric(con, suite)
    all_series = read_series(con, metric, Filters(**{**filters.__dict__, "suite": suite}))
    newest = max(
        (s.points[-1] for s in all_series if s.points), key=lambda p: p.started_at, default=None
    )
    factors = suite_factors(all_series) if settings.run_factor else {}
    if factors:
        all_series = [*all_series, factor_series(suite, all_series, factors)]
    result = SuiteCheck(suite, metric, newest, groups=len(all_series))
    for series in all_series:
        points = series.points
        result.longest = max(result.longest, len(points))
        if len(points) < settings.min_runs:
            result.too_short += 1
            continue
        result.analysed += 1
        own = factors if series.task != RUN_WIDE[0] else None
        analysis = analyse_series(series, settings, own)
        for cp in analysis.change_points:
            recent = cp.index >= len(points) - settings.recent and (
                newest is not None and points[-1].run_uid == newest.run_uid
            )
            result.changes.append(change_entry(series, points, cp, recent))
    return result


def suite_factors(all_series: Sequence[Series]) -> dict[str, float]:
    return changepoints.run_factors([[(p.run_uid, p.median) for p in s.points] for s in all_series])


def factor_series(suite: str, all_series: Sequence[Series], factors: dict[str, float]) -> Series:
    """The runs' factors as a group of their own: a change shared by most groups shows here."""
    newest = {p.run_uid: p for s in all_series for p in s.points}
    points = sorted(newest.values(), key=lambda p: p.started_at)
    out = Series(suite, RUN_WIDE[0], RUN_WIDE[1], "")
    for p in points:
        f = factors.get(p.run_uid, 1.0)
        out.points.append(replace(p, median=f, ci_low=f, ci_high=f, n=1, ci_level=0.0))
    return out


def exit_status(results: Sequence[SuiteCheck]) -> int:
    """1: a step starts at a recent run; 2: no group has enough runs; 0: otherwise."""
    if any(r.starts_now for r in results):
        return 1
    if not any(r.analysed for r in results):
        return 2
    return 0
