"""A metric read back from the store: per group (task x subject x driver), one point per run
(or per commit), each the median of that run's counted attempts with a confidence interval.

The interval is the distribution-free one for a median: the order statistics x(k) and
x(n-k+1) with the largest k whose binomial coverage 1 - 2 P(Bin(n, 1/2) < k) is still >= 95%.
It needs no resampling (1,000 runs x 100 groups are summarised inside DuckDB in well under a
second), and its true level is kept beside it: with fewer than 6 attempts no pair of order
statistics reaches 95%, so the interval is [min, max] at the level it has (n=2: 50%), and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

CI_LEVEL = 0.95

# The metric a history question defaults to, per suite: CPU first (the figure a busy host
# disturbs least; wall time is what the pollution gate warns about), then what every row has.
DEFAULT_METRICS = {
    "compute": ("cpu_time_ns", "timed_wall_time_ns"),
    "browser": ("phase.total.cpu_ns", "cpu_total_ms", "duration_ms"),
}


@dataclass(frozen=True)
class Filters:
    suite: str | None = None
    task: str | None = None  # a substring of the case (compute) or task (browser) label
    subject: str | None = None  # implementation or engine, exactly
    driver: str | None = None  # a substring of the driver path
    since: str | None = None  # runs started at or after this date/time


class Point(NamedTuple):
    """One point of a series (a NamedTuple: a report builds 100,000 of them)."""

    run_uid: str  # with --by commit: the commit's newest run
    run_id: str
    started_at: str  # ISO 8601, UTC
    commit: str | None
    branch: str | None
    dirty: bool | None
    polluted: bool | None  # True when the run's pollution gate failed (None: not judged)
    run_dir: str | None
    n: int
    median: float
    ci_low: float
    ci_high: float
    ci_level: float
    runs: int = 1  # with --by commit: how many runs the point pools
    minimum: float = math.nan  # the lowest counted value (the run's floor)
    inputs: str | None = (
        None  # the digest of the group's declared inputs in this run (None: unknown)
    )


@dataclass
class Series:
    suite: str
    task: str
    subject: str
    driver: str
    points: list[Point] = field(default_factory=list)
    total: int = 0  # points the group has (``points`` may hold only the newest)
    first_median: float | None = None  # the oldest point's median

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.task, self.subject, self.driver)


def _binomial_cdf(k: int, n: int) -> float:
    """P(Bin(n, 1/2) <= k)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n


