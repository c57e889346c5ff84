"""``metewand run`` and ``metewand plan`` for compute benchmarks (``metewand.toml``)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from metewand.cli import exit_codes
from metewand.cli.derived import report_flag, write_derived
from metewand.cli.executor_flags import check_executor, executor_options, print_hosts
from metewand.cli.history_hook import add_to_history, history_flags
from metewand.cli.rundirs import resolve_run_dir
from metewand.runtime import rundir

DEFAULT_MANIFEST = "metewand.toml"

PLAN_EXAMPLES = """\b
Examples:
  metewand plan examples/sorting/metewand.toml
  metewand plan examples/sorting/metewand.toml --json | head -3
  metewand plan examples/sorting/metewand.toml --explain
  metewand plan examples/sorting/metewand.toml --experiment presorted
"""

RUN_EXAMPLES = """\b
Examples:
  metewand run examples/sorting/metewand.toml
  metewand run examples/sorting/metewand.toml --experiment presorted --jobs 2 --run-id sort1
  metewand run examples/sorting/metewand.toml --experiment presorted --run-id sort2 --no-progress
  metewand run examples/sorting/metewand.toml --experiment presorted --run-id sort3 --no-phase-marks
  metewand run --resume sort1            # after Ctrl-C (exit 130); keeps --experiment
  metewand run examples/sorting/metewand.toml --experiment presorted --executor dask --dask-local 2 --run-id sortd
  cd examples/sorting && metewand run --quiet --experiment presorted   # ./metewand.toml
