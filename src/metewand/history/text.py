"""Terminal and JSON forms of the history's answers (list, show, check)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from metewand.history.series import Point, Series

SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float]) -> str:
    """One block character per value, scaled between the series' own min and max."""
    if not values:
        return ""
    low, high = min(values), max(values)
    span = high - low
    if span <= 0 or not math.isfinite(span):
        return SPARKS[3] * len(values)
    top = len(SPARKS) - 1
    return "".join(SPARKS[round((v - low) / span * top)] for v in values)


def unit_of(metric: str) -> tuple[str, float]:
    """How a metric reads best: ns as ms, bytes as MiB, the rest as stored."""
    if metric.endswith("_ns"):
        return "ms", 1e-6
    if metric.endswith("_bytes"):
        return "MiB", 1 / 2**20
    if metric.endswith("_ms"):
        return "ms", 1.0
    return "", 1.0


def figure(value: float | None, metric: str) -> str:
    if value is None:
        return "unavailable"
    unit, scale = unit_of(metric)
    return f"{value * scale:.4g}{' ' + unit if unit else ''}"


def short_commit(commit: str | None) -> str:
    return commit[:10] if commit else "-"


def point_json(point: Point) -> dict[str, Any]:
    return {
        "run_id": point.run_id,
        "started_at": point.started_at,
        "commit": point.commit,
        "branch": point.branch,
        "dirty": point.dirty,
        "polluted": point.polluted,
        "runs": point.runs,
        "n": point.n,
        "median": point.median,
        "ci": [point.ci_low, point.ci_high],
        "ci_level": round(point.ci_level, 4),
    }


def series_json(series: Series, points: Sequence[Point]) -> dict[str, Any]:
    return {
        "suite": series.suite,
        "task": series.task,
        "subject": series.subject,
        "driver": series.driver,
        "points": [point_json(p) for p in points],
    }


def show_rows(series: Sequence[tuple[Series, list[Point]]], metric: str) -> list[list[str]]:
    """Per group: runs, first and last median, last CI, and the sparkline (polluted runs red)."""
    rows = []
    for one, points in series:
        if not points:
            continue
        last = points[-1]
        spark = "".join(
            f"[red]{ch}[/red]" if p.polluted else ch
            for ch, p in zip(sparkline([p.median for p in points]), points, strict=True)
        )
        rows.append(
            [
                one.task,
                one.subject + (f" [{one.driver}]" if one.driver else ""),
                str(len(points)),
                figure(points[0].median, metric),
                figure(last.median, metric),
                f"{figure(last.ci_low, metric)} – {figure(last.ci_high, metric)} "
                f"({last.ci_level:.0%}, n={last.n})",
                short_commit(last.commit),
                spark,
            ]
        )
    return rows


def change_line(change: dict[str, Any], metric: str) -> str:
    low, high = change["step_ci95"]
    group = f"{change['task']} x {change['subject']}"
    if change["driver"]:
        group += f" [{change['driver']}]"
    return (
        f"{group}: {metric} {change['step']:+.1%} (95% CI {low:+.1%} to {high:+.1%}, "
        f"p={change['p_value']:.2g}, noise {change['historical_noise']:.1%}) from run "
        f"{change['run_id']} (run {change['position']} of this group, commit "
        f"{short_commit(change['commit'])})"
    )
