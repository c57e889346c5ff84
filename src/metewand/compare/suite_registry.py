"""The suite kinds ``compare`` knows, keyed by name: everything in compare that depends on the suite.

``compare`` has no ``if kind == "browser"`` branch: grouping and reading rows for ``metewand
compare``, scoring, the scorecard, the failure warning, the report's sections, extra CSV files and
the derived files a run gets at its end all come from the ``SuiteKind`` registered under the run's
suite name. ``compare.compare_suites`` registers compute and browser; a new suite registers one
more ``SuiteKind`` there.

The registrations are imported at the edge, never from here: ``compare_suites`` imports the
modules that look kinds up (report sections, warnings, verdicts), so a lookup that imported it
would close a circle. compare's entry points (``generate``, ``run_compare``) and the commands
that reach compare elsewhere import ``compare_suites``; nothing it imports does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from metewand.errors import InvalidInput

if TYPE_CHECKING:  # imported for annotations only: the registry must stay cheap to import
    from metewand.compare.html_parts import Omitted
    from metewand.compare.report_resources import ResourceContext
    from metewand.compare.rundir import RunData
    from metewand.compare.verdict import Verdict

Group = tuple[str, str]  # (case or task, implementation or engine)
Rows = list[dict[str, Any]]
# (anchor id, navigation title, HTML, or Omitted: nothing to show, said in one line at the top)
Section = tuple[str, str, "str | Omitted"]


class CompareError(InvalidInput, ValueError):
    """The two runs cannot be compared (different suites, unknown metric, unknown suite)."""


@dataclass(frozen=True)
class SuiteKind:
    """How one suite's rows are compared, scored and reported."""

    name: str
    # metewand compare BASE NEW
    group_names: tuple[str, str]  # e.g. ("case", "implementation")
    default_metric: str
    metrics: tuple[str, ...]
    group_of: Callable[[Mapping[str, Any]], Group | None]  # None: the row is not compared
    value_of: Callable[[Mapping[str, Any], str], float | None]  # successful attempts only
    status_of: Callable[[Mapping[str, Any]], str]
    provenance_of: Callable[[RunData], dict[str, Any]]
    # metewand report RUN and the end of a run
    scores_of: Callable[[Rows, Mapping[str, Any], str | None], dict[str, Any]]  # (.., reference)
    scorecard_of: Callable[[Mapping[str, Any]], str]
    failed_attempts: Callable[[Sequence[Mapping[str, Any]]], str | None]  # warning text or None
    report_sections: Callable[[RunData, Mapping[str, Any], ResourceContext], list[Section]]
    resource_sections: Callable[[ResourceContext], list[Section]]  # after the host section
    has_resources: bool  # resource summary, calibration and eligibility apply to its runs
    csv_files: Callable[[Mapping[str, Any]], dict[str, tuple[str, str]]]  # key: (name, text)
    run_end_formats: tuple[str, ...]  # what ``generate`` writes right after a run finishes
    # metewand compare: coarser groups shown beside the per-group ratios (browser: per subset
    # and per driver path): rows -> {rollup name: {(name, engine): summary}}
    rollups_of: Callable[[Rows], dict[str, dict[Group, Any]]] | None = None
    # metrics beyond ``metrics`` whose names come from the rows (browser phase names)
    accepts_metric: Callable[[str], bool] | None = None
    # metewand compare's statistics (compare.hierarchy): the process launch of each of one
    # group's rows in one run (a compute worker process, a browser engine process); rows of one
    # launch share its state, so repetitions inside it are not independent units
    launches_of: Callable[[Sequence[Mapping[str, Any]]], list[str]] = lambda rows: [
        f"row:{i}" for i in range(len(rows))
    ]
    # "wall" | "cpu" | "memory" | "other": which pollution can spoil the metric
    metric_family: Callable[[str], str] = lambda metric: "other"
    # the CPU figure shown beside a wall metric and the other way round (None: there is none)
    companion_of: Callable[[str], str | None] = lambda metric: None
    # interleaved A/B inside one run: the side ("base"/"new") and the pair of a row (None: not
    # an A/B row) — compute runs made with ``run --ab-baseline``
    ab_of: Callable[[Mapping[str, Any]], tuple[str, str, int] | None] | None = None
    # (metric, paired) -> the metric of a phase that does the same work on both sides, read as
    # each process's speed to adjust ``metric`` by (compare.speed_adjust for pairs,
    # compare.speed_sides for separate runs); None: none
    speed_probe_of: Callable[[str, bool], str | None] = lambda metric, paired: None
    # run -> the identity of the code each of its rows measured (compute: its implementation
    # configuration; browser: compare.browser_code); read once per run. An implementation whose
    # groups' code is the same on both sides is the one separate runs adjust for speed, read
    # across groups and use as controls
    code_of: Callable[[RunData], Callable[[Mapping[str, Any]], str | None]] = lambda run: (
        lambda row: None
    )
    # the run's verdict (compare.verdict): (run, its scores or None, a regenerated resource
    # summary or None) -> Verdict; None: the suite has no verdict
    verdict_of: (
        Callable[[RunData, Mapping[str, Any] | None, Mapping[str, Any] | None], Verdict] | None
    ) = None


SUITE_KINDS: dict[str, SuiteKind] = {}


def register(kind: SuiteKind) -> SuiteKind:
    SUITE_KINDS[kind.name] = kind
    return kind


def suite_kind(name: str) -> SuiteKind:
    if name not in SUITE_KINDS:
        known = ", ".join(sorted(SUITE_KINDS)) or "none: import metewand.compare.compare_suites"
        raise CompareError(f"no comparison is defined for suite {name!r} (registered: {known})")
    return SUITE_KINDS[name]
