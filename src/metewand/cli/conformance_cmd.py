"""``metewand conformance`` and ``metewand reference-cases``: interchange with the Rust metewand."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from metewand.cli import exit_codes

CONFORMANCE_EXAMPLES = """\b
Examples:
  metewand conformance
  metewand conformance --no-runs --details
"""

REFERENCE_EXAMPLES = """\b
Examples:
  metewand reference-cases examples/rust-dialect/metewand.toml
  metewand reference-cases examples/rust-dialect/metewand.toml --problem sum
"""


@click.command(epilog=CONFORMANCE_EXAMPLES)
@click.option(
    "--vectors",
    default="tests/vectors/rust",
    show_default=True,
    type=click.Path(file_okay=False),
    help="The Rust project's fixtures and derived vectors (see SOURCES.md there).",
)
@click.option(
    "--worker",
    default="examples/rust-dialect/workers/sum_worker.py",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The raw fixture worker the worker-protocol runs start.",
)
@click.option("--no-runs", is_flag=True, help="Skip the worker-protocol runs (no process starts).")
@click.option("--details", is_flag=True, help="Also list every vector and its verdict.")
def conformance(vectors: str, worker: str, no_runs: bool, details: bool) -> None:
    """Check every vector of the Rust metewand's fixtures; print the per-family table.

    Exit 0 when every vector agrees, 1 when one differs, 2 when the vectors are not there."""
    from metewand.suites.compute.conformance.core import render
    from metewand.suites.compute.conformance.runner import run

    root = Path(vectors)
    if not (root / "fixtures").is_dir():
        click.echo(f"error: --vectors {vectors}: no fixtures/ directory there", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    outcomes = run(root, Path(worker), runs=not no_runs)
    for line in render(outcomes):
        click.echo(line)
    if details:
        for outcome in outcomes:
            verdict = "same" if outcome.same else f"DIFFERENT: {outcome.detail}"
            click.echo(f"{outcome.family} | {outcome.name} | {verdict}")
    sys.exit(exit_codes.OK if all(o.same for o in outcomes) else exit_codes.BENCHMARK_FAILURES)


@click.command("reference-cases", epilog=REFERENCE_EXAMPLES)
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--problem", default=None, help="Only this problem's contract.")
def reference_cases(manifest: str, problem: str | None) -> None:
    """Run the reference cases of MANIFEST's problem contracts through their evaluators.

    Exit 0 when every case's metrics equal the expected ones, 1 otherwise, 2 for a bad
    manifest, 3 when the evaluator cannot run here."""
    from metewand.suites.compute import definitions_build
    from metewand.suites.compute.manifest import ManifestError
    from metewand.suites.compute.manifest_load import load
    from metewand.suites.compute.plan_expand import build_plan
    from metewand.suites.compute.reference_cases import run_reference_cases
    from metewand.suites.compute.runnable import refusals

    try:
        loaded = load(manifest)
        refused = [line for line in refusals(loaded, build_plan(loaded)) if ".evaluator." in line]
    except ManifestError as exc:
        for line in exc.errors:
            click.echo(f"error: {line}", err=True)
        sys.exit(exc.exit_code)
    if not any(p.contract is not None for p in loaded.problems.values()):
        click.echo(f"error: {manifest}: no problem has a contract file (Rust dialect)", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    for line in refused:
        click.echo(f"error: {line}", err=True)
    if refused:
        sys.exit(exit_codes.ENVIRONMENT_MISSING)
    results = run_reference_cases(loaded, definitions_build.build(loaded), problem)
    for result in results:
        verdict = "ok" if result.ok else "FAILED"
        click.echo(f"{result.problem} case {result.index}: {verdict}: {result.detail}")
    failed = [r for r in results if not r.ok]
    click.echo(f"{len(results) - len(failed)}/{len(results)} reference cases as expected", err=True)
    sys.exit(exit_codes.BENCHMARK_FAILURES if failed or not results else exit_codes.OK)
