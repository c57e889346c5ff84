"""Per-case compute figures: scaling along each numeric axis, and phases with start-up apart.

Drawn from ``cases.case_statistics`` output only. A case where an implementation has no
accepted attempt has no point (NaN breaks the line); nothing unmeasured is drawn as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from metewand.compare.case_text import short_label
from metewand.compare.plots import COLOURS, LEGEND_COLUMNS, LEGEND_ROW_IN, _figure, legend_outside

MAX_PANELS = 6


def _metric(case: Mapping[str, Any], impl: str, metric: str) -> tuple[float, float, float]:
    block = case["implementations"].get(impl)
    stat = (block or {}).get("metrics", {}).get(metric) or {}
    if not stat.get("n"):
        return np.nan, np.nan, np.nan
    ci = stat.get("median_ci95") or [stat["median"], stat["median"]]  # no CI: no band
    return stat["median"] / 1e6, ci[0] / 1e6, ci[1] / 1e6


def scaling_axes(summary: Mapping[str, Any]) -> list[str]:
    """Numeric axes that take at least two values across the cases."""
    values: dict[str, set[float]] = {}
    for case in summary["cases"]:
        for axis, value in case["axes"].items():
            values.setdefault(axis, set()).add(value)
    return sorted(axis for axis, seen in values.items() if len(seen) >= 2)


def _panel_title(summary: Mapping[str, Any], case: Mapping[str, Any], axis: str) -> str:
    """Everything but ``axis`` is held fixed in one panel; the title names what varies."""
    title = short_label(case, axis)
    for field in ("experiment", "case", "dataset", "problem", "timing_scope"):
        if len({c["coordinates"][field] for c in summary["cases"]}) > 1:
            title = f"{case['coordinates'][field]}, {title}"
    return title


def scaling_chart(
    summary: Mapping[str, Any],
    axis: str,
    metrics: Sequence[str],
    unreliable: Mapping[str, str] | None = None,
) -> Figure:
    """Median (log scale) against ``axis``: one row of panels per metric (timed wall above CPU,
    so the two can be read side by side), one panel per setting of the other parameters, one
    line per implementation with its CI band. ``unreliable``: metric -> why (a failed host
    pollution gate), written in the row's panel titles."""
    panels: dict[str, list[Mapping[str, Any]]] = {}
    for case in summary["cases"]:
        if axis in case["axes"]:
            panels.setdefault(_panel_title(summary, case, axis), []).append(case)
    chosen = sorted(panels)[:MAX_PANELS]
    rows = -(-max(1, len(summary["implementations"])) // LEGEND_COLUMNS)
    extra = LEGEND_ROW_IN * rows
    fig = _figure(
        4.2 * max(1, len(chosen)), 3.4 * len(metrics) + extra, (0.75, 0.2, 0.55 + extra, 0.45)
    )
    fig.subplots_adjust(wspace=0.35, hspace=0.5)
    grid = fig.subplots(len(metrics), max(1, len(chosen)), squeeze=False)
    for row, metric in zip(grid, metrics, strict=True):
        note = (unreliable or {}).get(metric)
        for ax, title in zip(row, chosen, strict=False):
            _scaling_panel(ax, summary, panels[title], axis, metric)
            ax.set_title(
                f"{title}\n{note}" if note else title,
                fontsize=9,
                color="#b00020" if note else "black",
            )
    drawn = [ax for row in grid for ax in row[: len(chosen)]] or list(grid[0])
    legend_outside(fig, drawn, "no implementation has an accepted attempt")
    return fig


def _scaling_panel(
    ax: Any, summary: Mapping[str, Any], cases: list[Mapping[str, Any]], axis: str, metric: str
) -> None:
    cases = sorted(cases, key=lambda c: c["axes"][axis])
    x = np.array([c["axes"][axis] for c in cases])
    for index, impl in enumerate(summary["implementations"]):
        points = np.array([_metric(c, impl, metric) for c in cases])
        if not np.isfinite(points[:, 0]).any():
            continue
        colour = COLOURS[index % len(COLOURS)]
        ax.plot(x, points[:, 0], marker="o", color=colour, label=impl)
        ax.fill_between(x, points[:, 1], points[:, 2], color=colour, alpha=0.2, lw=0)
    ax.set_yscale("log")
    ax.set_xlabel(axis)
    ax.set_ylabel(f"median {metric.removesuffix('_ns').replace('_', ' ')} (ms, log)")
    ax.grid(True, which="both", alpha=0.3)


def phase_chart(summary: Mapping[str, Any]) -> Figure:
    """Left: worker start-up (cold) per case; right: prepare + execute stacked per case.

    Start-up is drawn apart so a 2 ms sort is not hidden under a 60 ms interpreter start.
    """
    cases = summary["cases"]
    impls = summary["implementations"]
    labels = [short_label(c) for c in cases]
    width = 0.8 / max(1, len(impls))
    extra = LEGEND_ROW_IN * -(-max(1, len(impls)) // LEGEND_COLUMNS)
    fig = _figure(max(9.0, 1.6 * len(cases) * 2), 4.2 + extra, (1.2, 0.2, 1.3, 0.4 + extra))
    fig.subplots_adjust(wspace=0.25)
    left, right = fig.subplots(1, 2)
    x = np.arange(len(cases))
    for index, impl in enumerate(impls):
        colour = COLOURS[index % len(COLOURS)]
        offset = x - 0.4 + width * (index + 0.5)
        startup = np.array([_metric(c, impl, "worker_startup_time_ns")[0] for c in cases])
        prepare = np.array([_metric(c, impl, "prepare_time_ns")[0] for c in cases])
        execute = np.array([_metric(c, impl, "execute_request_time_ns")[0] for c in cases])
        if np.isfinite(startup).any():
            left.bar(offset, startup, width, color=colour, label=impl)
        if np.isfinite(execute).any():
            right.bar(offset, prepare, width, color=colour, alpha=0.45)
            right.bar(
                offset, execute, width, bottom=np.nan_to_num(prepare), color=colour, label=impl
            )
    for ax, title in ((left, "worker start-up (cold)"), (right, "prepare (light) + execute")):
        ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("median (ms)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    legend_outside(fig, (left, right), "no accepted attempt measured this phase", where="top")
    return fig
