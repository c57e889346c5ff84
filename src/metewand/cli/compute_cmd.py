"""``metewand run`` and ``metewand plan`` for compute benchmarks (``metewand.toml``)."""

from __future__ import annotations

import sys
from typing import Any

import click

from metewand.cli import exit_codes

DEFAULT_MANIFEST = "metewand.toml"


def _load_plan(manifest: str) -> Any:
    from metewand.suites.compute.manifest import ManifestError, load
    from metewand.suites.compute.plan import build_plan

    try:
        return build_plan(load(manifest))
    except ManifestError as exc:
        for line in exc.errors:
            click.echo(f"error: {line}", err=True)
        sys.exit(exit_codes.INVALID_INPUT)


@click.command()
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


def _progress(row: dict[str, Any]) -> None:
    timing = (row.get("observation") or {}).get("timing") or {}
    wall = timing.get("timed_wall_time_ns")
    shown = f"{wall / 1e6:9.2f} ms" if isinstance(wall, int) else "        -   "
    code = f"  {row['code']}: {row['message']}" if row.get("code") else ""
    click.echo(f"{row['status']:8s} {shown}  {row['key']}{code}", err=True)


@click.command()
@click.argument("manifest", default=DEFAULT_MANIFEST, type=click.Path(dir_okay=False))
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
def run(
    manifest: str,
    jobs: int | None,
    run_id: str | None,
    out_dir: str,
    resume: str | None,
    cache_dir: str | None,
    backend: str,
) -> None:
    """Run every attempt of MANIFEST and write rows to OUT/RUN_ID/results.jsonl."""
    from metewand.runtime.store import StoreError
    from metewand.suites.compute import runner

    _load_plan(manifest)  # validation errors before anything is created
    options = runner.RunOptions(
        out_dir=out_dir,
        run_id=run_id,
        resume=resume,
        jobs=jobs,
        cache_dir=cache_dir,
        accounting_backend=backend,
    )
    try:
        summary = runner.run(manifest, options, progress=_progress)
    except StoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    except KeyboardInterrupt:
        click.echo("interrupted: resume with --resume", err=True)
        sys.exit(exit_codes.INTERRUPTED)
    click.echo(
        f"{summary.attempts} attempts: {summary.accepted} accepted, {summary.failed} failed"
        + (f", {summary.skipped} already done" if summary.skipped else "")
    )
    click.echo(f"run directory: {summary.run_dir}")
