"""What ``metewand measure`` does with its parsed options (from click or ``measure_options``).

One command with no repetition option: one run, its table, its exit status passed through.
Any of --runs/--warmup/--min-runs/--max-runs/--max-time/--setup/--prepare/--cleanup/
--parameter-*/--export-*, or several commands: repeated runs, each in its own accounting group,
with statistics. Every check of the options, export paths included, is made before anything
runs. Nothing here imports click or numpy: measure's own start-up is what hyperfine is
compared against (benchmarks/measure_vs_hyperfine.py).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from metewand.cli.measure_options import MAX_RUNS_CAP
from metewand.errors import INTERRUPTED, INVALID_INPUT, MetewandError

if TYPE_CHECKING:
    from metewand.cli.export_target import Target
    from metewand.measure.series import Command, Outcome, SeriesOptions
    from metewand.measure.spawner import Spawner

SERIES_OPTIONS = (
    "runs",
    "min_runs",
    "max_runs",
    "max_time",
    "parameter_scan",
    "parameter_list",
    "export_json",
    "export_csv",
    "export_markdown",
)
HELPER_OPTIONS = ("setup", "prepare", "cleanup")
EXPORTS = {
    "--export-json": "export_json",
    "--export-csv": "export_csv",
    "--export-markdown": "export_markdown",
}


def fail(message: str, code: int) -> NoReturn:
    sys.stderr.write(f"metewand measure: {message}\n")
    sys.stderr.flush()
    sys.exit(code)


def split_commands(words: tuple[str, ...] | list[str]) -> list[list[str]]:
    """``a b -- c d`` -> [[a, b], [c, d]]: the first ``--`` is the parser's, later ones separate."""
    groups: list[list[str]] = [[]]
    for word in words:
        if word == "--":
            groups.append([])
        else:
            groups[-1].append(word)
    return [g for g in groups if g]


def main(values: dict[str, Any], words: tuple[str, ...] | list[str]) -> None:
    """Run the measurement ``values`` (by option dest) describe on the command ``words``."""
    groups = split_commands(words)
    if not groups:
        fail("no command given", INVALID_INPUT)
    spawner = _open_spawner()  # first: the server starts while the modules below load
    created_fifo = False
    targets: dict[str, Target] = {}
    try:
        _check_flags(values, groups)
        from metewand.measure import watchdog

        # every measurement makes groups or starts processes, so it has a watchdog; started
        # now, its interpreter starts while measure loads its modules (a series waits for it
        # before its first run: measure.series)
        watchdog.start()
        created_fifo = _prepare_fifo(values["mark_fifo"])
        if not _repeated(groups, values):
            _single_run(groups[0], values, spawner)
        targets = _open_exports(values)
        _measure_series(groups, values, targets, spawner)
    finally:
        for target in targets.values():
            target.discard()
        if spawner is not None:
            spawner.close()
        if created_fifo:
            with contextlib.suppress(OSError):
                os.unlink(values["mark_fifo"])


def _open_spawner() -> Spawner | None:
    from metewand.measure.spawner import open_spawner

    return open_spawner()


def _repeated(groups: list[list[str]], values: dict[str, Any]) -> bool:
    """Several commands or any repetition, helper or export option: a series, else one run."""
    return (
        len(groups) > 1
        or values["warmup"] > 0
        or any(values[k] is not None for k in SERIES_OPTIONS)
        or any(values[k] for k in HELPER_OPTIONS)
    )


def _check_flags(values: dict[str, Any], groups: list[list[str]]) -> None:
    """What the parser alone cannot see: counts that must match the commands."""
    if values["pretty"] and not values["as_json"]:
        fail("--pretty formats --json; give both", INVALID_INPUT)
    if len(values["command_name"]) > len(groups):
        fail(
            f"{len(values['command_name'])} --command-name for {len(groups)} command(s)",
            INVALID_INPUT,
        )
    for role in HELPER_OPTIONS:
        given = len(values[role])
        if given > 1 and given != len(groups):
            fail(
                f"--{role} given {given} times for {len(groups)} command(s): give it once "
                "(for every command) or once per command",
                INVALID_INPUT,
            )