def median_ci_ranks(n: int, level: float = CI_LEVEL) -> tuple[int, int, float]:
    """(low rank, high rank, coverage), 1-based, of the order-statistic CI of a median."""
    if n <= 0:
        return 1, 1, 0.0
    best = (1, n, 1 - 2 * 0.5**n) if n > 1 else (1, 1, 0.0)
    for k in range(1, n // 2 + 1):
        coverage = 1 - 2 * _binomial_cdf(k - 1, n) if n <= 1000 else _normal_coverage(k, n)
        if coverage < level:
            break
        best = (k, n - k + 1, coverage)
    return best


def _normal_coverage(k: int, n: int) -> float:
    z = (n / 2 - (k - 0.5)) / math.sqrt(n / 4)
    return math.erf(z / math.sqrt(2))


def _ranks_table(con: Any, max_n: int) -> None:
    con.execute(
        "CREATE OR REPLACE TEMP TABLE mw_ci_ranks (n INTEGER, lo INTEGER, hi INTEGER, level DOUBLE)"
    )
    rows = [[n, *median_ci_ranks(n)] for n in range(1, max_n + 1)]
    con.executemany("INSERT INTO mw_ci_ranks VALUES (?, ?, ?, ?)", rows)


WHERE_CLAUSES = (
    ("suite", "r.suite = $suite"),
    ("task", "contains(lower(a.task), lower($task))"),
    ("subject", "a.subject = $subject"),
    ("driver", "contains(lower(a.driver), lower($driver))"),
    ("since", "r.started_at >= CAST($since AS TIMESTAMPTZ)"),
)


def _where(filters: Filters) -> tuple[str, dict[str, Any]]:
    clauses, params = [], {}
    for name, clause in WHERE_CLAUSES:
        value = getattr(filters, name)
        if value:
            clauses.append(clause)
            params[name] = value
    return "".join(f" AND {c}" for c in clauses), params


# One point per run (``--by date``): each run's values of a group are aggregated before the
# join with ``runs`` (1,000 run lines, not 300,000 value lines, go through the join), and a
# point is one run, so it pools 1 run; ``max`` and ``arg_max`` over that one run give what the
# pooled form below gives (a run without a start has no point run: NULL, as there).
POINTS_BY_RUN = """
SELECT r.suite, a.task, a.subject, a.driver, a.vals, 1 AS runs, r.started_at AS newest,
       CASE WHEN r.started_at IS NOT NULL THEN r.run_uid END AS run_uid,
       coalesce(r.git_commit_time, r.started_at) AS order_time
FROM (SELECT run_uid, task, subject, driver, list_sort(list(value)) AS vals
      FROM attempt_values WHERE metric = $metric AND counted AND value IS NOT NULL
      GROUP BY ALL) a
JOIN runs r USING (run_uid)
WHERE true {where}
"""
# One point per commit (``--by commit``): the commit's runs pooled (a run without a commit alone).
POINTS_BY_COMMIT = """
SELECT r.suite, a.task, a.subject, a.driver,
       coalesce(r.git_commit, 'run:' || r.run_uid) AS point_key,
       list_sort(list(a.value)) AS vals, count(DISTINCT r.run_uid) AS runs,
       max(r.started_at) AS newest, arg_max(r.run_uid, r.started_at) AS run_uid,
       min(coalesce(r.git_commit_time, r.started_at)) AS order_time
FROM attempt_values a JOIN runs r USING (run_uid)
WHERE a.metric = $metric AND a.counted AND a.value IS NOT NULL {where}
GROUP BY ALL
"""
# ``back`` counts points from the newest; the oldest point's median is read off the same
# ordering (one sort, not two): the oldest is the last point with an order time (NULLs sort
# last both ways), else, when no point has one, the last point of all.
POINTS = """
CREATE OR REPLACE TEMP TABLE mw_points AS
SELECT suite, task, subject, driver, vals, runs, newest, run_uid, order_time,
       row_number() OVER newest_first AS back,
       count(*) OVER (PARTITION BY suite, task, subject, driver) AS total,
       coalesce(last_value(CASE WHEN {order} IS NOT NULL THEN median END IGNORE NULLS)
                    OVER whole_group,
                last_value(median) OVER whole_group) AS first_median
FROM (SELECT *, list_median(vals) AS median FROM ({points}))
WINDOW newest_first AS (PARTITION BY suite, task, subject, driver
                        ORDER BY {order} DESC, run_uid DESC),
       whole_group AS (newest_first ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
"""
QUERY = """
SELECT v.suite, v.task, v.subject, v.driver, v.total, v.first_median, v.run_uid, r.run_id,
       strftime(v.newest, '%Y-%m-%dT%H:%M:%S.%gZ'), r.git_commit,
       r.git_branch, r.git_dirty, NOT r.pollution_passed, r.run_dir, len(v.vals),
       list_median(v.vals), v.vals[c.lo], v.vals[c.hi], c.level, v.runs, v.vals[1], g.inputs
FROM mw_points v JOIN runs r USING (run_uid) JOIN mw_ci_ranks c ON c.n = len(v.vals)
LEFT JOIN group_inputs g ON g.run_uid = v.run_uid AND g.task = v.task
     AND g.subject = v.subject AND g.driver = v.driver
WHERE v.back <= $last
ORDER BY v.suite, v.task, v.subject, v.driver, v.back DESC
"""


def _points(con: Any, metric: str, filters: Filters, by: str) -> None:
    """The temp tables ``mw_points`` (a row per group and point) and ``mw_ci_ranks``."""
    where, params = _where(filters)
    order = "order_time" if by == "commit" else "newest"
    points = (
        POINTS_BY_COMMIT.format(where=where)
        if by == "commit"
        else POINTS_BY_RUN.format(where=where)
    )
    con.execute(POINTS.format(points=points, order=order), {"metric": metric, **params})
    max_n = con.execute("SELECT coalesce(max(len(vals)), 1) FROM mw_points").fetchone()[0]
    _ranks_table(con, int(max_n))


def read_series(
    con: Any, metric: str, filters: Filters = Filters(), by: str = "run", last: int | None = None
) -> list[Series]:
    """Every group's points for ``metric``, oldest first (``by``: ``run`` or ``date``, one point
    per run in the order the runs started; ``commit``, one point per commit pooling its runs,
    in the order of the commits' own times); with ``last``, only each group's newest ``last``.
    The medians and their intervals are computed by DuckDB; Python gets one tuple per point."""
    _points(con, metric, filters, by)
    out: list[Series] = []
    for row in con.execute(QUERY, {"last": last or 2**62}).fetchall():
        suite, task, subject, driver, total, first = row[:6]
        if not out or out[-1].group != (task, subject, driver) or out[-1].suite != suite:
            out.append(Series(suite, task, subject, driver, total=total, first_median=first))
        out[-1].points.append(Point._make(row[6:22]))
    con.execute("DROP TABLE IF EXISTS mw_points")
    return out


POINTS_JSON = """
SELECT v.suite, v.task, v.subject, v.driver, to_json(list({
    'run_id': r.run_id, 'started_at': strftime(v.newest, '%Y-%m-%dT%H:%M:%S.%gZ'),
    'commit': r.git_commit, 'branch': r.git_branch, 'dirty': r.git_dirty,
    'polluted': NOT r.pollution_passed, 'runs': v.runs, 'n': len(v.vals),
    'median': list_median(v.vals), 'floor': v.vals[1], 'ci': [v.vals[c.lo], v.vals[c.hi]],
    'ci_level': round(c.level, 4)} ORDER BY v.back DESC))::VARCHAR
FROM mw_points v JOIN runs r USING (run_uid) JOIN mw_ci_ranks c ON c.n = len(v.vals)
WHERE v.back <= $last
GROUP BY ALL ORDER BY ALL
"""


def read_series_json(
    con: Any, metric: str, filters: Filters = Filters(), by: str = "run", last: int | None = None
) -> list[tuple[Series, str]]:
    """``read_series`` for ``show --json``: each group's points as one JSON array DuckDB writes
    (100,000 points, no Python object per point)."""
    _points(con, metric, filters, by)
    rows = con.execute(POINTS_JSON, {"last": last or 2**62}).fetchall()
    con.execute("DROP TABLE IF EXISTS mw_points")
    return [
        (Series(suite, task, subject, driver), points)
        for suite, task, subject, driver, points in rows
    ]


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


def metric_kind(metric: str) -> str:
    """``cpu``, ``wall`` (a time the host's other tenants lengthen: the pollution gate's
    concern) or ``other`` (memory, counts)."""
    if "cpu" in metric:
        return "cpu"
    if metric.endswith(("_ns", "_ms")):
        return "wall"
    return "other"


def known_metrics(con: Any, suite: str | None = None) -> list[str]:
    where = "WHERE r.suite = $suite" if suite else ""
    params = {"suite": suite} if suite else {}
    return [
        r[0]
        for r in con.execute(
            f"SELECT DISTINCT a.metric FROM attempt_values a JOIN runs r USING (run_uid) "
            f"{where} ORDER BY 1",
            params,
        ).fetchall()
    ]
