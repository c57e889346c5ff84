"""What ``history show`` and ``history check`` compute, apart from how the CLI prints it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from metewand.history import text
from metewand.history.check import (
    Settings,
    SuiteCheck,
    check_suite,
    default_metric,
    exit_status,
    suites_in,
)
from metewand.history.series import Filters, Point, Series, last, read_series
from metewand.history.store import reading


@dataclass
class Block:
    suite: str
    metric: str
    series: list[tuple[Series, list[Point]]] = field(default_factory=list)


@dataclass
class ShowData:
    metric: str | None
    by: str
    blocks: list[Block]

    def as_json(self) -> dict[str, Any]:
        return {
            "schema": "metewand_history_show/1",
            "by": self.by,
            "suites": [
                {
                    "suite": b.suite,
                    "metric": b.metric,
                    "groups": [text.series_json(s, points) for s, points in b.series],
                }
                for b in self.blocks
            ],
        }


def _suites(con: Any, filters: Filters) -> list[str]:
    return [filters.suite] if filters.suite else suites_in(con)


def show_data(
    path: Path, metric: str | None, filters: Filters, by: str, count: int | None
) -> ShowData:
    blocks = []
    with reading(path) as con:
        for suite in _suites(con, filters):
            chosen = metric or default_metric(con, suite)
            series = read_series(con, chosen, replace(filters, suite=suite), by)
            block = Block(suite, chosen, [(s, last(s.points, count)) for s in series])
            if block.series:
                blocks.append(block)
    return ShowData(metric, by, blocks)


def run_check(
    path: Path, metric: str | None, filters: Filters, settings: Settings
) -> list[SuiteCheck]:
    with reading(path) as con:
        return [check_suite(con, s, metric, filters, settings) for s in _suites(con, filters)]


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
                "groups": r.groups,
                "groups_analysed": r.analysed,
                "groups_too_short": r.too_short,
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
    echo: Callable[..., None],
) -> int:
    """Print the check and return the exit status (0 unless ``fail_on_change``)."""
    from metewand import canonical

    status = exit_status(results) if fail_on_change else 0
    if as_json:
        echo(canonical.dumps_str(check_json(results, settings, status)))
        return status
    for r in results:
        newest = r.newest
        where = f"newest run {newest.run_id} (commit {text.short_commit(newest.commit)})" \
            if newest else "no runs"  # fmt: skip
        echo(f"{r.suite}: {r.metric}, {r.analysed} of {r.groups} groups analysed, {where}")
        if r.too_short:
            echo(f"  {r.too_short} groups have fewer than {settings.min_runs} runs "
                 f"(the longest has {r.longest}): not judged")  # fmt: skip
        for change in r.changes:
            mark = "NEW " if change["recent"] else ""
            echo(f"  {mark}change: {text.change_line(change, r.metric)}")
        if not r.changes and r.analysed:
            echo("  no significant change point")
    if status == 1:
        starts = [c for r in results for c in r.starts_now]
        echo(f"check failed: the newest run starts {len(starts)} significant step(s)", err=True)
    elif status == 2:
        longest = max((r.longest for r in results), default=0)
        echo(f"check cannot judge: the longest group has {longest} runs, a check needs "
             f"{settings.min_runs} (run {settings.min_runs - longest} more)", err=True)  # fmt: skip
    return status
