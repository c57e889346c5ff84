"""``metewand measure``: run commands as measured subjects and report what they cost.

One command with no repetition option: one run, its table, its exit status passed through.
Any of --runs/--warmup/--min-runs/--max-runs/--max-time/--prepare/--parameter-*/--export-*, or
several commands: repeated runs, each in its own accounting group, with statistics.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from metewand import canonical
from metewand.cli import exit_codes

# The measure modules are imported when a command is measured, so `--help` stays fast; the
# backend names are spelled here (tests/test_cli_help.py checks them against measure.accounting).
BACKEND_CHOICES = ("cgroup2", "cgroup1", "proc")
if TYPE_CHECKING:
    from metewand.measure.forms import Measurement
    from metewand.measure.subject import SubjectReport


def _format_value(name: str, m: Measurement) -> str:
    if m.value is None:
        return "—"
    if name.endswith("_ns"):
        return f"{m.value / 1e6:,.1f} ms"
    if name.endswith("_bytes"):
        return f"{m.value / 2**20:,.1f} MiB"
    return str(m.value)


def _print_table(report: SubjectReport) -> None:
    from rich.console import Console
    from rich.table import Table

    from metewand.measure.subject import MEASUREMENT_FIELDS

    table = Table(title=f"metewand measure ({report.backend})", title_justify="left")
    for column in ("measurement", "value", "status", "source"):
        table.add_column(column)
    for name in MEASUREMENT_FIELDS:
        m = report.measurements[name]
        status = m.status.value + (f" ({m.reason.value})" if m.reason else "")
        table.add_row(name, _format_value(name, m), status, m.source or "")
    console = Console(stderr=True)
    console.print(table)
    ended = f"signal {report.signal}" if report.signal else f"exit status {report.exit_status}"
    console.print(f"command ended with {ended}")
    console.print("quality flags: " + (", ".join(f.value for f in report.quality_flags) or "none"))
    for reason in report.fallback_reasons:
        console.print(f"fallback: {reason}")
    console.print(
        f"sampler: {report.sampler.tick_count} ticks, {report.sampler.pss_sample_count} PSS scans, "
        f"{report.sampler.sampler_cpu_ns / 1e6:.1f} ms CPU"
    )


def _split_commands(words: tuple[str, ...]) -> list[list[str]]:
    """``a b -- c d`` -> [[a, b], [c, d]]: the first ``--`` is click's, later ones separate."""
    groups: list[list[str]] = [[]]
    for word in words:
        if word == "--":
            groups.append([])
        else:
            groups[-1].append(word)
    return [g for g in groups if g]


def _scan_values(scan: tuple[str, str, str] | None, step: str | None) -> list[dict[str, str]]:
    if scan is None:
        if step is not None:
            raise click.BadParameter("--parameter-step-size needs --parameter-scan")
        return []
    name, low_text, high_text = scan
    try:
        low, high = float(low_text), float(high_text)
        increment = float(step) if step is not None else 1.0
    except ValueError:
        raise click.BadParameter(
            f"--parameter-scan {name}: LOW, HIGH and step must be numbers"
        ) from None
    if increment <= 0 or high < low:
        raise click.BadParameter(f"--parameter-scan {name}: need LOW <= HIGH and a step > 0")
    integral = all(float(v).is_integer() for v in (low, high, increment))
    count = int((high - low) / increment + 1e-9) + 1
    values = [low + i * increment for i in range(count)]
    return [{name: str(int(v)) if integral else f"{v:g}"} for v in values]


def _parameters(
    scan: tuple[str, str, str] | None, step: str | None, listed: tuple[str, str] | None
) -> list[dict[str, str]]:
    settings = _scan_values(scan, step)
    if listed is not None:
        if settings:
            raise click.BadParameter("use --parameter-scan or --parameter-list, not both")
        name, values = listed
        settings = [{name: value} for value in values.split(",")]
    return settings


def _single_run(
    words: list[str], shell: str, backend: str, interval_ms: int, pss_every: int, as_json: bool
) -> None:
    from metewand.measure.accounting import AccountingUnavailable
    from metewand.measure.series import to_argv
    from metewand.measure.subject import SubjectStartError, run_measured

    try:
        report = run_measured(
            list(to_argv(words, shell)),
            backend=backend,
            interval_ms=interval_ms,
            pss_every=pss_every,
        )
    except SubjectStartError as exc:
        click.echo(f"metewand measure: {exc}", err=True)
        sys.exit(exc.exit_code)
    except AccountingUnavailable as exc:
        click.echo(f"metewand measure: backend unavailable: {exc}", err=True)
        sys.exit(exit_codes.ENVIRONMENT_MISSING)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the subject was killed, its groups removed
        click.echo("metewand measure: interrupted; the command was killed", err=True)
        sys.exit(exit_codes.INTERRUPTED)
    if as_json:
        sys.stdout.buffer.write(canonical.line(report.to_json()))
        sys.stdout.flush()
    else:
        _print_table(report)
    sys.exit(report.shell_exit_status)


