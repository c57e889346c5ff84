"""`metewand status RUN` and `metewand export RUN`: read a run directory, nothing else."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any, NoReturn

import click

from metewand import canonical
from metewand.cli import exit_codes
from metewand.cli.export_target import Target, TargetRefused
from metewand.cli.rundirs import resolve_run_dir
from metewand.compare.results_csv import rows_to_csv
from metewand.runtime.store import RunView, StoreError


def open_run(run: str) -> RunView:
    """RUN is a run directory, or a run id under ./runs."""
    try:
        view = RunView(resolve_run_dir(run))
        view.manifest  # noqa: B018 - refuse an unreadable manifest here, with its name
    except (StoreError, ValueError) as exc:
        _fail(str(exc))
    return view


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    raise SystemExit(exit_codes.INVALID_INPUT)


def run_status(view: RunView) -> dict[str, Any]:
    read = view.read()
    finished = {str(row["key"]) for row in read.rows}
    planned = view.manifest["data"].get("planned_keys")
    unfinished = sorted(set(planned) - finished) if isinstance(planned, list) else None
    count = len(planned) if isinstance(planned, list) else None
    recorded = view.manifest["data"].get("planned_attempts")  # a compute run's plan: a count
    if count is None and isinstance(recorded, int) and not isinstance(recorded, bool):
        count = recorded
    return {
        "run_id": view.run_id,
        "run_dir": str(view.run_dir),
        "state": view.live_state,
        "recorded_state": view.state,
        "rows": len(read.rows),
        "by_status": dict(sorted(Counter(str(r.get("status")) for r in read.rows).items())),
        "finished": len(finished),
        # of the rows, an interleaved calibration's unprofiled twins (browser runs; never scored)
        "calibration_twins": sum(row.get("calibration_twin") is True for row in read.rows),
        "planned": count,
        "unfinished": (
            len(unfinished)
            if unfinished is not None
            else max(0, count - len(finished))
            if count is not None
            else None
        ),
        "unfinished_keys": unfinished,
        "torn_tail_bytes": read.torn_tail_bytes,
    }


@click.command("status")
@click.argument("run")
@click.option("--json", "as_json", is_flag=True, help="Machine output: one canonical JSON object.")
def status(run: str, as_json: bool) -> None:
    """Show the state of run RUN (a run directory or an id under ./runs).

    A run left "running" by a process that is gone (kill -9, power loss) shows as interrupted;
    ``run --resume`` / ``browser run --resume`` continues it.

    \b
    Examples:
      metewand status runs/sort1
      metewand status sort1 --json
      metewand status latest
    """
    try:
        summary = run_status(open_run(run))
    except StoreError as exc:  # a damaged results or manifest line: named, never a traceback
        _fail(str(exc))
    if as_json:
        click.echo(canonical.dumps_str(summary))
        return
    click.echo(f"run       {summary['run_id']}  ({summary['run_dir']})")
    click.echo(f"state     {summary['state']}")
    planned = summary["planned"]
    click.echo(
        f"attempts  {summary['finished']} finished"
        + (
            f" of {planned} planned, {summary['unfinished']} unfinished"
            if planned is not None
            else ""
        )
        + (
            f" ({summary['calibration_twins']} of them unprofiled calibration twins)"
            if summary["calibration_twins"]
            else ""
        )
    )
    for name, count in summary["by_status"].items():
        click.echo(f"  {name:<12} {count}")
    if summary["torn_tail_bytes"]:
        click.echo(f"note      a torn final line ({summary['torn_tail_bytes']} bytes) is ignored")


@click.command("export")
@click.argument("run")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "json", "jsonl"]),
    default="json",
    show_default=True,
    help="json: one array of rows; jsonl: canonical JSON Lines; csv: one row per attempt.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write here, not stdout: a file is replaced whole, a character device or FIFO "
    "written through (never replaced); anything else is refused.",
)
def export(run: str, fmt: str, output: str | None) -> None:
    """Export the attempt rows of run RUN (a run directory or an id under ./runs).

    \b
    Examples:
      metewand export runs/sort1 --format csv -o results.csv
      metewand export sort1 --format json
    """
    target = _export_target(output)
    try:
        rows = open_run(run).rows()
    except StoreError as exc:
        if target is not None:
            target.discard()
        _fail(str(exc))
    if fmt == "csv":
        text = rows_to_csv(rows)
    elif fmt == "jsonl":
        text = "".join(canonical.line(row).decode("utf-8") for row in rows)
    else:
        text = canonical.dumps_str(rows) + "\n"
    if target is None:
        sys.stdout.write(text)
        return
    try:
        target.write(text.encode("utf-8"))
    except TargetRefused as exc:
        _fail(str(exc))


def _export_target(output: str | None) -> Target | None:
    """-o as ``cli.export_target`` writes it: a file replaced whole, a device or FIFO written
    through, never replaced; refused (exit 2) before the run is read when it cannot be."""
    if output is None:
        return None
    try:
        return Target("-o", output)
    except TargetRefused as exc:
        _fail(str(exc))
