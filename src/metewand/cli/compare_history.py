"""``compare``'s use of the run history: each group's between-run spread, for a side of one run.

The statistics live in ``compare.hierarchy`` (a side of one run adds a known between-run
variance) and the query in ``history.spread``; this module joins them, since ``compare`` sits
below ``history`` and may not open it itself. What was used, or why nothing was, is recorded in
the comparison's ``statistics.history`` and printed before the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from metewand.errors import InvalidInput

if TYPE_CHECKING:  # the statistics import numpy: loaded when a comparison runs, not at start
    from metewand.compare.hierarchy import BetweenRun
    from metewand.compare.rundir import RunData
    from metewand.history.spread import Spread

Between = dict[tuple[str, tuple[str, str]], "BetweenRun"]


class HistoryUnusable(InvalidInput):
    """--history names a file that is absent, or the history cannot be read (exit 2)."""


def between_run(
    options: dict[str, Any], base: Sequence[RunData], new: Sequence[RunData]
) -> tuple[Between | None, dict[str, Any]]:
    """The per-(metric, group) between-run variances from the history, and the account of it."""
    if len(base) >= 2 and len(new) >= 2:
        return None, {"status": "not needed", "reason": "both sides have several runs"}
    if options["no_history"]:
        return None, {"status": "off", "reason": "--no-history"}
    from metewand.history.spread import MIN_RUNS
    from metewand.history.store import HistoryError, default_path, reading

    given = options["history_path"]
    path = Path(given).expanduser().absolute() if given else default_path(base[0].path.parent)
    if not path.is_file():
        if given:
            raise HistoryUnusable(f"--history {given}: no such file")
        return None, {"status": "absent", "path": str(path)}
    try:
        with reading(path) as con:
            spreads, clean_only = _spreads(con, options["metric"], base, new)
    except HistoryError as exc:
        raise HistoryUnusable(f"{exc} (compare --no-history judges without it)") from None
    between: Between = {
        (metric, (task, subject)): _between(spread)
        for (metric, task, subject), spread in spreads.items()
    }
    runs = sorted({spread.runs for spread in spreads.values()})
    account: dict[str, Any] = {
        "status": "used",
        "path": str(path),
        "groups": len(between),
        "min_runs": MIN_RUNS,
        "controlled_groups": sum(spread.controlled is not None for spread in spreads.values()),
        "clean_runs_only": clean_only,
    }
    if runs:
        account["earlier_runs"] = [runs[0], runs[-1]]
    return between, account


def _between(spread: Spread, controlled: bool = False) -> BetweenRun:
    from metewand.compare.hierarchy import BetweenRun

    source = f"history: {spread.runs} earlier runs" + (", less their drift" if controlled else "")
    if spread.df is not None:
        source += f", moderated (df {spread.df:.0f})"
    return BetweenRun(
        spread.variance,
        spread.df if spread.df is not None else float(spread.runs - 1),
        source,
        spread.probe_variance,
        spread.covariance,
        _between(spread.controlled, True) if spread.controlled else None,
    )


def _spreads(
    con: Any, metric: str | None, base: Sequence[RunData], new: Sequence[RunData]
) -> tuple[dict[tuple[str, str, str], Spread], list[str]]:
    """The groups' spreads, and the metrics whose spreads are of clean earlier runs only."""
    from metewand.compare import pollution
    from metewand.compare.controls import MIN_CONTROL_GROUPS
    from metewand.compare.run_compare import settings_for
    from metewand.compare.suite_registry import suite_kind
    from metewand.history.spread import group_spreads, identify

    kind = suite_kind(base[0].kind)
    settings = settings_for(kind, metric)
    identities = [identify(run.path) for run in [*base, *new]]
    first_base = min(identities[: len(base)], key=lambda i: i.started_at or "")
    exclude = [i.uid for i in identities]
    clean = all(pollution.gate_of(run.host_summary)["passed"] is not False for run in [*base, *new])
    metrics = [m for m in (settings.metric, settings.companion) if m]
    clean_only = [m for m in metrics if clean and kind.metric_family(m) == pollution.WALL]
    probes = {m: kind.speed_probe_of(m, False) for m in metrics}
    spreads = group_spreads(
        con, first_base, exclude, metrics, probes, MIN_CONTROL_GROUPS, clean_only
    )
    return spreads, clean_only


def history_options(command: Any) -> Any:
    command = click.option(
        "--no-history",
        is_flag=True,
        help="Do not read the run history's between-run spread.",
    )(command)
    return click.option(
        "--history",
        "history_path",
        default=None,
        metavar="PATH",
        help="Run history whose between-run spread a side of one run borrows (default: "
        "$METEWAND_HISTORY, else history.duckdb beside BASE's run store; unused when absent).",
    )(command)