def _progress(command: Any, done: int, run: dict[str, Any]) -> None:
    wall = run.get("wall_time_ns")
    shown = f"{wall / 1e6:.2f} ms" if isinstance(wall, int) else "unavailable"
    click.echo(f"\r  {command.text}: run {done} ({shown})\033[K", nl=False, err=True)


def _series(commands: list[Any], options: Any, quiet: bool) -> tuple[list[Any], dict[str, Any]]:
    from metewand.measure.accounting import AccountingUnavailable
    from metewand.measure.series import CommandFailed, run_all
    from metewand.measure.subject import SubjectStartError

    show = None if quiet or not sys.stderr.isatty() else _progress
    try:
        series, host = run_all(commands, options, show)
    except CommandFailed as exc:
        click.echo(f"metewand measure: {exc}", err=True)
        sys.exit(exit_codes.BENCHMARK_FAILURES)
    except SubjectStartError as exc:
        click.echo(f"metewand measure: {exc}", err=True)
        sys.exit(exc.exit_code)
    except AccountingUnavailable as exc:
        click.echo(f"metewand measure: backend unavailable: {exc}", err=True)
        sys.exit(exit_codes.ENVIRONMENT_MISSING)
    except KeyboardInterrupt:  # the run in flight was killed and its groups removed
        click.echo("metewand measure: interrupted; the command in flight was killed", err=True)
        sys.exit(exit_codes.INTERRUPTED)
    finally:
        if show is not None:
            click.echo("\r\033[K", nl=False, err=True)
    return series, host


def _result(series: list[Any], host: dict[str, Any], options: Any, seed: int) -> dict[str, Any]:
    # numpy is imported only now: a smaller parent forks its runs faster
    from metewand.compare import series_stats

    resamples = 2000
    summaries = [
        series_stats.command_summary(s.command.text, s.runs, resamples, seed) for s in series
    ]
    return {
        "schema": "metewand_measure_series/1",
        "units": {"time": "ns", "memory": "bytes"},
        "bootstrap": {
            "method": "iid_percentile",
            "resamples": resamples,
            "seed": seed,
            "level": 0.95,
        },
        "commands": [
            {
                "command": s.command.text,
                "argv": list(s.command.argv),
                "parameters": s.command.parameters,
                "warmups": s.warmups,
                "runs": s.runs,
            }
            for s in series
        ],
        "summaries": summaries,
        "ratios": series_stats.ratios_to_first(
            [(s.command.text, s.runs) for s in series], resamples, seed
        ),
        "host": host,
        "settings": {
            "runs": options.runs,
            "warmup": options.warmup,
            "min_runs": options.min_runs,
            "max_runs": options.max_runs,
            "max_time_s": options.max_time_s,
            "backend": options.backend,
            "prepare": list(options.prepare) if options.prepare else None,
        },
    }


def _export(
    result: dict[str, Any], json_path: str | None, csv_path: str | None, md_path: str | None
) -> None:
    from metewand.cli import measure_render
    from metewand.runtime.rundir import write_atomic

    for path, make in (
        (json_path, lambda: canonical.dumps(result) + b"\n"),
        (csv_path, lambda: measure_render.report_csv(result).encode("utf-8")),
        (md_path, lambda: measure_render.report_markdown(result).encode("utf-8")),
    ):
        if path:
            write_atomic(path, make())


def _check_exports(*paths: str | None) -> None:
    """An export that cannot be written is refused before anything runs, not after."""
    from pathlib import Path

    for path in paths:
        if path and not Path(path).resolve().parent.is_dir():
            click.echo(f"metewand measure: {path}: no such directory to export into", err=True)
            sys.exit(exit_codes.INVALID_INPUT)


@click.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--runs",
    "-r",
    type=click.IntRange(min=1),
    default=None,
    help="Exactly this many measured runs per command.",
)
@click.option(
    "--warmup",
    "-w",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Unmeasured runs before the measured ones.",
)
@click.option(
    "--min-runs",
    type=click.IntRange(min=2),
    default=None,
    help="Without --runs: at least this many runs (default 10).",
)
@click.option(
    "--max-runs",
    type=click.IntRange(min=1),
    default=None,
    help="Without --runs: at most this many runs.",
)
@click.option(
    "--max-time",
    type=click.FloatRange(min=0),
    default=None,
    help="Without --runs: keep running until this many seconds passed (default 3).",
)
@click.option(
    "--prepare",
    default=None,
    help="Shell command run (unmeasured) before every run, e.g. to drop a cache.",
)
@click.option(
    "--parameter-scan",
    nargs=3,
    default=None,
    metavar="NAME LOW HIGH",
    help="Run each command once per value LOW..HIGH, {NAME} replaced by the value.",
)
@click.option("--parameter-step-size", default=None, help="Step of --parameter-scan (default 1).")
@click.option(
    "--parameter-list",
    nargs=2,
    default=None,
    metavar="NAME A,B,C",
    help="Run each command once per listed value, {NAME} replaced by it.",
)
@click.option(
    "--shell",
    type=click.Choice(["auto", "none", "sh"]),
    default="auto",
    show_default=True,
    help="none: run argv as given; sh: through sh -c; auto: sh -c only for a "
    "command given as one word holding spaces or shell syntax.",
)
@click.option(
    "--ignore-failure", "-i", is_flag=True, help="Keep measuring a command that exits non-zero."
)
@click.option("--show-output", is_flag=True, help="Repeated runs: keep the commands' output.")
@click.option(
    "--export-json",
    type=click.Path(dir_okay=False),
    default=None,
    help="Every run (raw ns/bytes) and every statistic.",
)
@click.option("--export-csv", type=click.Path(dir_okay=False), default=None,
              help="One line per command and statistic.")  # fmt: skip
