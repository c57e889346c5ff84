"""The options of ``metewand measure``, written once as data, and a parser that needs no click.

``measure`` is timed against hyperfine: loading click costs ~20-30 ms of CPU before anything is
measured. The table below is the one definition: ``cli.measure_cmd`` builds the click command
from it (for ``--help``, errors, and any command line the light parser leaves alone), and
``parse`` reads the common shape — options, then ``--``, then the commands — with the very same
converters. ``parse`` returns None for anything else (``--help``, an unknown or malformed option,
a bad value, no ``--``): click then parses the line and says what is wrong, so there is one
behaviour and one set of messages (``tests/test_measure_options.py`` holds both parsers to
the same values on a list of command lines).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

BACKEND_CHOICES = ("cgroup2", "cgroup1", "proc")  # measure.accounting.BACKENDS (test_cli_help)
TIME_UNITS = ("auto", "microsecond", "millisecond", "second")
DEFAULT_MARK_LIMIT = 10_000
MAX_RUNS_CAP = 100_000  # the compute planner's attempt limit: more runs are refused
# one run's planned commands at most (parameter values x commands), as the planner caps attempts
MAX_COMMANDS = 10_000


class BadValue(ValueError):
    """A value an option does not accept; the message says why (click shows it)."""


Convert = Callable[[str], Any]


def _in_range(value: Any, low: Any, high: Any) -> Any:
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    if low is not None and value < low:
        raise BadValue(f"{shown} is not in the range x>={low}.")
    if high is not None and value > high:
        raise BadValue(f"{shown} is not in the range x<={high}.")
    return value


def integer(low: int | None = None, high: int | None = None) -> Convert:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise BadValue(f"{text!r} is not a valid integer.") from None
        return _in_range(value, low, high)  # type: ignore[no-any-return]

    convert.metavar = "INTEGER"  # type: ignore[attr-defined]
    return convert


def number(low: float | None = None, high: float | None = None) -> Convert:
    """A finite float (nan and inf are refused: they are no duration or count)."""

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise BadValue(f"{text!r} is not a valid number.") from None
        if not math.isfinite(value):
            raise BadValue(f"{text!r} is not a finite number.")
        return _in_range(value, low, high)  # type: ignore[no-any-return]

    convert.metavar = "FLOAT"  # type: ignore[attr-defined]
    return convert


def choice(*choices: str) -> Convert:
    def convert(text: str) -> str:
        if text not in choices:
            raise BadValue(f"{text!r} is not one of {', '.join(map(repr, choices))}.")
        return text

    convert.choices = choices  # type: ignore[attr-defined]
    return convert


def text(value: str) -> str:
    return value


def output_path(value: str) -> str:
    """A file to write: not empty; what it names is checked before the runs (cli.export_target)."""
    if not value:
        raise BadValue("an empty path names no file.")
    return value


class Option(NamedTuple):  # not a dataclass: ~0.4 ms less start-up each
    decls: tuple[str, ...]  # "--runs", "-r"; a flag pair as "--interleave/--no-interleave"
    dest: str
    help: str
    convert: Convert | None = text  # None: a flag
    default: Any = None
    nargs: int = 1
    multiple: bool = False
    metavar: str | None = None
    show_default: bool = False


OPTIONS: tuple[Option, ...] = (
    Option(
        ("--runs", "-r"),
        "runs",
        f"Exactly this many measured runs per command (at most {MAX_RUNS_CAP:,}).",
        integer(1, MAX_RUNS_CAP),
    ),
    Option(
        ("--warmup", "-w"),
        "warmup",
        "Unmeasured runs of each command before the measured ones.",
        integer(0, MAX_RUNS_CAP),
        default=0,
        show_default=True,
    ),
    Option(
        ("--min-runs",),
        "min_runs",
        "Without --runs: at least this many runs (default 10).",
        integer(2, MAX_RUNS_CAP),
    ),
    Option(
        ("--max-runs",),
        "max_runs",
        "Without --runs: at most this many runs.",
        integer(1, MAX_RUNS_CAP),
    ),
    Option(
        ("--max-time",),
        "max_time",
        "Without --runs: keep running until this many seconds passed per command (default 3).",
        number(0),
    ),
    Option(
        ("--interleave/--no-interleave",),
        "interleave",
        "Several commands: run them in "
        "rounds (each round runs every command once, in a seeded random order) and report "
        "paired ratios per round [default when several commands]; --no-interleave runs "
        "each command's runs one after the other.",
        None,
    ),
    Option(
        ("--command-name",),
        "command_name",
        "A name for the command (given once per command, in order), shown instead of its text.",
        multiple=True,
        metavar="NAME",
    ),
    Option(
        ("--setup",),
        "setup",
        "Shell command run (unmeasured) once before a command's "
        "runs; given once: for every command, once per command: in order.",
        multiple=True,
        metavar="CMD",
    ),
    Option(
        ("--prepare",),
        "prepare",
        "Shell command run (unmeasured) before every run, e.g. to "
        "drop a cache; given once or once per command, as --setup.",
        multiple=True,
        metavar="CMD",
    ),
    Option(
        ("--cleanup",),
        "cleanup",
        "Shell command run (unmeasured) once after a command's "
        "runs; given once or once per command, as --setup.",
        multiple=True,
        metavar="CMD",
    ),
    Option(
        ("--parameter-scan",),
        "parameter_scan",
        "Run each command once per value LOW..HIGH, {NAME} replaced by the value.",
        nargs=3,
        metavar="NAME LOW HIGH",
    ),
    Option(
        ("--parameter-step-size",),
        "parameter_step_size",
        "Step of --parameter-scan (default 1).",
        metavar="STEP",
    ),
    Option(
        ("--parameter-list",),
        "parameter_list",
        "Run each command once per listed value, {NAME} replaced by it.",
        nargs=2,
        metavar="NAME A,B,C",
    ),
    Option(
        ("--shell",),
        "shell",
        "none: run argv as given; sh: through sh -c; auto: sh -c only "
        "for a command given as one word holding spaces or shell syntax.",
        choice("auto", "none", "sh"),
        default="auto",
        show_default=True,
    ),
    Option(
        ("--ignore-failure", "-i"),
        "ignore_failure",
        "Keep measuring a command that exits non-zero.",
        None,
        default=False,
    ),
    Option(
        ("--show-output",),
        "show_output",
        "Repeated runs: keep the commands' output.",
        None,
        default=False,
    ),
    Option(
        ("--time-unit",),
        "time_unit",
        "Unit of times in the terminal and Markdown (auto: "
        "per value); --json and the other exports keep integer ns.",
        choice(*TIME_UNITS),
        default="auto",
        show_default=True,
    ),
    Option(
        ("--export-json",),
        "export_json",
        "Every run (raw ns/bytes) and every statistic.",
        output_path,
        metavar="PATH",
    ),
    Option(
        ("--export-csv",),
        "export_csv",
        "One line per command and statistic.",
        output_path,
        metavar="PATH",
    ),
    Option(
        ("--export-markdown",),
        "export_markdown",
        "The summary table as Markdown.",
        output_path,
        metavar="PATH",
    ),
    Option(
        ("--seed",),
        "seed",
        "Seed of the interleaved rounds' random order.",
        integer(),
        default=20240607,
        show_default=True,
    ),
    Option(
        ("--backend",),
        "backend",
        "Tree accounting backend; auto tries cgroup2, cgroup1, then /proc and says why.",
        choice("auto", *BACKEND_CHOICES),
        default="auto",
        show_default=True,
    ),
    Option(
        ("--interval-ms",),
        "interval_ms",
        "Milliseconds between samples of the process tree.",
        integer(1, 3_600_000),
        default=100,
        show_default=True,
    ),
    Option(
        ("--pss-every",),
        "pss_every",
        "Longest gap between PSS scans, in ticks; a rise of "
        "the tree's memory or a change of its members triggers one sooner (cheap counters "
        "are read every tick).",
        integer(1, 1_000_000),
        default=5,
        show_default=True,
    ),
    Option(
        ("--mark-fifo",),
        "mark_fifo",
        "Made a FIFO (if it is not one) that the command "
        "writes phase names to, one per line: each run then has phases (wall, CPU "
        "user/system, memory rise, processes); an empty line ends the current phase.",
        output_path,
        metavar="PATH",
    ),
    Option(
        ("--mark-limit",),
        "mark_limit",
        "--mark-fifo: keep at most this many marks per run; later ones are counted, not kept.",
        integer(1, 1_000_000),
        default=DEFAULT_MARK_LIMIT,
        show_default=True,
    ),
    Option(
        ("--host-sample-interval-s",),
        "host_sample_interval_s",
        "Seconds between host telemetry samples.",
        number(0.1, 3600),
        default=1.0,
        show_default=True,
    ),
    Option(
        ("--host-foreign-cpu-max",),
        "host_foreign_cpu_max",
        "Pollution gate: CPU used beside "
        "the measured commands above this many cores for 3 host samples in a row trips "
        "foreign_cpu_load (a warning).",
        number(0),
        default=0.10,
        show_default=True,
        metavar="CORES",
    ),
    Option(
        ("--json",),
        "as_json",
        "Print one JSON object on stdout (canonical, one line; --pretty: indented).",
        None,
        default=False,
    ),
    Option(
        ("--pretty",),
        "pretty",
        "With --json: indented, readable JSON (not canonical).",
        None,
        default=False,
    ),
)


class Parsed(NamedTuple):
    values: dict[str, Any]  # by dest, as click would give them
    command: tuple[str, ...]  # the words after the first "--"


def defaults() -> dict[str, Any]:
    return {o.dest: (() if o.multiple else o.default) for o in OPTIONS}


def _index() -> dict[str, tuple[Option, Any]]:
    """Each spelling -> (option, the value a bare flag spelling sets)."""
    found: dict[str, tuple[Option, Any]] = {}
    for option in OPTIONS:
        for decl in option.decls:
            if "/" in decl:
                on, off = decl.split("/")
                found[on], found[off] = (option, True), (option, False)
            else:
                found[decl] = (option, True)
    return found


def parse(argv: Sequence[str]) -> Parsed | None:
    """``[OPTION ...] -- COMMAND [-- COMMAND ...]``, else None (click takes the line)."""
    index = _index()
    values = defaults()
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            command = tuple(argv[i + 1 :])
            return Parsed(values, command) if command else None
        spelling, value, i = _split_word(argv, i)
        if spelling not in index:
            return None
        option, flag_value = index[spelling]
        if option.convert is None:
            if value is not None:
                return None
            values[option.dest] = flag_value
            continue
        taken, i = _take(argv, i, option, value)
        if taken is None:
            return None
        if option.multiple:
            values[option.dest] = (*values[option.dest], taken)
        else:
            values[option.dest] = taken
    return None


def _split_word(argv: Sequence[str], i: int) -> tuple[str, str | None, int]:
    """(spelling, value attached to it or None, index of the next word)."""
    word = argv[i]
    if word.startswith("--"):
        spelling, equals, attached = word.partition("=")
        return spelling, attached if equals else None, i + 1
    if word.startswith("-") and len(word) > 2:  # "-r3": a short option with its value
        return word[:2], word[2:], i + 1
    return word, None, i + 1


def _take(argv: Sequence[str], i: int, option: Option, attached: str | None) -> tuple[Any, int]:
    """The option's converted value(s) and the index after them; (None, i) when malformed."""
    if option.nargs > 1:
        if attached is not None or i + option.nargs > len(argv):
            return None, i
        words = argv[i : i + option.nargs]
        if "--" in words:
            return None, i
        return tuple(words), i + option.nargs
    if attached is None:
        if i >= len(argv) or argv[i] == "--":
            return None, i
        attached, i = argv[i], i + 1
    assert option.convert is not None
    try:
        return option.convert(attached), i
    except BadValue:
        return None, i
