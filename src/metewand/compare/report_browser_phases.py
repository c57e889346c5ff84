"""The "where the time and CPU go" section of a browser run's report.html (issue #16)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metewand.compare import browser_phases, phase_costs, phase_plots, plots
from metewand.compare.html_parts import figure, paragraph, section, table
from metewand.compare.rundir import RunData


def where_section(run: RunData, scores: Mapping[str, Any]) -> str | None:
    """None for runs recorded without phase marks."""
    costs = scores.get("phase_costs")
    if not costs:
        return None
    top = scores.get("phase_top_steps") or {}
    chart = browser_phases.chart_costs(run.rows)
    parts = [
        paragraph(
            "Phase marks read the engine group's CPU and memory counters and this process's "
            "CPU at each boundary: connection, page creation, scene navigation, each step, "
            "grade, page close (no PSS scan). A probe task's CDP work and a driver path's "
            "adapter run are one phase each: their inner operations are not visible to the "
            "harness. Passing attempts only."
        ),
        section(
            "top-steps",
            "Top steps by engine CPU (across the corpus)",
            *[paragraph(line) for line in browser_phases.top_sentences(top)],
            table(list(browser_phases.TOP_HEADER), browser_phases.top_rows(top), (2, 3, 4)),
        ),
    ]
    if chart:
        parts.append(
            figure(
                plots.to_data_uri(phase_plots.cost_chart(chart)),
                "median engine CPU per phase, stacked, per task and engine",
                "One bar per task and engine (the engine's group); segments: median CPU of each "
                "phase in the order run, a task's steps together as 'steps', grey: between "
                "marks. Unmeasured phases are not drawn; the table has every step.",
                "where-cost-chart",
            )
        )
    parts.append(
        table(list(browser_phases.TABLE_HEADER), phase_costs.table_rows(costs), (4, 5, 6, 7))
    )
    return section("where-cost", "Where the time and CPU go (per task × engine)", *parts)
