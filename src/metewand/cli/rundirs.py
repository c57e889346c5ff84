"""RUN arguments: a run directory or a run id under ``--out`` (default ./runs), alike;
``latest`` names the newest run there (when no run is called ``latest``).

Every command that reads a run (report, inspect, status, export, ``--resume``,
``--resource-calibration-baseline``) resolves RUN here, once, against the directory the user ran
the command from, and works with the absolute path from then on. The rule itself is
``runtime.rundir``'s (the run directory's one owner); this module turns its refusal into the
CLI's exit 2.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

import click

from metewand.cli import exit_codes
from metewand.runtime import rundir
from metewand.runtime.rundir import DEFAULT_RUNS_DIR as DEFAULT_RUNS_DIR
from metewand.runtime.rundir import find_run_dir as find_run_dir


class RunNotFound(click.ClickException):
    """RUN names no run directory: exit 2 (invalid input) with the places looked at."""

    exit_code = exit_codes.INVALID_INPUT

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.message}", err=True)


def resolve_run_dir(
    run: str, out_dir: str | Path = DEFAULT_RUNS_DIR, what: str = "run", manifest: bool = False
) -> Path:
    """The absolute run directory RUN names, or a clear error (exit 2). ``manifest``: the
    command reads a metewand run, so a directory of results alone (a peer's) is refused."""
    try:
        found = rundir.resolve_run_dir(run, out_dir, what)
    except rundir.RunDirError as exc:
        raise RunNotFound(str(exc)) from None
    if manifest and not os.path.lexists(found / rundir.MANIFEST):
        raise RunNotFound(f"{what} {run!r}: {found} has no {rundir.MANIFEST} (not a metewand run)")
    return found
