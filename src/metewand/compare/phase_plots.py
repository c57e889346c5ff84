"""The stacked "where the CPU goes" chart of a compute run's phase costs (``phase_costs``).

One horizontal bar per case x implementation x accounting group; its segments are the phases'
median CPU in the order they ran, then the CPU between marks. A phase with no measured CPU is
left out of its bar (never drawn as 0) and the table beside the chart says why.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib import colormaps
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from metewand.compare.phase_costs import TOTAL
from metewand.compare.plots import COLOURS, _figure

BAR_HEIGHT_IN = 0.32
LABEL_CHARS = 48  # a case label longer than this is shortened (the table has it whole)
GREY = "#b0b0b0"
LEGEND_ENTRY_IN = 0.17  # one legend entry at fontsize 7, spacing included


def _bars(costs: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[tuple[str, float]]]]:
    bars = []
    for block in costs:
        for role, group in block["groups"].items():
            segments = [
                (p["name"], p["cpu_ns_median"] / 1e6)
                for p in group.get("phases", [])
                if p["name"] != TOTAL and p["cpu_ns_median"] is not None
            ]
            case = textwrap.shorten(str(block["case"]), LABEL_CHARS, placeholder="…")
            bars.append((f"{case}\n{block['implementation']} · {role}", segments))
    return bars


def _distinct(count: int) -> tuple[str, ...]:
    cmap = colormaps["tab20"]
    return tuple(to_hex(cmap(i % 20)) for i in range(count))


def cost_chart(costs: Sequence[Mapping[str, Any]]) -> Figure:
    bars = _bars(costs)
    names: list[str] = []
    for _, segments in bars:
        names += [n for n, _ in segments if n not in names]
    coloured = [x for x in names if x != "between marks"]
    # more phases than the house colours (a browser run's phases): one distinct colour each
    palette = COLOURS if len(coloured) <= len(COLOURS) else _distinct(len(coloured))
    colour = {n: palette[i % len(palette)] for i, n in enumerate(coloured)}
    colour["between marks"] = GREY
    # tall enough for the bars, and for the legend beside them (a few bars with many phases
    # would otherwise push the legend past the figure's bottom edge)
    height = max(1.2 + BAR_HEIGHT_IN * 1.6 * max(1, len(bars)), 0.9 + LEGEND_ENTRY_IN * len(names))
    fig = _figure(11.0, height, (3.4, 1.9, 0.6, 0.3))
    ax = fig.subplots()
    labelled: set[str] = set()
    for index, (_, segments) in enumerate(bars):
        left = 0.0
        for name, ms in segments:
            label = None if name in labelled else name
            labelled.add(name)
            ax.barh(index, ms, left=left, height=0.6, color=colour[name], label=label)
            left += ms
    ax.set_yticks(range(len(bars)), [label for label, _ in bars], fontsize=6.5)
    ax.invert_yaxis()
    ax.set_xlabel("median CPU per attempt (ms)")
    ax.grid(True, axis="x", alpha=0.3)
    if labelled:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    else:
        ax.text(0.5, 0.5, "no phase CPU was measured", ha="center", transform=ax.transAxes)
    return fig
