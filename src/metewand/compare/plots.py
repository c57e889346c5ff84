"""matplotlib figures (Agg backend) rendered to inline base64 PNG data URIs.

Few figures, each drawn from numpy arrays prepared in one pass over the rows. A missing value
is NaN and is dropped before drawing; nothing unmeasured is drawn as 0.

Speed (a report over 20,000 rows must cost under 5x parsing them): figures are plain
``Figure`` objects, not pyplot-managed ones, and their margins are fixed in inches instead of
measured with ``tight_layout`` / constrained layout, which lays out every tick label an extra
time. The margins below leave room for the longest labels these figures carry.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from metewand.compare.efficiency import EnginePoint  # noqa: E402

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
LEGEND_COLUMNS = 4
LEGEND_ROW_IN = 0.3  # inches of figure margin per row of a legend_outside legend
METRIC_LABELS = {
    "pss_peak_bytes": ("median peak PSS (MiB)", 1 / 2**20),
    "cpu_total_ms": ("median CPU (ms)", 1.0),
    "duration_ms": ("duration (ms)", 1.0),
}


def to_data_uri(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _span(centre: float, low: float, high: float) -> list[list[float]]:
    """Error-bar lengths; rounding can put a bound a hair inside the estimate (Wilson at 100%)."""
    return [[max(0.0, centre - low)], [max(0.0, high - centre)]]


def _figure(width: float, height: float, margins: tuple[float, float, float, float]) -> Figure:
    """A figure whose axes margins (left, right, bottom, top) are fixed in inches."""
    left, right, bottom, top = margins
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(
        left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height
    )
    return fig


def efficiency_map(points: Sequence[EnginePoint], metrics: Sequence[str]) -> Figure:
    rows = -(-max(1, len(points)) // LEGEND_COLUMNS)
    fig = _figure(
        5 * len(metrics), 4 + LEGEND_ROW_IN * rows, (0.75, 0.15, 0.6 + LEGEND_ROW_IN * rows, 0.55)
    )
    fig.subplots_adjust(wspace=0.3)
    axes = fig.subplots(1, len(metrics), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        label, scale = METRIC_LABELS.get(metric, (metric, 1.0))
        for index, point in enumerate(points):
            cost, success = point.costs.get(metric), point.success
            if cost is None or success is None:
                continue
            colour = COLOURS[index % len(COLOURS)]
            x, y = cost.estimate * scale, success.estimate * 100
            ax.errorbar(
                [x],
                [y],
                xerr=_span(x, cost.low * scale, cost.high * scale),
                yerr=_span(y, success.low * 100, success.high * 100),
                fmt="o",
                color=colour,
                capsize=4,
                markersize=8,
                label=f"{point.engine} (n={point.samples[metric]})",
            )
        ax.set_xlabel(label + ", all-pass intersection")
        ax.set_ylabel("task success rate, all-k (%)")
        ax.set_ylim(-5, 105)
        ax.grid(True, alpha=0.3)
    legend_outside(fig, axes[0], "no engine has a measured median here")
    fig.suptitle("Efficiency map (95% CIs: Wilson for rate, task-clustered bootstrap for median)")
    return fig


def distributions(columns: Mapping[str, Any], metrics: Sequence[str]) -> Figure:
    """One boxplot panel per metric, one box per engine over its *passing* attempts (a failure
    that ends fast would pull a box down); each box's label counts the attempts left out."""
    names = list(columns)
    fig = _figure(4.5 * len(metrics), 3.8, (0.6, 0.25, 0.75, 0.35))
    fig.subplots_adjust(wspace=0.3)
    axes = fig.subplots(1, len(metrics), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        label, scale = METRIC_LABELS.get(metric, (metric, 1.0))
        data, labels = [], []
        for name in names:
            passed = columns[name].pass_mask()
            values = columns[name].array(metric)
            finite = values[passed & np.isfinite(values)] * scale
            if finite.size:
                data.append(finite)
                left_out = int((~passed).sum())
                labels.append(
                    f"{name}\nn={finite.size} passing"
                    + (f"\n+{left_out} not passing" if left_out else "")
                )
        if data:
            ax.boxplot(data, showfliers=False)
            ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=8)
        else:
            ax.text(0.5, 0.5, "unavailable", ha="center", transform=ax.transAxes)
        ax.set_title(label.replace("median ", ""), fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    return fig


def legend_outside(fig: Figure, axes: Sequence[Any], empty: str, where: str = "bottom") -> None:
    """One legend for all panels, in the figure's margin (``bottom`` or ``top``), never inside
    the axes where it could cover data; a panel with nothing drawn says why. The caller leaves
    ``LEGEND_ROW_IN`` of margin per legend row on that side."""
    handles: dict[str, Any] = {}
    for ax in axes:
        drawn = ax.get_legend_handles_labels()
        if not drawn[0]:
            ax.text(0.5, 0.5, f"unavailable ({empty})", ha="center", transform=ax.transAxes)
        for handle, label in zip(*drawn, strict=True):
            handles.setdefault(label, handle)
    if not handles:
        return
    style = {"ncol": min(len(handles), LEGEND_COLUMNS), "fontsize": 8, "frameon": False}
    if where == "bottom":
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="lower center",
            bbox_to_anchor=(0.5, 0.0),
            **style,
        )
    else:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="upper center",
            bbox_to_anchor=(0.5, 1.0),
            **style,
        )


def _polluted_spans(seconds: np.ndarray, polluted: np.ndarray) -> list[tuple[float, float]]:
    """Each polluted sample shaded +-1 s, overlapping shades merged into one span (one
    translucent band reads as one episode; stacked bands drew stripes of varying darkness)."""
    spans: list[tuple[float, float]] = []
    for t in np.sort(seconds[polluted & np.isfinite(seconds)]):
        if spans and t - 1 <= spans[-1][1]:
            spans[-1] = (spans[-1][0], float(t) + 1)
        else:
            spans.append((float(t) - 1, float(t) + 1))
    return spans


def host_timeline(
    seconds: np.ndarray,
    series: Mapping[str, np.ndarray],
    polluted: np.ndarray,
    limits: Mapping[str, float] | None = None,
    bands: Sequence[str] = (),
) -> Figure:
    """One panel per series; a series named in ``bands`` is filled down to zero (foreign CPU
    reads as an area of machine spent beside the run), ``limits`` draws a gate threshold."""
    fig = _figure(8, 1.8 * len(series), (0.7, 0.15, 0.5, 0.1))
    axes = fig.subplots(len(series), 1, sharex=True, squeeze=False)
    for ax, (name, values) in zip(axes[:, 0], series.items(), strict=True):
        ax.plot(seconds, values, lw=1)
        if name in bands:
            finite = np.isfinite(values)
            ax.fill_between(seconds, 0, values, where=finite, color="#ff7f0e", alpha=0.45, lw=0)
        if limits and name in limits:
            ax.axhline(limits[name], color="#d62728", ls="--", lw=1)
        ax.set_ylabel(name, fontsize=8)
        for start, end in _polluted_spans(seconds, polluted):
            ax.axvspan(start, end, color="#d62728", alpha=0.25, lw=0)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("seconds since first sample (red: pollution gate tripped)")
    return fig
