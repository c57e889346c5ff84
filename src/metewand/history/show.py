"""What ``history show`` computes, apart from how the CLI prints it (no numpy: a show over
1,000 runs x 100 groups is one DuckDB query; the terminal table fetches the newest points only,
and ``--json`` has DuckDB write each group's points)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from metewand.history.series import (
    Filters,
    Point,
    Series,
    default_metric,
    read_series,
    read_series_json,
    suites_in,
)
from metewand.history.store import reading
from metewand.history.text import SPARK_WIDTH


@dataclass
class Block:
    suite: str
    metric: str
    series: list[tuple[Series, list[Point]]] = field(default_factory=list)
    json_points: list[tuple[Series, str]] = field(default_factory=list)


@dataclass
class ShowData:
    metric: str | None
    by: str
    blocks: list[Block]

    def json_text(self) -> str:
        """The show as JSON, each group's points spliced in as DuckDB wrote them (joined, not
        re-parsed: 100,000 points are ~30 MB of text)."""
        suites = []
        for block in self.blocks:
            groups = []
            for series, points in block.json_points:
                head = json.dumps(
                    {
                        "suite": series.suite,
                        "task": series.task,
                        "subject": series.subject,
                        "driver": series.driver,
                    }
                )
                groups.append(f'{head[:-1]}, "points": {points}}}')
            suite = json.dumps({"suite": block.suite, "metric": block.metric})
            suites.append(f'{suite[:-1]}, "groups": [{", ".join(groups)}]}}')
        head = json.dumps({"schema": "metewand_history_show/1", "by": self.by})
        return f'{head[:-1]}, "suites": [{", ".join(suites)}]}}'


def show_data(
    path: Path, metric: str | None, filters: Filters, by: str, count: int | None, fmt: str = "text"
) -> ShowData:
    """Per suite, its metric's groups: the newest ``count`` points (the terminal table: the
    newest ``SPARK_WIDTH`` when no count is given; every point for JSON and HTML)."""
    blocks = []
    with reading(path) as con:
        for suite in [filters.suite] if filters.suite else suites_in(con):
            chosen = metric or default_metric(con, suite)
            one = replace(filters, suite=suite)
            if fmt == "json":
                block = Block(
                    suite, chosen, json_points=read_series_json(con, chosen, one, by, count)
                )
            else:
                last = count or (SPARK_WIDTH if fmt == "text" else None)
                series = read_series(con, chosen, one, by, last)
                block = Block(suite, chosen, [(s, s.points) for s in series])
            if block.series or block.json_points:
                blocks.append(block)
    return ShowData(metric, by, blocks)
