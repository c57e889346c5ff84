"""Every family over the vectors directory (``tests/vectors/rust``)."""

from __future__ import annotations

from pathlib import Path

from metewand.suites.compute.conformance import formats, planning, protocol
from metewand.suites.compute.conformance.core import Outcome


def run(vectors: Path, worker: Path | None = None, runs: bool = True) -> list[Outcome]:
    """``worker``: the raw fixture worker the worker-protocol runs start; ``runs=False`` skips
    those runs (they launch processes; every other family is pure)."""
    outcomes = [*formats.all_families(vectors), *planning.all_families(vectors)]
    if runs:
        outcomes.extend(protocol.runs(vectors, worker))
    return outcomes
