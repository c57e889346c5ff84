"""The one call ``run`` and ``browser run`` make at their end: add the run to the history.

A history that cannot take the run (corrupt, foreign, locked past the wait) does not fail the
run: the rows are safe in the run directory, the warning says why and how to add it later.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click


def history_flags(command: Any) -> Any:
    command = click.option(
        "--no-history", is_flag=True, help="Do not add the run to the history at its end."
    )(command)
    return click.option(
        "--history",
        "history_path",
        default=None,
        metavar="PATH",
        help="History the run adds itself to (default: $METEWAND_HISTORY, else "
        "history.duckdb beside --out).",
    )(command)


def add_to_history(
    run_dir: Path | str,
    out_dir: Path | str,
    history_path: str | None,
    no_history: bool,
    echo: Callable[[str], None],
) -> None:
    if no_history:
        return
    from metewand.errors import MetewandError
    from metewand.history.ingest import add_runs
    from metewand.history.store import resolve_path

    path = resolve_path(history_path, out_dir)
    try:
        added = add_runs(path, [Path(run_dir)])[0]
    except (MetewandError, OSError) as exc:
        echo(
            f"warning: run not added to the history: {exc} (the run is complete; "
            f"`metewand history add {run_dir} --history {path}` adds it later)"
        )
        return
    echo(f"history: {added.outcome} {added.run_id} ({added.values} values) in {path}")
