"""Terminal and JSON forms of the history's answers (list, show, check)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from metewand.history.series import Point, Series

SPARKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 40  # the terminal's trend column shows the newest this many points


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


def show_rows(series: Sequence[tuple[Series, list[Point]]], metric: str) -> list[list[str]]:
    """Per group: runs, first and last median, last CI, and the sparkline (polluted runs red)."""
    rows = []
    for one, points in series:
        if not points:
            continue
        last = points[-1]
        newest = points[-SPARK_WIDTH:]
        spark = "".join(
            f"[red]{ch}[/red]" if p.polluted else ch
            for ch, p in zip(sparkline([p.median for p in newest]), newest, strict=True)
        )
        rows.append(
            [
                one.task,
                one.subject + (f" [{one.driver}]" if one.driver else ""),
                str(one.total or len(points)),
                figure(
                    one.first_median if one.first_median is not None else points[0].median, metric
                ),
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
        f"{short_commit(change['commit'])}){cause_note(change)}"
    )


def cause_note(change: dict[str, Any]) -> str:
    """What the group's declared inputs did around the step."""
    verdict = change.get("inputs")
    if verdict == "unchanged":
        return "; inputs unchanged: an environment shift"
    moved = change.get("inputs_changed_in")
    if verdict == "changed" and moved:
        return f"; inputs changed at run {moved['run_id']} (commit {short_commit(moved['commit'])})"
    if verdict == "changed":
        return "; inputs changed"
    return ""


def check_header(r: Any, settings: Any) -> str:
    newest = r.newest
    where = (
        (
            f"newest run {newest.run_id} (commit {short_commit(newest.commit)}"
            + (", host polluted" if newest.polluted else "")
            + ")"
        )
        if newest
        else "no runs"
    )
    lines = [
        f"{r.suite}: {r.metric} (each run's {settings.statistic}), {r.analysed} of "
        f"{r.groups} groups analysed, {where}; typical noise {r.typical_noise:.1%}"
    ]
    if r.too_short:
        lines.append(
            f"  {r.too_short} groups have fewer than {settings.min_runs} runs "
            f"(the longest has {r.longest}): not judged"
        )
    return "\n".join(lines)


def environment_note(results: Sequence[Any]) -> list[str]:
    shifts = [c for r in results for c in r.environment_now]
    if not shifts:
        return []
    return [
        f"not counted: {len(shifts)} step(s) at the newest run(s) in groups whose declared "
        "inputs did not change (environment shifts; --fail-on-environment counts them)"
    ]


def check_verdict(results: Sequence[Any], settings: Any, status: int) -> list[str]:
    if status == 1:
        starts = [c for r in results for c in r.starts_now]
        return [
            f"check failed: the newest run starts {len(starts)} significant step(s)",
            *environment_note(results),
        ]
    if status != 2:
        return environment_note(results)
    polluted = [r for r in results if r.polluted_newest]
    if polluted:
        return [
            f"check cannot judge {r.metric}: the newest run {r.newest.run_id}'s host "
            "pollution gate failed (a wall time then says more about the host than the "
            "code); judge a CPU metric, or pass --allow-polluted"
            for r in polluted
        ]
    longest = max((r.longest for r in results), default=0)
    return [
        f"check cannot judge: the longest group has {longest} runs, a check needs "
        f"{settings.min_runs} (run {settings.min_runs - longest} more)"
    ]
