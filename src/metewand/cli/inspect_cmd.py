"""``metewand inspect RUN``: one attempt in full (status, checks, errors, measurements, artifacts)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import click

from metewand import canonical
from metewand.cli import exit_codes
from metewand.cli.inspect_select import (
    ComputeSelection,
    SelectionError,
    select_compute,
    selectors_of,
)
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
    """What ``inspect`` shows of one row: the fields its suite has (none invented as null)."""
    paths = _artifact_paths(run_dir, row)
    if "engine" in row:
        return {
            "key": row.get("key"),
            "status": row.get("status", row.get("outcome")),
            "failure_class": row.get("failure_class"),
            "origin": row.get("origin"),
            "secondary_status": row.get("secondary_status"),
            "reason": row.get("reason"),
            "duration_ms": row.get("duration_ms"),
            "checks": row.get("checks"),
            "artifacts": paths,
            "last_cdp_errors": last_cdp_errors(paths),
            "measurements": row.get("resource_forms") or row.get("resource"),
        }
    from metewand.compare.cases import case_label, case_of, implementation_label  # numpy: lazily

    return {
        "key": row.get("key"),
        "status": row.get("status"),
        "code": row.get("code"),
        "message": row.get("message"),
        "implementation": implementation_label(row),
        "case": case_label(case_of(row)),
        "repetition": row.get("repetition"),
        "attempt": row.get("attempt"),
        "role": row.get("role"),
        "select_with": selectors_of(row),
        "artifacts": paths,
        "diagnostic": diagnostic_of(row),
        "measurements": measurements_of(row),
    }


HEAD_FIELDS = (
    "key",
    "status",
    "failure_class",
    "origin",
    "secondary_status",
    "reason",
    "code",
    "message",
    "implementation",
    "case",
    "repetition",
    "attempt",
    "role",
    "select_with",
)


def _value_text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def _print_text(info: Mapping[str, Any]) -> None:
    """Fields this attempt does not have (a passing attempt's failure class) are left out."""
    for field in HEAD_FIELDS:
        if info.get(field) not in (None, ""):
            click.echo(f"{field}: {_value_text(info[field])}")
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
            elif value is not None:
                click.echo(f"measurement {name}: {_value_text(value)}")
    else:
        click.echo("measurements: unavailable (not recorded for this attempt)")
    for name, path in info["artifacts"].items():
        click.echo(f"artifact {name}: {path}")


def _compute_row(rows: list[dict[str, Any]], chosen: ComputeSelection) -> Mapping[str, Any]:
    try:
        return select_compute(rows, chosen)
    except SelectionError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)


def _refuse(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(exit_codes.INVALID_INPUT)


@click.command("inspect")
@click.argument("run")
@click.option("--task", help="Task id (browser runs).")
@click.option("--engine", help="Engine (browser runs).")
@click.option(
    "--attempt",
    type=int,
    help="Browser runs: the attempt number as its row records it (from 1). Compute runs: the "
    "retry index (from 0).",
)
@click.option("--implementation", help="Implementation name (compute runs).")
@click.option(
    "--case",
    "cases",
    multiple=True,
    metavar="TEXT",
    help="Compute runs: the case as the run's table shows it ('scaling: distribution=uniform, "
    "size=20000') or part of it ('size=20000'); repeatable.",
)
@click.option(
    "--repetition", type=int, help="Repetition index (compute runs, from 0, as in the key's rN)."
)
@click.option("--warmup", is_flag=True, help="Compute runs: a warm-up attempt, not a measured one.")
@click.option("--key", help="Attempt key (any run).")
@click.option("--json", "as_json", is_flag=True, help="Canonical JSON on stdout.")
def inspect(
    run: str,
    task: str | None,
    engine: str | None,
    attempt: int | None,
    implementation: str | None,
    cases: tuple[str, ...],
    repetition: int | None,
    warmup: bool,
    key: str | None,
    as_json: bool,
) -> None:
    """Show one attempt: status, failure class, origin, checks, errors, measurements, artifacts.

    RUN is a run directory, a run id under ./runs, or latest (the newest run there). Name the
    attempt by --key, by --task/--engine/--attempt (browser runs), or by any of
    --implementation/--case/--repetition/--attempt that leave one attempt (compute runs; a
    selection matching several lists each with the selectors that pick it).

    \b
    Examples:
      metewand inspect runs/base1 --task own_ax_tree --engine chrome --attempt 1
      metewand inspect base1 --key L1/l1.raw_cdp/own_ax_tree/lightpanda/1 --json
      metewand inspect sort1 --implementation c-mergesort --case 'presorted: swaps=200' --repetition 1
    """
    chosen = ComputeSelection(implementation, cases, repetition, attempt, warmup)
    browser_given = task is not None or engine is not None
    if key is None and not browser_given and not chosen.given():
        _refuse(
            "give --key, --task/--engine/--attempt (browser runs), or "
            "--implementation/--case/--repetition (compute runs)"
        )
    try:
        data = load_run(resolve_run_dir(run, manifest=True))
    except RunDirError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    if key is None and data.kind == "compute":
        if browser_given:
            _refuse(
                "--task/--engine select browser attempts; this is a compute run "
                "(use --implementation, --case, --repetition)"
            )
        row: Mapping[str, Any] | None = _compute_row(data.rows, chosen)
    else:
        if key is None and (task is None or engine is None or attempt is None):
            _refuse("give --key, or --task, --engine and --attempt")
        # an interleaved calibration's unprofiled twins are rows of the run too (found by their
        # key); --task/--engine/--attempt name the profiled attempt, which comes first
        row = find_row([*data.rows, *data.calibration_twins], key, task, engine, attempt)
    if row is None:
        _refuse("no such attempt in this run")
    info = describe(data.path, row)
    if as_json:
        sys.stdout.write(canonical.dumps_str(info) + "\n")
    else:
        _print_text(info)
