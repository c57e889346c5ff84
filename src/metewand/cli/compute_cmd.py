"""``metewand run`` and ``metewand plan`` for compute benchmarks (``metewand.toml``)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from metewand.cli import exit_codes

DEFAULT_MANIFEST = "metewand.toml"

PLAN_EXAMPLES = """\b
Examples:
  metewand plan examples/sorting/metewand.toml
  metewand plan examples/sorting/metewand.toml --json | head -3
"""

RUN_EXAMPLES = """\b
Examples:
  metewand run examples/sorting/metewand.toml
  metewand run examples/sorting/metewand.toml --jobs 2 --run-id sort1
  metewand run --resume sort1            # after Ctrl-C (exit 130)
  metewand run metewand.toml --quiet     # no progress, no summary table
"""


MAX_ATTEMPTS_HELP = "Refuse a plan of more attempts than this (checked before expanding it)."


def _max_attempts_option(command: Any) -> Any:
    from metewand.suites.compute.manifest_guard import DEFAULT_MAX_ATTEMPTS

    return click.option(
        "--max-attempts",
        type=click.IntRange(min=1),
        default=DEFAULT_MAX_ATTEMPTS,
        show_default=True,
        help=MAX_ATTEMPTS_HELP,
    )(command)


def _load_plan(manifest: str, max_attempts: int) -> Any:
    from metewand.suites.compute.manifest import ManifestError, load
    from metewand.suites.compute.plan import build_plan

    try:
        return build_plan(load(manifest), max_attempts)
    except ManifestError as exc:
        for line in exc.errors:
            click.echo(f"error: {line}", err=True)
        sys.exit(exit_codes.INVALID_INPUT)


@click.command(epilog=PLAN_EXAMPLES)
@click.argument("manifest", default=DEFAULT_MANIFEST, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One canonical JSON line per attempt.")
@_max_attempts_option
def plan(manifest: str, as_json: bool, max_attempts: int) -> None:
    """Show the attempts MANIFEST expands to, without running anything."""
    from metewand import canonical

    expanded = _load_plan(manifest, max_attempts)
    for attempt in expanded.attempts:
        if as_json:
            click.echo(canonical.dumps_str(attempt.describe()))
        else:
            params = canonical.dumps_str(attempt.dataset.parameters)
            click.echo(f"{attempt.key}  {attempt.role}  dataset={params}")
    configs = expanded.dataset_configs()
    click.echo(
        f"{len(expanded.attempts)} attempts in {len(expanded.units)} worker units, "
        f"{len(configs)} dataset configurations",
        err=as_json,
    )


def _resumed_manifest(resume: str, out_dir: str) -> str:
    """The manifest a run was started from (``run --resume RUN`` needs no MANIFEST)."""
    from metewand.runtime.store import RunView, StoreError

    run_dir = Path(resume) if Path(resume).is_dir() else Path(out_dir) / resume
    try:
        path = RunView(run_dir).manifest["data"].get("manifest_path")
    except StoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    if not isinstance(path, str):
        click.echo(f"error: {run_dir} is not a compute run (no manifest_path)", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    return path


@click.command(epilog=RUN_EXAMPLES)
@click.argument("manifest", required=False, type=click.Path(dir_okay=False))
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Attempts at once.")
@click.option("--run-id", default=None, help="Name of the run directory (default: timestamp).")
@click.option("--out", "out_dir", default="runs", show_default=True, help="Where runs live.")
@click.option("--resume", default=None, help="Resume RUN (id under --out, or a directory).")
@click.option("--cache-dir", default=None, help="Dataset cache (default ~/.cache/metewand).")
@click.option(
    "--backend",
    type=click.Choice(["auto", "cgroup2", "cgroup1", "proc", "none"]),
    default="auto",
    show_default=True,
    help="Resource accounting backend.",
)
@click.option(
    "--host-telemetry",
    type=click.Choice(["on", "off"]),
    default="on",
    show_default=True,
    help="Record host load, memory, swap and PSI beside the run (host_telemetry.jsonl).",
)
@click.option(
    "--host-sample-interval-s",
    type=click.FloatRange(min=0.1, max=3600),
    callback=lambda ctx, param, value: _finite(value, param),
    default=1.0,
    help="Seconds between host samples (0.1 to 3600).",
)
@_max_attempts_option
@click.option(
    "--host-foreign-cpu-max",
    type=click.FloatRange(min=0),
    default=0.10,
    show_default=True,
    metavar="CORES",
    help="Pollution gate: CPU used beside the run above this many cores for 3 host samples "
    "in a row trips foreign_cpu_load.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar or lines; summary only.")
@click.option("--quiet", "-q", is_flag=True, help="Only errors and the run directory.")
def run(
    manifest: str | None,
    jobs: int | None,
    run_id: str | None,
    out_dir: str,
    resume: str | None,
    cache_dir: str | None,
    backend: str,
    host_telemetry: str,
    host_sample_interval_s: float,
    host_foreign_cpu_max: float,
    no_progress: bool,
    quiet: bool,
    max_attempts: int,
) -> None:
    """Run every attempt of MANIFEST (default metewand.toml) into OUT/RUN_ID/results.jsonl.

    Ctrl-C kills the workers of the attempts in flight, marks the run interrupted and exits
    130; --resume RUN runs what is left (MANIFEST defaults to the one the run started from).
    """
    from metewand.cli.progress import progress_mode, reporter_factory
    from metewand.runtime.store import StoreError
    from metewand.suites.compute import runner

    if manifest is None:
        manifest = _resumed_manifest(resume, out_dir) if resume else DEFAULT_MANIFEST
    _load_plan(manifest, max_attempts)  # validation errors before anything is created
    if not (resume and Path(resume).is_dir()):  # a resumed run dir given by path needs no --out
        _check_writable_dir(out_dir, "--out")
    if cache_dir is not None:
        _check_writable_dir(cache_dir, "--cache-dir")
    options = runner.RunOptions(
        max_attempts=max_attempts,
        out_dir=out_dir,
        run_id=run_id,
        resume=resume,
        jobs=jobs,
        cache_dir=cache_dir,
        accounting_backend=backend,
        host_sample_interval_s=host_sample_interval_s if host_telemetry == "on" else None,
        host_foreign_cpu_max=host_foreign_cpu_max,
    )
    reporter = reporter_factory(progress_mode(no_progress, quiet))
    try:
        summary = runner.run(manifest, options, reporter=reporter)
    except StoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    except KeyboardInterrupt:
        click.echo(f"interrupted: resume with --resume {resume or _run_dir(options)}", err=True)
        sys.exit(exit_codes.INTERRUPTED)
    if not quiet:
        _print_case_table(summary.rows)
        click.echo(
            f"{summary.attempts} attempts: {summary.accepted} accepted, {summary.failed} failed"
            + (f", {summary.skipped} already done" if summary.skipped else "")
        )
    click.echo(f"run directory: {summary.run_dir}")


def _finite(value: float, param: Any) -> float:
    if value != value or value in (float("inf"), float("-inf")):  # NaN passes a range check
        raise click.BadParameter(f"{value} is not a finite number", param=param)
    return value


def _check_writable_dir(path: str, flag: str) -> None:
    """``path`` is a directory metewand can write in, or can be created as one."""
    existing = Path(path).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    problem = None
    if not existing.is_dir():
        problem = f"{existing} is not a directory"
    else:
        try:  # a real probe: root passes every access() check, a read-only or kernel fs does not
            os.rmdir(tempfile.mkdtemp(prefix=".metewand-probe-", dir=existing))
        except OSError as exc:
            problem = f"{existing} is not writable ({exc.strerror})"
    if problem:
        click.echo(f"error: {flag} {path}: {problem}", err=True)
        sys.exit(exit_codes.INVALID_INPUT)


def _print_case_table(rows: list[dict[str, Any]]) -> None:
    """Per case x implementation: accepted, failures, median timed wall [95% CI], CPU, memory."""
    from rich.console import Console
    from rich.table import Table

    from metewand.compare.case_text import SHOWN_METRICS, terminal_rows
    from metewand.compare.cases import case_statistics

    stats = case_statistics(rows)
    if not stats["cases"]:
        return
    table = Table(title="per case x implementation: median (bootstrap 95% CI)")
    for column in ("case", "implementation", "ok", "failures", "timed wall", "CPU", "peak RSS"):
        table.add_column(column)
    for row in terminal_rows(stats, SHOWN_METRICS):
        table.add_row(*row)
    Console(stderr=True).print(table)


def _run_dir(options: Any) -> str:
    return str(Path(options.out_dir) / options.run_id) if options.run_id else "RUN"