def _open_exports(values: dict[str, Any]) -> dict[str, Target]:
    """Every export path looked at, and refused if it cannot be written, before any run."""
    if not any(values[dest] for dest in EXPORTS.values()):
        return {}
    from metewand.cli.export_target import open_targets

    with _failures_to_exit("nothing"):
        return open_targets({option: values[dest] for option, dest in EXPORTS.items()})


def _prepare_fifo(path: str | None) -> bool:
    """Make --mark-fifo's PATH a FIFO before anything runs; True when it was created here."""
    if path is None:
        return False
    from metewand.measure.mark_fifo import MarkFifoError, ensure_fifo

    try:
        return ensure_fifo(path)
    except MarkFifoError as exc:
        fail(f"--mark-fifo {exc}", exc.exit_code)


@contextlib.contextmanager
def _failures_to_exit(in_flight: str) -> Iterator[None]:
    """Every way a measurement can fail, as one line on stderr and the documented exit code."""
    try:
        yield
    except MetewandError as exc:  # each carries its exit code (errors.py)
        fail(_failure_text(exc), exc.exit_code)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the subject was killed, its groups removed
        fail(f"interrupted; {in_flight} was killed", INTERRUPTED)


def _failure_text(exc: Exception) -> str:
    # imported here, on the way out: a measurement that does not fail never loads mark_fifo
    from metewand.measure.accounting import AccountingUnavailable
    from metewand.measure.mark_fifo import MarkFifoError

    if isinstance(exc, AccountingUnavailable):
        return f"backend unavailable: {exc}"
    if isinstance(exc, MarkFifoError):
        return f"--mark-fifo {exc}"
    return str(exc)


def _options(values: dict[str, Any], interleave: bool) -> SeriesOptions:
    from metewand.measure.series import SeriesOptions

    return SeriesOptions(
        runs=values["runs"],
        warmup=values["warmup"],
        min_runs=values["min_runs"] if values["min_runs"] is not None else 10,
        max_runs=values["max_runs"] if values["max_runs"] is not None else MAX_RUNS_CAP,
        max_time_s=values["max_time"] if values["max_time"] is not None else 3.0,
        ignore_failure=values["ignore_failure"],
        backend=values["backend"],
        interval_ms=values["interval_ms"],
        pss_every=values["pss_every"],
        show_output=values["show_output"],
        host_interval_s=values["host_sample_interval_s"],
        host_foreign_cpu_max=values["host_foreign_cpu_max"],
        mark_fifo=values["mark_fifo"],
        mark_limit=values["mark_limit"],
        interleave=interleave,
        seed=values["seed"],
    )


def _single_run(words: list[str], values: dict[str, Any], spawner: Spawner | None) -> NoReturn:
    from metewand.cli import measure_render
    from metewand.measure.series import host_record, start_host, to_argv
    from metewand.measure.subject import run_measured

    options = _options(values, interleave=False)
    marks = None
    if options.mark_fifo:
        from metewand.measure.mark_fifo import MarkReader

        marks = MarkReader(options.mark_fifo, options.mark_limit)
    with _failures_to_exit("the command"):
        host = start_host(options)
        try:
            report = run_measured(
                list(to_argv(words, values["shell"])),
                backend=options.backend,
                interval_ms=options.interval_ms,
                pss_every=options.pss_every,
                marks=marks,
                spawner=spawner,
            )
        finally:
            host_seen = host_record(host)
    out = report.to_json() | {"host": host_seen}
    name = values["command_name"][0] if values["command_name"] else None
    if name is not None:
        out["command_name"] = name
    if values["as_json"]:
        _write_json(out, values["pretty"])
    else:
        sys.stderr.write(measure_render.single_run_text(out, values["time_unit"]))
        sys.stderr.flush()
    sys.exit(report.shell_exit_status)


def _write_json(result: dict[str, Any], pretty: bool) -> None:
    if pretty:
        import json

        sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    else:
        from metewand import canonical  # rfc8785 only when canonical JSON is written

        sys.stdout.buffer.write(canonical.line(result))
    sys.stdout.flush()