@click.option("--export-markdown", type=click.Path(dir_okay=False), default=None,
              help="The summary table as Markdown.")  # fmt: skip
@click.option("--seed", type=int, default=20240607, show_default=True, help="Bootstrap seed.")
@click.option(
    "--backend",
    type=click.Choice(["auto", *BACKEND_CHOICES]),
    default="auto",
    show_default=True,
    help="Tree accounting backend; auto tries cgroup2, cgroup1, then /proc and says why.",
)
@click.option("--interval-ms", type=click.IntRange(min=1), default=100, show_default=True,
              help="Milliseconds between samples of the process tree.")  # fmt: skip
@click.option(
    "--pss-every",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Longest gap between PSS scans, in ticks; a rise of the tree's memory or a change "
    "of its members triggers one sooner (cheap counters are read every tick).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one canonical-JSON object on stdout.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def measure(
    runs: int | None,
    warmup: int,
    min_runs: int | None,
    max_runs: int | None,
    max_time: float | None,
    prepare: str | None,
    parameter_scan: tuple[str, str, str] | None,
    parameter_step_size: str | None,
    parameter_list: tuple[str, str] | None,
    shell: str,
    ignore_failure: bool,
    show_output: bool,
    export_json: str | None,
    export_csv: str | None,
    export_markdown: str | None,
    seed: int,
    backend: str,
    interval_ms: int,
    pss_every: int,
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND as a measured subject: wall time, tree CPU, peak memory, PSS, processes.

    \b
    Several commands: separate them with "--" (the first "--" ends metewand's options):
      metewand measure --runs 10 --warmup 2 -- 'sleep 0.05' -- 'sleep 0.1'
    A command given as one word with spaces or shell syntax runs under sh -c (--shell auto).
    \b
    Examples:
      metewand measure -- python3 -c "print(1)"
      metewand measure --json -- python3 -c "print(1)"
      metewand measure --runs 10 --warmup 2 -- 'sleep 0.05' -- 'sleep 0.1'
      metewand measure --runs 5 --parameter-list n 1,2 -- 'sleep 0.0{n}'
      metewand measure --runs 5 --export-json runs.json --export-csv runs.csv -- true

    \b
    Exit status, one run: the command's own (128 + N when signal N ended it).
    Repeated runs: 0; 1 when a command exited non-zero (without --ignore-failure).
    127: the command was not found; 126: it could not be executed;
    2: invalid options; 3: the requested backend is unavailable here; 130: interrupted
    (Ctrl-C, or SIGTERM during a run: the command's whole tree is killed first).
    One run: the table goes to stderr so the command's stdout stays its own; --json goes to
    stdout. Repeated runs: the commands' output is discarded (--show-output keeps it) and the
    report goes to stdout.
    """
    groups = _split_commands(command)
    repeated = (
        len(groups) > 1
        or any(v is not None for v in (runs, min_runs, max_runs, max_time, prepare))
        or warmup > 0
        or any(v is not None for v in (parameter_scan, parameter_list))
        or any(v is not None for v in (export_json, export_csv, export_markdown))
    )
    if not groups:
        click.echo("metewand measure: no command given", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    if not repeated:
        _single_run(groups[0], shell, backend, interval_ms, pss_every, as_json)
    _check_exports(export_json, export_csv, export_markdown)
    from metewand.measure.series import SeriesOptions, build_commands, to_argv

    try:
        settings = _parameters(parameter_scan, parameter_step_size, parameter_list)
    except click.BadParameter as exc:
        click.echo(f"metewand measure: {exc.message}", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    options = SeriesOptions(
        runs=runs,
        warmup=warmup,
        min_runs=min_runs if min_runs is not None else 10,
        max_runs=max_runs,
        max_time_s=max_time if max_time is not None else 3.0,
        prepare=to_argv([prepare], "sh") if prepare else None,
        ignore_failure=ignore_failure,
        backend=backend,
        interval_ms=interval_ms,
        pss_every=pss_every,
        show_output=show_output,
    )
    series, host = _series(build_commands(groups, shell, settings), options, as_json)
    result = _result(series, host, options, seed)
    _export(result, export_json, export_csv, export_markdown)
    if as_json:
        sys.stdout.buffer.write(canonical.line(result))
        sys.stdout.flush()
    else:
        from metewand.cli.measure_render import report_text

        click.echo(report_text(result), nl=False)
