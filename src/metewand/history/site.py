"""``history report``: a static site (one page per suite, a trend chart per group) and the page
``history show --format html`` writes.

Charts are inline SVG written here: a point per run (median) with its CI as a band, polluted
runs drawn hollow and red, change points as dashed lines labelled with their commit. 100 groups
x 1,000 runs draw in a fraction of a second this way, where a matplotlib figure per group would
take most of the 30 s budget on this host; the drawing is a polyline and a polygon per group.
Each change links to the ``compare`` report of the run before it and the first run after it,
written beside the pages when both run directories are still there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metewand.compare.html_parts import esc, page, section, table
from metewand.history import text
from metewand.history.series import Point

WIDTH, HEIGHT, PAD_L, PAD_R, PAD_T, PAD_B = 760, 190, 64, 12, 14, 26


@dataclass
class GroupChart:
    title: str
    metric: str
    points: Sequence[Point]
    changes: list[dict[str, Any]] = field(default_factory=list)
    outliers: list[int] = field(default_factory=list)
    links: dict[int, str] = field(default_factory=dict)  # change position -> compare page


def _scale(low: float, high: float, size: float, start: float) -> Any:
    span = (high - low) or abs(high) or 1.0
    return lambda v: start + size - (v - low) / span * size


def _ticks(low: float, high: float, metric: str) -> str:
    ticks = []
    for fraction in (0.0, 0.5, 1.0):
        value = low + (high - low) * fraction
        y = PAD_T + (HEIGHT - PAD_T - PAD_B) * (1 - fraction)
        ticks.append(
            f'<text x="{PAD_L - 4}" y="{y + 4:.1f}" text-anchor="end" '
            f'class="tick">{esc(text.figure(value, metric))}</text>'
            f'<line x1="{PAD_L}" x2="{WIDTH - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" '
            'class="grid"/>'
        )
    return "".join(ticks)


def svg_chart(chart: GroupChart) -> str:
    points = chart.points
    if not points:
        return '<p class="muted">no values</p>'
    low = min(min(p.ci_low, p.minimum) for p in points)
    high = max(p.ci_high for p in points)
    y_of = _scale(low, high, HEIGHT - PAD_T - PAD_B, PAD_T)
    step = (WIDTH - PAD_L - PAD_R) / max(len(points) - 1, 1)

    def x_of(i: int) -> float:
        return PAD_L + i * step if len(points) > 1 else (PAD_L + WIDTH - PAD_R) / 2

    band = " ".join(f"{x_of(i):.1f},{y_of(p.ci_high):.1f}" for i, p in enumerate(points))
    band += " " + " ".join(
        f"{x_of(i):.1f},{y_of(p.ci_low):.1f}" for i, p in reversed(list(enumerate(points)))
    )
    line = " ".join(f"{x_of(i):.1f},{y_of(p.median):.1f}" for i, p in enumerate(points))
    floor = " ".join(f"{x_of(i):.1f},{y_of(p.minimum):.1f}" for i, p in enumerate(points))
    marks = [
        _marker(x_of(i), y_of(p.median), p, i in chart.outliers, chart.metric)
        for i, p in enumerate(points)
    ]
    changes = [
        _change_mark(x_of(c["position"] - 1) - step / 2, c, chart.links) for c in chart.changes
    ]
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{esc(chart.title)}">{_ticks(low, high, chart.metric)}'
        f'<polygon points="{band}" class="band"/><polyline points="{line}" class="line"/>'
        f'<polyline points="{floor}" class="floor"/>'
        f"{''.join(marks)}{''.join(changes)}</svg>"
    )


def _marker(x: float, y: float, point: Point, outlier: bool, metric: str) -> str:
    cls = "pt polluted" if point.polluted else "pt"
    if outlier:
        cls += " outlier"
    label = (
        f"{point.run_id} commit {text.short_commit(point.commit)}: "
        f"{text.figure(point.median, metric)} [{text.figure(point.ci_low, metric)} – "
        f"{text.figure(point.ci_high, metric)}, {point.ci_level:.0%}], floor "
        f"{text.figure(point.minimum, metric)}" + (" polluted host" if point.polluted else "")
    )
    radius = 2.2 if not math.isfinite(x) else 3.0
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius}" class="{cls}"><title>{esc(label)}</title></circle>'


def _change_mark(x: float, change: dict[str, Any], links: dict[int, str]) -> str:
    env = bool(change.get("environment_shift"))
    label = f"{'environment' if env else text.short_commit(change['commit'])} {change['step']:+.1%}"
    kind = " env" if env else ""
    # the label's classes never include "change": that rule strokes lines, and a stroked
    # label reads doubled
    line = (
        f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T}" y2="{HEIGHT - PAD_B}" '
        f'class="change{kind}"/><text x="{x + 3:.1f}" y="{HEIGHT - 8}" class="change-label{kind}">'
        f"{esc(label)}</text>"
    )
    href = links.get(change["position"])
    return f'<a href="{esc(href)}">{line}</a>' if href else line


SVG_CSS = """
svg.chart{width:100%;max-width:760px;height:auto;border:1px solid var(--line);background:#fff}
.grid{stroke:#eaeef2;stroke-width:1}.tick{font-size:10px;fill:var(--muted)}
.band{fill:#1f77b4;fill-opacity:.15;stroke:none}.line{fill:none;stroke:#1f77b4;stroke-width:1.5}
.floor{fill:none;stroke:#2ca02c;stroke-width:1;stroke-dasharray:3 2}
.pt{fill:#1f77b4}.pt.polluted{fill:#fff;stroke:#b42318;stroke-width:1.5}
.pt.outlier{fill:#fff;stroke:#8c564b;stroke-dasharray:2 1}
.change{stroke:#d62728;stroke-width:1.5;stroke-dasharray:5 3}
.change-label{font-size:11px;fill:#d62728}
.change.env{stroke:#7f7f7f}.change-label.env{fill:#7f7f7f}
"""


def legend() -> str:
    return (
        '<p class="muted">Each point: one run\'s median over its counted attempts; band: the '
        "95% order-statistic CI of that median (its true level is in the tooltip); dashed "
        "green: each run's floor (its lowest attempt, what change points are found in by "
        "default: a busy host only ever adds to a cost); hollow "
        "red: a run whose host pollution gate failed; hollow brown: a run set aside as an "
        "outlier; dashed red line: a change point, labelled with the commit of the first "
        "run after it (a link to the compare report of the runs around it); dashed grey "
        "line: an environment shift, a change point across which the group's declared "
        "inputs did not change.</p>"
    )


def group_section(chart: GroupChart, ident: str) -> str:
    rows = [
        [
            c["run_id"],
            text.short_commit(c["commit"]),
            f"{c['step']:+.1%}",
            f"{c['step_ci95'][0]:+.1%} to {c['step_ci95'][1]:+.1%}",
            f"{c['p_value']:.2g}",
            f"{c['historical_noise']:.1%}",
            text.cause_note(c).removeprefix("; ") or "inputs unknown",
        ]
        for c in chart.changes
    ]
    parts = [svg_chart(chart)]
    if rows:
        head = ["first run after", "commit", "step", "95% CI", "p", "noise", "cause"]
        parts.append(table(head, rows))
    return f'<section id="{esc(ident)}"><h3>{esc(chart.title)}</h3>{"".join(parts)}</section>'


def suite_page(suite: str, metric: str, charts: list[GroupChart], note: str) -> str:
    body = [f"<h1>{esc(suite)}: {esc(metric)} over runs</h1>", legend(), f"<p>{esc(note)}</p>"]
    changed = [c for c in charts if c.changes]
    if changed:
        body.append(
            section(
                "changes",
                "Groups with change points",
                "".join(group_section(c, f"g{i}") for i, c in enumerate(changed)),
            )
        )
    body.append(
        section(
            "groups",
            "Every group",
            "".join(group_section(c, f"all{i}") for i, c in enumerate(charts)),
        )
    )
    return _with_css(
        page(f"history: {suite}", [("changes", "Changes"), ("groups", "Groups")], "".join(body))
    )


def _with_css(html_text: str) -> str:
    return html_text.replace("</style>", SVG_CSS + "</style>", 1)


def index_page(entries: list[tuple[str, str, int, int]]) -> str:
    rows = [[suite, metric, groups, changes] for suite, metric, groups, changes in entries]
    links = "".join(f'<li><a href="{esc(s)}.html">{esc(s)}</a></li>' for s, *_ in entries)
    body = f"<h1>metewand history</h1><ul>{links}</ul>" + table(
        ["suite", "metric", "groups", "change points"], rows, numeric=(2, 3)
    )
    return _with_css(page("metewand history", [], body))


def show_page(data: Any) -> str:
    """``history show --format html``: the same charts, without change-point analysis."""
    parts = [legend()]
    for block in data.blocks:
        charts = [
            GroupChart(
                f"{s.task} x {s.subject}" + (f" [{s.driver}]" if s.driver else ""),
                block.metric,
                points,
            )
            for s, points in block.series
        ]
        parts.append(f"<h2>{esc(block.suite)}: {esc(block.metric)}</h2>")
        parts += [group_section(c, f"{block.suite}{i}") for i, c in enumerate(charts)]
    return _with_css(page("metewand history show", [], "".join(parts)))


def write_pages(out: Path, pages: dict[str, str]) -> list[Path]:
    from metewand.runtime.rundir import write_text_atomic

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, html_text in pages.items():
        write_text_atomic(out / name, html_text)
        written.append(out / name)
    return written
