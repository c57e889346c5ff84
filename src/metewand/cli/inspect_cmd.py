"""``metewand inspect RUN``: one attempt in full (status, checks, errors, measurements, artifacts)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from metewand import canonical
from metewand.cli import exit_codes
from metewand.cli.rundirs import resolve_run_dir
from metewand.compare.compute_rows import diagnostic_of, measurements_of
from metewand.compare.fmt import form_text
from metewand.compare.rundir import RunDirError, load_run
from metewand.runtime.rundir import read_jsonl

CDP_ERRORS_SHOWN = 5


def find_row(
    rows: list[dict[str, Any]],
    key: str | None,
    task: str | None,
    engine: str | None,
    attempt: int | None,
) -> dict[str, Any] | None:
    for row in rows:
        if key is not None and row.get("key") == key:
            return row
        if key is None and (row.get("task_id"), row.get("engine"), row.get("attempt")) == (
            task,
            engine,
            attempt,
        ):
            return row
    return None


def _artifact_paths(run_dir: Path, row: Mapping[str, Any]) -> dict[str, str]:
    artifacts = row.get("artifacts")
    if isinstance(artifacts, Mapping):
        return {str(k): str(run_dir / str(v)) for k, v in sorted(artifacts.items())}
    if isinstance(artifacts, list):
        return {str(i): str(run_dir / str(v)) for i, v in enumerate(artifacts)}
    return {}


def last_cdp_errors(paths: Mapping[str, str]) -> list[dict[str, Any]]:
    """The last protocol errors in the attempt's CDP log (JSON lines with an ``error``)."""
    errors: list[dict[str, Any]] = []
    for name, path in paths.items():
        if "cdp" not in name.lower() and "cdp" not in Path(path).name.lower():
            continue
        try:
            entries = read_jsonl(Path(path)).rows
        except RunDirError as exc:  # the row is still shown; the log's damage is named
            click.echo(f"warning: {exc} (its protocol errors are not shown)", err=True)
            continue
        errors += [e for e in entries if isinstance(e, Mapping) and e.get("error")]
    return errors[-CDP_ERRORS_SHOWN:]


def describe(run_dir: Path, row: Mapping[str, Any]) -> dict[str, Any]:
    paths = _artifact_paths(run_dir, row)
    info: dict[str, Any] = {
        "key": row.get("key"),
        "status": row.get("status", row.get("outcome")),
        "failure_class": row.get("failure_class"),
        "origin": row.get("origin"),
        "secondary_status": row.get("secondary_status"),
        "reason": row.get("reason"),
        "duration_ms": row.get("duration_ms"),
        "checks": row.get("checks"),
        "artifacts": paths,
    }
    if "engine" in row:
        info["last_cdp_errors"] = last_cdp_errors(paths)
        info["measurements"] = row.get("resource_forms") or row.get("resource")
    else:
        info["diagnostic"] = diagnostic_of(row)
        info["measurements"] = measurements_of(row)
    return info


def _print_text(info: Mapping[str, Any]) -> None:
    for field in ("key", "status", "failure_class", "origin", "secondary_status", "reason"):
        click.echo(f"{field}: {info.get(field)}")
    for check in info.get("checks") or []:
        click.echo(f"check: {canonical.dumps_str(check)}")
    for error in info.get("last_cdp_errors", []):
        click.echo(f"cdp error: {canonical.dumps_str(error)}")
    if info.get("diagnostic"):
        click.echo(f"diagnostic: {canonical.dumps_str(info['diagnostic'])}")
    measurements = info.get("measurements")
    if isinstance(measurements, Mapping):
        for name, value in sorted(measurements.items()):
            if isinstance(value, Mapping) and "status" in value:
                unit = "bytes" if name.endswith("_bytes") else "ns" if name.endswith("_ns") else ""
                click.echo(f"measurement {name}: {form_text(value, unit)}")
            else:
                click.echo(f"measurement {name}: {value}")
    else:
        click.echo("measurements: unavailable (not recorded for this attempt)")
    for name, path in info["artifacts"].items():
        click.echo(f"artifact {name}: {path}")


@click.command("inspect")
@click.argument("run")
@click.option("--task", help="Task id (browser runs).")
@click.option("--engine", help="Engine (browser runs).")
@click.option(
    "--attempt", type=int, help="Attempt number as its row records it (browser runs count from 1)."
)
@click.option("--key", help="Attempt key (any run; compute runs use this).")
@click.option("--json", "as_json", is_flag=True, help="Canonical JSON on stdout.")
def inspect(
    run: str,
    task: str | None,
    engine: str | None,
    attempt: int | None,
    key: str | None,
    as_json: bool,
) -> None:
    """Show one attempt: status, failure class, origin, checks, errors, measurements, artifacts.

    RUN is a run directory, a run id under ./runs, or latest (the newest run there).

    \b
    Examples:
      metewand inspect runs/base1 --task own_ax_tree --engine chrome --attempt 1
      metewand inspect base1 --key L1/l1.raw_cdp/own_ax_tree/lightpanda/1 --json
    """
    if key is None and (task is None or engine is None or attempt is None):
        click.echo("error: give --key, or --task, --engine and --attempt", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    try:
        data = load_run(resolve_run_dir(run, manifest=True))
    except RunDirError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    # an interleaved calibration's unprofiled twins are rows of the run too (found by their
    # key); --task/--engine/--attempt name the profiled attempt, which comes first
    row = find_row([*data.rows, *data.calibration_twins], key, task, engine, attempt)
    if row is None:
        click.echo("error: no such attempt in this run", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    info = describe(data.path, row)
    if as_json:
        sys.stdout.write(canonical.dumps_str(info) + "\n")
    else:
        _print_text(info)
