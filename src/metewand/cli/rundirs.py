"""RUN arguments: a run directory or a run id under ``--out`` (default ./runs), alike;
``latest`` names the newest run there (when no run is called ``latest``).

Every command that reads a run (report, inspect, status, export, ``--resume``,
``--resource-calibration-baseline``) resolves RUN here, once, against the directory the user ran
the command from, and works with the absolute path from then on.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import click

from metewand.cli import exit_codes

DEFAULT_RUNS_DIR = "runs"
MANIFEST_NAME = "run_manifest.json"  # runtime.store's name; read here without importing it
RESULTS_NAME = "results.jsonl"  # a peer's run directory may have only this
LATEST = "latest"


class RunNotFound(click.ClickException):
    """RUN names no run directory: exit 2 (invalid input) with the places looked at."""

    exit_code = exit_codes.INVALID_INPUT

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.message}", err=True)


def candidates(run: str, out_dir: str | Path = DEFAULT_RUNS_DIR) -> list[Path]:
    """Where RUN may live: as a path, then as an id under OUT (both made absolute)."""
    as_path = Path(run).expanduser().absolute()
    as_id = (Path(out_dir).expanduser() / run).absolute()
    return [as_path] if as_path == as_id else [as_path, as_id]


def find_run_dir(run: str, out_dir: str | Path = DEFAULT_RUNS_DIR) -> Path | None:
    for path in candidates(run, out_dir):
        if (path / MANIFEST_NAME).is_file() or (path / RESULTS_NAME).is_file():
            return path
    return newest_run(out_dir) if run == LATEST else None


def newest_run(out_dir: str | Path) -> Path | None:
    """The run under OUT whose manifest was written last (a resumed run counts as new)."""
    root = Path(out_dir).expanduser().absolute()
    try:
        runs = [p.parent for p in root.glob(f"*/{MANIFEST_NAME}") if p.is_file()]
        return max(runs, key=lambda p: (p / MANIFEST_NAME).stat().st_mtime_ns, default=None)
    except OSError:
        return None


def resolve_run_dir(run: str, out_dir: str | Path = DEFAULT_RUNS_DIR, what: str = "run") -> Path:
    """The absolute run directory RUN names, or a clear error (exit 2)."""
    found = find_run_dir(run, out_dir)
    if found is not None:
        return found
    looked = ", ".join(str(p) for p in candidates(run, out_dir))
    existing = [p for p in candidates(run, out_dir) if p.is_dir()]
    if existing:
        raise RunNotFound(
            f"{what} {run!r}: {existing[0]} is not a run directory "
            f"(no {MANIFEST_NAME} or {RESULTS_NAME})"
        )
    raise RunNotFound(f"{what} {run!r}: no run directory (looked in {looked})")