"""


MAX_ATTEMPTS_HELP = "Refuse a plan of more attempts than this (checked before expanding it)."
DEFAULT_MAX_ATTEMPTS = 100_000  # suites.compute.manifest_guard's, not imported for --help


def _max_attempts_option(command: Any) -> Any:
    return click.option(
        "--max-attempts",
        type=click.IntRange(min=1),
        default=DEFAULT_MAX_ATTEMPTS,
        show_default=True,
        help=MAX_ATTEMPTS_HELP,
    )(command)


def _experiment_option(command: Any) -> Any:
    return click.option(
        "--experiment",
        "experiments",
        multiple=True,
        metavar="NAME",
        help="Only this experiment of the manifest (repeat for more); default all. Its attempts "
        "are the ones a whole run plans for it, so its rows compare with a whole run's.",
    )(command)


def _load(
    manifest: str, max_attempts: int = DEFAULT_MAX_ATTEMPTS, experiments: tuple[str, ...] = ()
) -> tuple[Any, Any]:
    """The manifest (narrowed to ``experiments`` when given) and its plan, or every validation
    error and exit 2."""
    from metewand.suites.compute.experiment_select import select
    from metewand.suites.compute.manifest import ManifestError
    from metewand.suites.compute.manifest_load import load
    from metewand.suites.compute.plan_expand import build_plan

    try:
        loaded = select(load(manifest), experiments)
        return loaded, build_plan(loaded, max_attempts)
    except ManifestError as exc:
        for line in exc.errors:
            click.echo(f"error: {line}", err=True)
        sys.exit(exc.exit_code)


@click.command(epilog=PLAN_EXAMPLES)
@click.argument("manifest", default=DEFAULT_MANIFEST, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One canonical JSON line per attempt.")
@click.option(
    "--explain",
    is_flag=True,
    help="Also say which manifest dialect was read, the definition ids and seeds, and what of "
    "the plan cannot run on this host.",
)
@_max_attempts_option
@_experiment_option
def plan(
    manifest: str, as_json: bool, explain: bool, max_attempts: int, experiments: tuple[str, ...]
) -> None:
    """Show the attempts MANIFEST expands to, without running anything.

    MANIFEST may be written in metewand's dialect or in the Rust metewand's."""
    from metewand import canonical

    loaded, expanded = _load(manifest, max_attempts, experiments)
    if explain:
        from metewand.suites.compute.explain import explain as explain_lines

        for line in explain_lines(loaded, expanded):
            click.echo(line, err=as_json)
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


def _recorded(run_dir: Path) -> dict[str, Any]:
    """The data a run's manifest recorded when it started, or the store's error and its exit."""
    from metewand.runtime.store import RunView, StoreError

    try:
        return dict(RunView(run_dir).manifest["data"])
    except StoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)


def _resumed_manifest(run_dir: Path) -> str:
    """The manifest a run was started from (``run --resume RUN`` needs no MANIFEST)."""
    path = _recorded(run_dir).get("manifest_path")
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
    show_default=True,
    help="Seconds between host telemetry samples (0.1 to 3600).",
)
@_max_attempts_option
@_experiment_option
@click.option(
    "--host-foreign-cpu-max",
    type=click.FloatRange(min=0),
    default=0.10,
    show_default=True,
    metavar="CORES",
    help="Pollution gate: CPU used beside the run above this many cores for 3 host samples "
    "in a row trips foreign_cpu_load.",
)
@executor_options("--jobs slots on this machine")
@click.option(
    "--phase-marks/--no-phase-marks",
    default=None,
    help="Mark each attempt's phases (worker start-up, prepare, integrity check, execute, "
    "evaluation) in the row's phases field; default on, or as the resumed run was started "
    "(recorded in the manifest).",
)
@click.option(
    "--ab-baseline",
    default=None,
    metavar="PATH",
    help="Interleaved A/B: run every attempt twice, once with the implementations of the "
    "baseline tree PATH (another checkout's copy of the manifest's directory) and once with "
    "the current ones, back to back on the same dataset instance, in alternating seeded "
    "order; then `metewand compare --ab RUN`.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar or lines; summary only.")
@click.option("--quiet", "-q", is_flag=True, help="Only errors and the run directory.")
@report_flag
@history_flags
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
    experiments: tuple[str, ...],
    executor: str,
    scheduler: str | None,
    dask_local: int | None,
    phase_marks: bool | None,
    ab_baseline: str | None,
    no_report: bool,
    history_path: str | None,
    no_history: bool,
) -> None:
    """Run every attempt of MANIFEST (default metewand.toml) into OUT/RUN_ID/results.jsonl.

    Ctrl-C kills the workers of the attempts in flight, marks the run interrupted and exits
    130; --resume RUN runs what is left (MANIFEST defaults to the one the run started from).
    """
    from metewand.suites.compute import runner

    chosen = check_executor(executor, scheduler, dask_local, jobs is not None)
    # Every path is resolved here, once, against the directory the command was run from.
    out_dir = os.path.abspath(out_dir)
    resume_dir = resolve_run_dir(resume, out_dir, what="--resume") if resume else None
    experiments = _experiments(experiments, resume_dir)
    loaded = _checked_manifest(manifest, resume_dir, out_dir, run_id, max_attempts, experiments)
    ab_baseline = _checked_baseline(loaded, ab_baseline, resume_dir, max_attempts)
    if cache_dir is not None:
        _check_writable_dir(cache_dir, "--cache-dir")
    options = runner.RunOptions(
        out_dir=out_dir,
        run_id=run_id,
        resume=str(resume_dir) if resume_dir else None,
        jobs=jobs,
        cache_dir=os.path.abspath(cache_dir) if cache_dir else None,
        accounting_backend=backend,
        host_sample_interval_s=host_sample_interval_s if host_telemetry == "on" else None,
        host_foreign_cpu_max=host_foreign_cpu_max,
        max_attempts=max_attempts,
        executor=chosen,
        phase_marks=_phase_marks(phase_marks, resume_dir),
        ab_baseline=ab_baseline,
        experiments=experiments,
    )
    summary = _run_or_exit(loaded, options, resume_dir, no_progress, quiet)
    _conclude(
        summary,
        executor,
        quiet,
        no_report,
        lambda: add_to_history(
            summary.run_dir, out_dir, history_path, no_history, _echo_unless(quiet)
        ),
    )
    sys.exit(exit_codes.BENCHMARK_FAILURES if _any_failed(summary.run_dir) else exit_codes.OK)


def _checked_manifest(
    manifest: str | None,
    resume_dir: Path | None,
    out_dir: str,
    run_id: str | None,
    limit: int,
    experiments: tuple[str, ...],
) -> Any:
    """The loaded manifest, once nothing would refuse the run (exit 2 or 3 otherwise)."""
    if manifest is None:
        manifest = _resumed_manifest(resume_dir) if resume_dir else DEFAULT_MANIFEST
    loaded, expanded = _load(
        os.path.abspath(manifest), limit, experiments
    )  # before anything exists
    _refuse_before_running(loaded, expanded, out_dir, run_id if resume_dir is None else None)
    if resume_dir is None:  # a resumed run's dir is already there: --out is not written
        _check_writable_dir(out_dir, "--out")
    return loaded


def _checked_baseline(
    loaded: Any, path: str | None, resume_dir: Path | None, limit: int
) -> str | None:
    """The A/B baseline tree (absolute; a resumed run's own when not given), once its manifest,
    plan and programs check out (exit 2 or 3 otherwise)."""
    from metewand.suites.compute.ab import ab_plan, load_baseline
    from metewand.suites.compute.launch import missing_commands
    from metewand.suites.compute.manifest import ManifestError
    from metewand.suites.compute.plan_expand import build_plan

    if path is None and resume_dir is not None:
        path = _recorded_baseline(resume_dir)
    if path is None:
        return None
    try:
        baseline = load_baseline(loaded.path, path)
        ab_plan(build_plan(loaded, limit), baseline)
    except ManifestError as exc:
        for line in exc.errors:
            click.echo(f"error: {line}", err=True)
        sys.exit(exc.exit_code)
    missing = missing_commands(baseline.manifest, build_plan(baseline.manifest, limit))
    for line in missing:
        click.echo(f"error: --ab-baseline {path}: {line}", err=True)
    if missing:
        sys.exit(exit_codes.ENVIRONMENT_MISSING)
    return baseline.path


def _recorded_baseline(run_dir: Path) -> str | None:
    from metewand.runtime.store import RunView, StoreError

    try:
        ab = RunView(run_dir).manifest["data"].get("ab")
    except StoreError:
        return None  # the resume itself reports the unreadable run
    return ab.get("baseline_tree") if isinstance(ab, dict) else None


def _experiments(given: tuple[str, ...], resume_dir: Path | None) -> tuple[str, ...]:
    """The experiments as given; none given: all for a new run, the recorded selection for a
    resumed one (a resume given another selection is refused by the runner)."""
    if given or resume_dir is None:
        return given
    return tuple(_recorded(resume_dir).get("selected_experiments") or ())


def _phase_marks(flag: bool | None, resume_dir: Path | None) -> bool:
    """The flag as given; unset: on for a new run, as recorded for a resumed one (a resume
    given the other flag is refused by the runner: one run never mixes the two)."""
    if flag is not None:
        return flag
    if resume_dir is None:
        return True
    return bool(_recorded(resume_dir).get("phase_marks", True))


def _run_or_exit(
    loaded: Any, options: Any, resume_dir: Path | None, no_progress: bool, quiet: bool
) -> Any:
    """The run's summary; a refusal, Ctrl-C, a lost cluster or a broken harness exits with the
    outcome's code (``RunOutcome.report``, as ``metewand browser run`` does) and says how to
    resume."""
    from metewand.cli.progress import progress_mode, reporter_factory
    from metewand.runtime.rundir import journal_warnings
    from metewand.suites.compute import runner

    reporter = reporter_factory(progress_mode(no_progress, quiet))
    for line in journal_warnings(resume_dir) if resume_dir else []:
        click.echo(f"warning: {line}", err=True)  # the resume's cleanup skips these lines
    outcome, summary = runner.start_run(loaded.path, options, reporter=reporter)
    code = outcome.report(lambda text: click.echo(text, err=True))
    if summary is None:
        sys.exit(code)
    return summary


def _echo_unless(quiet: bool) -> Any:
    """Echo to stderr; with --quiet only warnings and errors."""

    def echo(text: str) -> None:
        if not quiet or text.startswith(("warning", "error")):
            click.echo(text, err=True)

    return echo


def _conclude(
    summary: Any, executor: str, quiet: bool, no_report: bool, remember: Callable[[], None]
) -> None:
    """Derived files (unless ``no_report``), the run added to the history (``remember``), the
    case table and counts, warnings last (where the user looks)."""
    if not write_derived(summary.run_dir, _echo_unless(quiet), skip=no_report):
        sys.exit(exit_codes.BENCHMARK_FAILURES)
    remember()  # after the derived files: the history hashes the run directory as it stays
    if not quiet:
        _print_case_table(summary.rows)
        click.echo(
            f"{summary.attempts} attempts: {summary.accepted} accepted, {summary.failed} failed"
            + (f", {summary.skipped} already done" if summary.skipped else "")
        )
        if executor == "dask":
            print_hosts(summary.run_dir)
        if any("ab" in row for row in summary.rows):
            click.echo(
                f"interleaved A/B: NEW/BASE from the pairs with "
                f"`metewand compare --ab {summary.run_dir}`"
            )
        _warn_at_end(summary.run_dir)
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


def _refuse_before_running(loaded: Any, expanded: Any, out_dir: str, run_id: str | None) -> None:
    """Conditions that would waste or spoil a run are refused before it exists."""
    from metewand.suites.compute.launch import missing_commands

    if run_id is not None and os.path.lexists(rundir.new_run_dir(out_dir, run_id)):
        click.echo(
            f"error: run {run_id!r} exists in {out_dir}; resume it with --resume {run_id} "
            "or choose another --run-id",
            err=True,
        )
        sys.exit(exit_codes.INVALID_INPUT)
    missing = missing_commands(loaded, expanded)
    for line in missing:
        click.echo(f"error: {line}", err=True)
    if missing:
        sys.exit(exit_codes.ENVIRONMENT_MISSING)


def _warn_at_end(run_dir: str) -> None:
    """Failed attempts by code and a failed pollution gate, where the user looks: last."""
    from metewand.compare import compare_suites  # noqa: F401  (registers the suite kinds)
    from metewand.compare.run_warnings import run_warnings
    from metewand.compare.rundir import load_run

    for line in run_warnings(load_run(run_dir)):
        click.echo(f"warning: {line}", err=True)


def _any_failed(run_dir: str) -> bool:
    """Over every row of the run (a resumed run answers for its earlier sessions too)."""
    from metewand.runtime.store import RunView

    return any(row.get("status") == "failed" for row in RunView(Path(run_dir)).rows())


def _print_case_table(rows: list[dict[str, Any]]) -> None:
    """Per case x implementation: accepted, failures, median timed wall [95% CI], CPU, memory."""
    from rich.table import Table

    from metewand.cli.tables import print_table
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
    print_table(table, stderr=True)
