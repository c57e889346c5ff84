"""``metewand measure``: run commands as measured subjects and report what they cost.

One command with no repetition option: one run, its table, its exit status passed through.
Any of --runs/--warmup/--min-runs/--max-runs/--max-time/--prepare/--parameter-*/--export-*, or
several commands: repeated runs, each in its own accounting group, with statistics.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import click

from metewand.cli import exit_codes

# The measure modules are imported when a command is measured, so `--help` stays fast; the
# backend names are spelled here (tests/test_cli_help.py checks them against measure.accounting).
BACKEND_CHOICES = ("cgroup2", "cgroup1", "proc")
if TYPE_CHECKING:
    from metewand.measure.forms import Measurement
    from metewand.measure.spawner import Spawner
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
    from rich.table import Table

    from metewand.cli.tables import console as table_console
    from metewand.cli.tables import unbreakable
    from metewand.measure.subject import MEASUREMENT_FIELDS

    table = Table(title=f"metewand measure ({report.backend})", title_justify="left")
    for column in ("measurement", "value", "status", "source"):
        table.add_column(column)
    for name in MEASUREMENT_FIELDS:
        m = report.measurements[name]
        status = m.status.value + (f" ({m.reason.value})" if m.reason else "")
        table.add_row(name, _format_value(name, m), status, m.source or "")
    console = table_console(stderr=True)
    console.print(unbreakable(table))
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


@contextlib.contextmanager
def _failures_to_exit(in_flight: str) -> Iterator[None]:
    """Every way a measurement can fail, as one line on stderr and the documented exit code."""
    from metewand.errors import MetewandError

    try:
        yield
    except MetewandError as exc:  # each carries its exit code (errors.py)
        _fail(_failure_text(exc), exc.exit_code)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the subject was killed, its groups removed
        _fail(f"interrupted; {in_flight} was killed", exit_codes.INTERRUPTED)


def _failure_text(exc: Exception) -> str:
    # imported here, on the way out: a measurement that does not fail never loads mark_fifo
    from metewand.measure.accounting import AccountingUnavailable
    from metewand.measure.mark_fifo import MarkFifoError

    if isinstance(exc, AccountingUnavailable):
        return f"backend unavailable: {exc}"
    if isinstance(exc, MarkFifoError):
        return f"--mark-fifo {exc}"
    return str(exc)


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"metewand measure: {message}", err=True)
    sys.exit(code)


def _single_run(
    words: list[str], shell: str, options: Any, as_json: bool, spawner: Spawner | None
) -> NoReturn:
    from metewand.measure.series import host_record, start_host, to_argv
    from metewand.measure.subject import run_measured

    marks = None
    if options.mark_fifo:
        from metewand.measure.mark_fifo import MarkReader

        marks = MarkReader(options.mark_fifo)
    with _failures_to_exit("the command"):
        host = start_host(options)
        try:
            report = run_measured(
                list(to_argv(words, shell)),
                backend=options.backend,
                interval_ms=options.interval_ms,
                pss_every=options.pss_every,
                marks=marks,
                spawner=spawner,
            )
        finally:
            host_seen = host_record(host)
    out = report.to_json() | {"host": host_seen}
    if as_json:
        from metewand import canonical  # rfc8785 only when JSON is written

        sys.stdout.buffer.write(canonical.line(out))
        sys.stdout.flush()
    else:
        _print_table(report)
        from metewand.cli import measure_render

        text = measure_render.phases_text(report.phases) + measure_render.host_text(host_seen)
        click.echo(text, nl=False, err=True)
    sys.exit(report.shell_exit_status)


def _progress(command: Any, done: int, run: dict[str, Any]) -> None:
    wall = run.get("wall_time_ns")
    shown = f"{wall / 1e6:.2f} ms" if isinstance(wall, int) else "unavailable"
    click.echo(f"\r  {command.text}: run {done} ({shown})\033[K", nl=False, err=True)


def _series(
    commands: list[Any], options: Any, quiet: bool, spawner: Spawner | None
) -> tuple[list[Any], dict[str, Any]]:
    from metewand.measure.series import run_all

    show = None if quiet or not sys.stderr.isatty() else _progress
    try:
        with _failures_to_exit("the command in flight"):
            return run_all(commands, options, show, spawner)
    finally:
        if show is not None:
            click.echo("\r\033[K", nl=False, err=True)


@contextlib.contextmanager
def _blas_pool_of_one() -> Iterator[None]:
    """While numpy is first imported, OpenBLAS starts one thread instead of a pool: the
    statistics use no BLAS, and the pool's start costs ~30 ms of CPU here. The variable is set
    only if the user did not set it, and removed again at once (no command runs after this, and
    OpenBLAS reads it only when it loads)."""
    if "OPENBLAS_NUM_THREADS" in os.environ or "numpy" in sys.modules:
        yield
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        os.environ.pop("OPENBLAS_NUM_THREADS", None)


def _result(
    series: list[Any], host: dict[str, Any], options: Any, seed: int, spawner: Spawner | None
) -> dict[str, Any]:
    # numpy is imported only now, after the runs: its import is CPU the runs need not share
    with _blas_pool_of_one():
        from metewand.compare import series_stats
    from metewand.measure.spawner import start_method

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
            "mark_fifo": options.mark_fifo,
            "host_sample_interval_s": options.host_interval_s,
            "host_foreign_cpu_max": options.host_foreign_cpu_max,
            "start": start_method(spawner),
        },
    }


def _export(
    result: dict[str, Any], json_path: str | None, csv_path: str | None, md_path: str | None
) -> None:
    from metewand import canonical
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
@click.option(
    "--mark-fifo",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="PATH",
    help="Made a FIFO (if it is not one) that the command writes phase names to, one per "
    "line: each run then has phases (wall, CPU user/system, memory rise, processes); an "
    "empty line ends the current phase.",
)
@click.option("--host-sample-interval-s", type=click.FloatRange(min=0.1, max=3600), default=1.0,
              show_default=True, help="Seconds between host telemetry samples.")  # fmt: skip
@click.option(
    "--host-foreign-cpu-max", type=click.FloatRange(min=0), default=0.10, show_default=True,
    metavar="CORES", help="Pollution gate: CPU used beside the measured commands above this "
    "many cores for 3 host samples in a row trips foreign_cpu_load (a warning).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print one canonical-JSON object on stdout.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def measure(as_json: bool, command: tuple[str, ...], **given: Any) -> None:
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
      metewand measure --mark-fifo marks.fifo -- sh -c 'echo a > marks.fifo; echo b > marks.fifo'

    \b
    Phases (--mark-fifo PATH): the command writes a phase's name and a newline to PATH when
    the phase begins; CPU and memory are read from the run's group at each mark (no PSS).
    Host telemetry (load, PSI, swap, foreign CPU: what the machine spent beside the measured
    commands, with the top foreign processes by pid and comm) runs beside the runs; a polluted
    host is a warning in the report and in --json and the exports.
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
    if not groups:
        _fail("no command given", exit_codes.INVALID_INPUT)
    spawner = _open_spawner()  # first: the server starts while the modules below load
    created_fifo = False
    try:
        options = _options(given)
        created_fifo = _prepare_fifo(options.mark_fifo)
        if not _repeated(groups, given):
            _single_run(groups[0], given["shell"], options, as_json, spawner)
        _measure_series(groups, given, options, as_json, spawner)
    finally:
        if spawner is not None:
            spawner.close()
        if created_fifo:
            _remove(options.mark_fifo)


def _open_spawner() -> Spawner | None:
    from metewand.measure.spawner import open_spawner

    return open_spawner()


def _repeated(groups: list[list[str]], given: dict[str, Any]) -> bool:
    """Several commands or any repetition/export option: a series, else one plain run."""
    series_options = ("runs", "min_runs", "max_runs", "max_time", "prepare", "parameter_scan",
                      "parameter_list", "export_json", "export_csv", "export_markdown")  # fmt: skip
    return (
        len(groups) > 1 or given["warmup"] > 0 or any(given[k] is not None for k in series_options)
    )


def _options(given: dict[str, Any]) -> Any:
    from metewand.measure.series import SeriesOptions, to_argv

    prepare = given["prepare"]
    return SeriesOptions(
        runs=given["runs"],
        warmup=given["warmup"],
        min_runs=given["min_runs"] if given["min_runs"] is not None else 10,
        max_runs=given["max_runs"],
        max_time_s=given["max_time"] if given["max_time"] is not None else 3.0,
        prepare=to_argv([prepare], "sh") if prepare else None,
        ignore_failure=given["ignore_failure"],
        backend=given["backend"],
        interval_ms=given["interval_ms"],
        pss_every=given["pss_every"],
        show_output=given["show_output"],
        host_interval_s=given["host_sample_interval_s"],
        host_foreign_cpu_max=given["host_foreign_cpu_max"],
        mark_fifo=given["mark_fifo"],
    )


def _prepare_fifo(path: str | None) -> bool:
    """Make --mark-fifo's PATH a FIFO before anything runs; True when it was created here."""
    if path is None:
        return False
    from metewand.measure.mark_fifo import MarkFifoError, ensure_fifo

    try:
        return ensure_fifo(path)
    except MarkFifoError as exc:
        _fail(f"--mark-fifo {exc}", exc.exit_code)


def _remove(path: str | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _measure_series(
    groups: list[list[str]],
    given: dict[str, Any],
    options: Any,
    as_json: bool,
    spawner: Spawner | None,
) -> None:
    from metewand.measure.series import build_commands

    exports = (given["export_json"], given["export_csv"], given["export_markdown"])
    _check_exports(*exports)
    try:
        settings = _parameters(
            given["parameter_scan"], given["parameter_step_size"], given["parameter_list"]
        )
    except click.BadParameter as exc:
        _fail(exc.message, exit_codes.INVALID_INPUT)
    commands = build_commands(groups, given["shell"], settings)
    series, host = _series(commands, options, as_json, spawner)
    result = _result(series, host, options, given["seed"], spawner)
    _export(result, *exports)
    if as_json:
        from metewand import canonical

        sys.stdout.buffer.write(canonical.line(result))
        sys.stdout.flush()
    else:
        from metewand.cli.measure_render import report_text

        click.echo(report_text(result), nl=False)
