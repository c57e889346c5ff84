"""Outcomes, the per-family table and the runner over every family."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metewand import markdown

FAMILIES = (
    "canonical JSON",
    "identity recipes",
    "identities as the planner builds them",
    "seeds",
    "schema validation",
    "local-tree hash",
    "manifest",
    "problem contracts",
    "worker protocol",
    "measurements payload",
)


@dataclass(frozen=True)
class Outcome:
    family: str
    name: str
    same: bool
    detail: str = ""  # what differed (or why the vector could not run)


def load(vectors: Path, rel: str) -> Any:
    return json.loads((vectors / rel).read_text("utf-8"))


def check(family: str, name: str, fn: Callable[[], str | None]) -> Outcome:
    """Run one vector: ``fn`` returns None when the verdicts agree, else what differs."""
    try:
        problem = fn()
    except Exception as exc:  # a vector that crashes our side is a difference, named
        problem = f"{type(exc).__name__}: {exc}"
    return Outcome(family, name, problem is None, problem or "")


def table(outcomes: list[Outcome]) -> list[tuple[str, int, int, list[str]]]:
    """(family, vectors, same, differences) in FAMILIES order."""
    rows = []
    for family in FAMILIES:
        mine = [o for o in outcomes if o.family == family]
        if mine:
            diffs = [f"{o.name}: {o.detail}" for o in mine if not o.same]
            rows.append((family, len(mine), sum(o.same for o in mine), diffs))
    return rows


def render(outcomes: list[Outcome]) -> Iterator[str]:
    rows = [
        [family, count, same, "; ".join(diffs) if diffs else "—"]
        for family, count, same, diffs in table(outcomes)
    ]
    yield from markdown.table(["family", "vectors", "same", "different"], rows)
