"""A group's declared inputs over its points (``Point.inputs``: the digest ``ingest`` keeps per
run and group): where they changed, and whether they changed around a step (``check``)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from metewand.history.series import Point

REACH = 2  # runs: how far off a step's estimated position can be from its cause


def input_changes(points: Sequence[Point]) -> list[int]:
    """The indices of the points whose group's declared inputs differ from the point before's
    (both known)."""
    return [
        i
        for i in range(1, len(points))
        if points[i].inputs is not None
        and points[i - 1].inputs is not None
        and points[i].inputs != points[i - 1].inputs
    ]


UNCHANGED, CHANGED, UNKNOWN = "unchanged", "changed", "unknown"


def window(points: list[Point], index: int) -> list[Point]:
    """The points around a step at ``index``: the estimate of where a step starts can be a run
    or two off (``REACH``), so inputs that changed that close are the step's cause."""
    return points[max(0, index - 1 - REACH) : index + REACH + 1]


def inputs_near(points: list[Point]) -> tuple[str, Point | None]:
    """(``unchanged`` / ``changed`` / ``unknown``, the first point whose inputs differ from the
    point before it)."""
    if any(p.inputs is None for p in points):
        return UNKNOWN, None
    for before, after in itertools.pairwise(points):
        if after.inputs != before.inputs:
            return CHANGED, after
    return UNCHANGED, None