def _commands(groups: list[list[str]], values: dict[str, Any]) -> list[Command]:
    from metewand.cli.measure_params import parameters, planned_runs
    from metewand.measure.series import Helpers, build_commands

    try:
        settings = parameters(
            values["parameter_scan"],
            values["parameter_step_size"],
            values["parameter_list"],
            len(groups),
        )
        helpers = Helpers(values["setup"], values["prepare"], values["cleanup"])
        commands = build_commands(
            groups, values["shell"], settings, values["command_name"], helpers
        )
        planned_runs(len(commands), values)
    except ValueError as exc:
        fail(str(exc), INVALID_INPUT)
    return commands


def _measure_series(
    groups: list[list[str]],
    values: dict[str, Any],
    targets: dict[str, Target],
    spawner: Spawner | None,
) -> None:
    from metewand.cli.measure_progress import Progress
    from metewand.measure.series import run_all

    commands = _commands(groups, values)
    interleave = values["interleave"] if values["interleave"] is not None else len(commands) > 1
    options = _options(values, interleave)
    progress = Progress.on_terminal(commands, options)
    try:
        with _failures_to_exit("the command in flight"):
            outcome = run_all(commands, options, progress.on_run if progress else None, spawner)
    finally:
        if progress is not None:
            progress.clear()
    result = _result(outcome, options, values, spawner)
    failed = _export(result, targets, values["time_unit"])
    if values["as_json"]:
        _write_json(result, values["pretty"])
    else:
        from metewand.cli.measure_render import report_text

        sys.stdout.write(report_text(result, values["time_unit"]))
        sys.stdout.flush()
    if failed:
        fail("; ".join(failed), INVALID_INPUT)


def _result(
    outcome: Outcome, options: SeriesOptions, values: dict[str, Any], spawner: Spawner | None
) -> dict[str, Any]:
    from metewand.cli import measure_stats
    from metewand.measure.spawner import start_method

    series = outcome.series
    paired = outcome.design == "interleaved"
    return {
        "schema": "metewand_measure_series/2",
        "units": {"time": "ns", "memory": "bytes"},
        "statistics": measure_stats.METHOD,
        "design": outcome.design,
        "rounds": outcome.rounds,
        "commands": [_command_record(s) for s in series],
        "summaries": [
            measure_stats.command_summary(s.command.text, s.runs) | {"name": s.command.name}
            for s in series
        ],
        "ratios": measure_stats.ratios_to_first([(s.command.text, s.runs) for s in series], paired),
        "host": outcome.host,
        "settings": _settings(options, values, spawner, start_method),
    }


def _command_record(series: Any) -> dict[str, Any]:
    command = series.command
    return {
        "command": command.text,
        "name": command.name,
        "argv": list(command.argv),
        "parameters": dict(command.parameters),
        "setup": list(command.setup) if command.setup else None,
        "prepare": list(command.prepare) if command.prepare else None,
        "cleanup": list(command.cleanup) if command.cleanup else None,
        "warmups": series.warmups,
        "runs": series.runs,
    }


def _settings(
    options: SeriesOptions, values: dict[str, Any], spawner: Spawner | None, start_method: Any
) -> dict[str, Any]:
    return {
        "runs": options.runs,
        "warmup": options.warmup,
        "min_runs": options.min_runs,
        "max_runs": options.max_runs,
        "max_time_s": options.max_time_s,
        "interleave": options.interleave,
        "seed": options.seed,
        "backend": options.backend,
        "mark_fifo": options.mark_fifo,
        "mark_limit": options.mark_limit if options.mark_fifo else None,
        "host_sample_interval_s": options.host_interval_s,
        "host_foreign_cpu_max": options.host_foreign_cpu_max,
        "time_unit": values["time_unit"],
        "start": start_method(spawner),
    }


def _export(result: dict[str, Any], targets: dict[str, Target], unit: str) -> list[str]:
    """Write each export; what could not be written, as messages (the rest is written)."""
    if not targets:
        return []
    from metewand import canonical
    from metewand.cli import measure_render
    from metewand.cli.export_target import TargetRefused

    makers = {
        "--export-json": lambda: canonical.dumps(result) + b"\n",
        "--export-csv": lambda: measure_render.report_csv(result).encode("utf-8"),
        "--export-markdown": lambda: measure_render.report_markdown(result, unit).encode("utf-8"),
    }
    failed = []
    for option, target in targets.items():
        try:
            target.write(makers[option]())
        except TargetRefused as exc:
            failed.append(str(exc))
    return failed
