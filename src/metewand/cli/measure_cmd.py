"""``metewand measure`` as a click command, built from the option table in ``measure_options``.

The usual command line (options, ``--``, commands) is parsed without click by ``cli.entry``;
this command serves ``--help``, errors, and every other spelling, and both end in
``measure_run.main`` with the same values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from metewand.cli.measure_options import BACKEND_CHOICES, OPTIONS, BadValue, Option

__all__ = ["BACKEND_CHOICES", "measure"]


class _Converted(click.ParamType):
    """A click type that calls the table's converter: one rule for both parsers."""

    def __init__(self, option: Option) -> None:
        assert option.convert is not None
        self.convert_value = option.convert
        self.name = getattr(option.convert, "metavar", "TEXT").lower()

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value  # a default, already converted
        try:
            return self.convert_value(value)
        except BadValue as exc:
            self.fail(str(exc), param, ctx)


def _click_type(option: Option) -> click.ParamType:
    choices = getattr(option.convert, "choices", None)
    return click.Choice(choices) if choices else _Converted(option)


def _decorator(option: Option) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    settings: dict[str, Any] = {"help": option.help, "show_default": option.show_default}
    if option.convert is None:
        settings["is_flag"] = True
        settings["default"] = option.default
    else:
        settings.update(
            type=_click_type(option),
            nargs=option.nargs,
            multiple=option.multiple,
            default=() if option.multiple else option.default,
        )
        if option.metavar:
            settings["metavar"] = option.metavar
    return click.option(*option.decls, option.dest, **settings)


def _with_options(function: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(OPTIONS):
        function = _decorator(option)(function)
    return function


@click.command(context_settings={"ignore_unknown_options": True})
@_with_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def measure(command: tuple[str, ...], **values: Any) -> None:
    """Run COMMAND as a measured subject: wall time, tree CPU, peak memory, PSS, processes.

    \b
    Several commands: separate them with "--" (the first "--" ends metewand's options):
      metewand measure --runs 10 --warmup 2 -- 'sleep 0.05' -- 'sleep 0.1'
    Several commands run interleaved (round by round, each round in a seeded random order) and
    are compared by paired ratios per round; --no-interleave runs them one after the other.
    A command given as one word with spaces or shell syntax runs under sh -c (--shell auto).
    \b
    Examples:
      metewand measure -- python3 -c "print(1)"
      metewand measure --json -- python3 -c "print(1)"
      metewand measure --runs 10 --warmup 2 -- 'sleep 0.05' -- 'sleep 0.1'
      metewand measure --runs 5 --parameter-list n 1,2 -- 'sleep 0.0{n}'
      metewand measure --runs 8 --no-interleave --time-unit microsecond -- true -- /bin/true
      metewand measure --runs 5 --export-json runs.json --export-csv runs.csv -- true
      metewand measure --mark-fifo marks.fifo -- sh -c 'echo a > marks.fifo; echo b > marks.fifo'

    \b
    Statistics: per command the median with a distribution-free 95% interval from two order
    statistics of the runs (none below 6 runs); ratios against the first command are paired
    per round when interleaved (the rounds are the independent units), else a ratio of medians.
    Phases (--mark-fifo PATH): the command writes a phase's name and a newline to PATH when
    the phase begins; CPU and memory are read from the run's group at each mark (no PSS).
    Host telemetry (load, PSI, swap, foreign CPU: what the machine spent beside the measured
    commands, with the top foreign processes by pid and comm) runs beside the runs; a polluted
    host is a warning in the report and in --json and the exports.
    \b
    Exit status, one run: the command's own (128 + N when signal N ended it).
    Repeated runs: 0; 1 when a command exited non-zero (without --ignore-failure).
    127: the command was not found; 126: it could not be executed;
    2: invalid options (an export path that cannot be written is refused before any run);
    3: the requested backend is unavailable here; 130: interrupted
    (Ctrl-C, or SIGTERM during a run: the command's whole tree is killed first).
    One run: the table goes to stderr so the command's stdout stays its own; --json goes to
    stdout. Repeated runs: the commands' output is discarded (--show-output keeps it) and the
    report goes to stdout; on a terminal a progress line with the time left is on stderr.
    """
    from metewand.cli.measure_run import main

    main(values, command)
