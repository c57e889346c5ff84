"""``metewand run`` and ``metewand plan`` for compute benchmarks (``metewand.toml``)."""

from __future__ import annotations

import sys
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


def _load_plan(manifest: str) -> Any:
    from metewand.suites.compute.manifest import ManifestError, load
    from metewand.suites.compute.plan import build_plan

    try:
        return build_plan(load(manifest))
    except ManifestError as exc:
        for line in exc.errors:
            click.echo(f"error: {line}", err=True)
        sys.exit(exit_codes.INVALID_INPUT)


@click.command(epilog=PLAN_EXAMPLES)
@click.argument("manifest", default=DEFAULT_MANIFEST, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One canonical JSON line per attempt.")
def plan(manifest: str, as_json: bool) -> None:
    """Show the attempts MANIFEST expands to, without running anything."""
    from metewand import canonical

    expanded = _load_plan(manifest)
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
@click.option("--host-sample-interval-s", type=click.FloatRange(min=0.05), default=1.0)
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
    _load_plan(manifest)  # validation errors before anything is created
    options = runner.RunOptions(
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
