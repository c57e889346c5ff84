"""Repeated runs of one or more commands, each run in its own accounting group.

The engine of ``metewand measure --runs/--warmup/...``: runs, nothing else (statistics live in
``cli.measure_stats``). Every run is a full ``run_measured`` subject, so every run has the
tree's CPU (user/system), peak memory and process count (no PSS: repeated runs keep none, and
a scan would cost more than a short command). Host telemetry runs beside the runs
(``measure.host.HostTelemetry``, as in suite runs: load, memory, swap, PSI and foreign CPU) and
is judged by the same pollution gate; the measured commands are this process's children, so
their CPU is the benchmark's own, never foreign.

Two designs for several commands:
- ``sequential``: each command's runs one after the other, command by command (hyperfine's);
- ``interleaved``: rounds, each running every command once in a seeded random order, so a
  drift of the host (load, thermal, caches) lands on every command alike and each round gives
  one paired observation per command (``round`` in each run record).
``--setup`` runs once before a command's first run, ``--cleanup`` once after its last (in the
interleaved design: every setup before the first round, every cleanup after the last),
``--prepare`` before every run; none of them is measured.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from metewand.errors import MetewandError
from metewand.measure import watchdog
from metewand.measure.cgroups import CgroupLayout, detect_layout
from metewand.measure.host import HostTelemetry
from metewand.measure.host_gate import GateThresholds
from metewand.measure.proc_events import ProcEvents, open_events
from metewand.measure.process import DEVNULL, Process
from metewand.measure.spare_accounting import SpareAccounting
from metewand.measure.spawner import Spawner, open_spawner
from metewand.measure.subject import SubjectReport, run_measured, terminate_as_interrupt

if TYPE_CHECKING:
    from metewand.measure.mark_fifo import MarkReader

SHELLS = ("auto", "none", "sh")
SHELL_CHARS = set(" \t\n|&;<>()$`\\\"'*?[]#~=%{}")
RUN_FIELDS = (
    "wall_time_ns",
    "cpu_time_ns",
    "cpu_user_time_ns",
    "cpu_system_time_ns",
    "peak_memory_bytes",
    "process_count_peak",
)
# A short switch interval while runs are in flight: the thread that stamps a command's exit
# needs the GIL, and the default 5 ms would let the host sampler's /proc scan delay the stamp.
SWITCH_INTERVAL_S = 0.0001


class CommandFailed(MetewandError, RuntimeError):
    """A measured command (or its setup, prepare or cleanup) exited non-zero (and failures
    were not to be ignored)."""

    def __init__(self, command: str, status: int, role: str = "command") -> None:
        super().__init__(
            f"{role} {command!r} exited with status {status}; "
            "use --ignore-failure to measure it anyway"
        )
        self.command = command
        self.status = status


# The records below are NamedTuples, not dataclasses: a dataclass costs ~0.4 ms to create (its
# methods are compiled from source), and measure's start-up is timed against hyperfine.


class Command(NamedTuple):
    """One command as given (``text``), the argv that runs it, and its unmeasured helpers."""

    text: str
    argv: tuple[str, ...]
    parameters: dict[str, str] = {}  # noqa: RUF012 - never changed: a run's values of {NAME}
    name: str | None = None  # --command-name: shown instead of the text
    setup: tuple[str, ...] | None = None  # argv run once before the command's runs
    prepare: tuple[str, ...] | None = None  # argv run before every run
    cleanup: tuple[str, ...] | None = None  # argv run once after the command's runs

    @property
    def label(self) -> str:
        return self.name or self.text


def to_argv(words: Sequence[str], shell: str) -> tuple[str, ...]:
    """``auto``: one word holding spaces or shell syntax runs under ``sh -c``, else as argv."""
    if shell == "sh":
        return ("sh", "-c", words[0] if len(words) == 1 else shlex.join(words))
    if shell == "auto" and len(words) == 1 and SHELL_CHARS & set(words[0]):
        return ("sh", "-c", words[0])
    return tuple(words)


class Helpers(NamedTuple):
    """--setup/--prepare/--cleanup as given: empty, one for every command, or one per command."""

    setup: Sequence[str] = ()
    prepare: Sequence[str] = ()
    cleanup: Sequence[str] = ()

    def of(self, index: int, setting: dict[str, str]) -> dict[str, tuple[str, ...] | None]:
        out: dict[str, tuple[str, ...] | None] = {}
        for role in ("setup", "prepare", "cleanup"):
            given = getattr(self, role)
            text = given[0] if len(given) == 1 else given[index] if given else None
            out[role] = ("sh", "-c", _fill(text, setting)) if text else None
        return out


def build_commands(
    groups: Sequence[Sequence[str]],
    shell: str,
    parameters: Sequence[dict[str, str]],
    names: Sequence[str] = (),
    helpers: Helpers | None = None,
) -> list[Command]:
    """Each command group once per parameter setting, ``{NAME}`` replaced by its value (in the
    command, its name and its helpers). ``names`` and the helpers given once per command
    follow the groups' order."""
    helpers = helpers or Helpers()
    commands = []
    for setting in parameters or [{}]:
        for index, words in enumerate(groups):
            filled = [_fill(word, setting) for word in words]
            text = filled[0] if len(filled) == 1 else shlex.join(filled)
            name = _fill(names[index], setting) if index < len(names) else None
            commands.append(
                Command(
                    text, to_argv(filled, shell), dict(setting), name, **helpers.of(index, setting)
                )
            )
    return commands


def _fill(word: str, setting: dict[str, str]) -> str:
    for name, value in setting.items():
        word = word.replace("{" + name + "}", value)
    return word


class SeriesOptions(NamedTuple):
    runs: int | None = None  # exactly this many measured runs; else min_runs/max_time decide
    warmup: int = 0
    min_runs: int = 10
    max_runs: int | None = None
    max_time_s: float = 3.0  # per command (interleaved: the rounds get commands x this)
    ignore_failure: bool = False
    backend: str = "auto"
    interval_ms: int = 100
    pss_every: int = 5
    show_output: bool = False
    host_interval_s: float = 1.0
    host_foreign_cpu_max: float = 0.10
    mark_fifo: str | None = None  # the commands write phase names here (measure.mark_fifo)
    mark_limit: int | None = None  # marks kept per run
    interleave: bool = False
    seed: int = 20240607  # of the interleaved rounds' order


class Series(NamedTuple):
    command: Command
    runs: list[dict[str, Any]]  # one per measured run, raw integers (see run_record)
    warmups: int


class Outcome(NamedTuple):
    """Every command's series, the host's record, and the design they ran in."""

    series: list[Series]
    host: dict[str, Any]
    design: str  # "sequential" or "interleaved"
    rounds: list[list[int]] | None = None  # interleaved: the command order of each round


# (command index, the command, its runs so far, the run just measured)
OnRun = Callable[[int, Command, int, dict[str, Any]], None]


def start_host(options: SeriesOptions) -> HostTelemetry:
    """Host telemetry beside the measured runs, rooted at this process (the commands' parent)."""
    thresholds = GateThresholds(foreign_cpu_max_cores=options.host_foreign_cpu_max)
    return HostTelemetry(
        options.host_interval_s,
        os.getpid(),
        thresholds=thresholds,
        min_foreign_interval_s=options.host_interval_s / 2,
    ).start()


def host_record(telemetry: HostTelemetry) -> dict[str, Any]:
    """What ``measure`` keeps of the host: the gate's verdict, the sample count, foreign CPU
    (threshold, median/max, the top foreign processes by pid and comm) and the samples."""
    summary = telemetry.stop()
    return {
        "gate": summary["gate"],
        "samples": summary["sample_count"],
        "interval_s": summary["interval_s"],
        "foreign_cpu": summary["foreign_cpu"],
        "sampler_cpu_ms": summary["sampler_cpu_ms"],
        "sampler_errors": summary["sampler_errors"],
        "telemetry": telemetry.samples,
    }


def run_record(report: SubjectReport, round_index: int | None = None) -> dict[str, Any]:
    """One run as raw integers (None when a figure was unavailable, with the reason beside)."""
    record: dict[str, Any] = {}
    unavailable = {}
    for name in RUN_FIELDS:
        m = report.measurements[name]
        record[name] = m.value
        if m.value is None:
            unavailable[name] = m.reason.value if m.reason else "unavailable"
    record.update(
        wall_time_source=report.measurements["wall_time_ns"].source,
        exit_status=report.exit_status,
        signal=report.signal,
        backend=report.backend,
        quality_flags=[f.value for f in report.quality_flags],
        unavailable=unavailable,
        round=round_index,
    )
    if report.phases is not None:
        record["phases"] = report.phases
    return record


class _Tools(NamedTuple):
    """What every run shares: set up once, not once a run (no PSS scanner: runs take no PSS)."""

    events: ProcEvents | None
    marks: MarkReader | None
    layout: CgroupLayout
    spawner: Spawner | None
    # the next run's groups made during this run's spawn (measure.spare_accounting); None
    # without a spawner, or when consecutive runs are of commands with other names
    spares: SpareAccounting | None = None


def _helper(argv: tuple[str, ...] | None, role: str, options: SeriesOptions) -> None:
    """--setup/--prepare/--cleanup: not measured, its own process, outside any run's group."""
    if argv is None:
        return
    output = None if options.show_output else DEVNULL
    helper = Process.start(argv, stdin=None, stdout=output, stderr=output)
    try:
        code = helper.reap()
    finally:
        helper.kill()  # only an interrupt gets here with it still running
        helper.close()
    if code != 0 and not options.ignore_failure:
        raise CommandFailed(argv[-1], code, f"--{role} command")


def _one(command: Command, options: SeriesOptions, tools: _Tools) -> SubjectReport:
    _helper(command.prepare, "prepare", options)
    report = run_measured(
        list(command.argv),
        options.backend,
        options.interval_ms,
        options.pss_every,
        discard_output=not options.show_output,
        events=tools.events,
        marks=tools.marks,
        layout=tools.layout,
        spawner=tools.spawner,
        pss=False,
        spares=tools.spares,
    )
    status = report.shell_exit_status
    if status != 0 and not options.ignore_failure:
        raise CommandFailed(command.text, status)
    return report


def wants_more(done: int, elapsed_s: float, options: SeriesOptions, budget: float = 1) -> bool:
    """Another run (or round)? ``budget``: how many commands share ``max_time_s``."""
    if options.runs is not None:
        return done < options.runs
    if options.max_runs is not None and done >= options.max_runs:
        return False
    return done < options.min_runs or elapsed_s < options.max_time_s * budget


def _sequential(
    commands: Sequence[Command], options: SeriesOptions, tools: _Tools, on_run: OnRun | None
) -> list[Series]:
    out = []
    for index, command in enumerate(commands):
        _helper(command.setup, "setup", options)
        try:
            for _ in range(options.warmup):
                _one(command, options, tools)
            runs: list[dict[str, Any]] = []
            started = time.monotonic()
            while wants_more(len(runs), time.monotonic() - started, options):
                runs.append(run_record(_one(command, options, tools)))
                if on_run is not None:
                    on_run(index, command, len(runs), runs[-1])
        finally:
            _cleanup_unless_interrupted([command], options)
        out.append(Series(command, runs, options.warmup))
    return out


def _round_orders(count: int, seed: int) -> Iterator[list[int]]:
    import random  # only for interleaved rounds

    rng = random.Random(seed)
    while True:
        order = list(range(count))
        rng.shuffle(order)
        yield order


def _interleaved(
    commands: Sequence[Command], options: SeriesOptions, tools: _Tools, on_run: OnRun | None
) -> tuple[list[Series], list[list[int]]]:
    """Rounds: every command once per round, in a seeded random order."""
    runs: list[list[dict[str, Any]]] = [[] for _ in commands]
    rounds: list[list[int]] = []
    orders = _round_orders(len(commands), options.seed)
    for command in commands:
        _helper(command.setup, "setup", options)
    try:
        for _ in range(options.warmup):
            for index in next(orders):
                _one(commands[index], options, tools)
        started = time.monotonic()
        while wants_more(len(rounds), time.monotonic() - started, options, len(commands)):
            order = next(orders)
            for index in order:
                runs[index].append(run_record(_one(commands[index], options, tools), len(rounds)))
                if on_run is not None:
                    on_run(index, commands[index], len(runs[index]), runs[index][-1])
            rounds.append(order)
    finally:
        _cleanup_unless_interrupted(commands, options)
    series = [Series(c, r, options.warmup) for c, r in zip(commands, runs, strict=True)]
    return series, rounds


def _cleanup_unless_interrupted(commands: Sequence[Command], options: SeriesOptions) -> None:
    """The cleanups run after a failed command too (its setup ran); not after Ctrl-C."""
    interrupted = isinstance(sys.exc_info()[1], KeyboardInterrupt)
    if not interrupted:
        for command in commands:
            _helper(command.cleanup, "cleanup", options)


def _marks(options: SeriesOptions) -> MarkReader | None:
    if options.mark_fifo is None:
        return None
    from metewand.measure.mark_fifo import MarkReader  # only with --mark-fifo

    return MarkReader(options.mark_fifo, options.mark_limit)


def _spares(
    commands: Sequence[Command],
    options: SeriesOptions,
    layout: CgroupLayout,
    spawner: Spawner | None,
) -> SpareAccounting | None:
    """Groups made ahead, where a spawn leaves the time to make them and the next run's command
    is known to have the same name (its groups are named after it): interleaved rounds of
    commands with other names would throw most spares away."""
    if spawner is None:
        return None
    if options.interleave and len({os.path.basename(c.argv[0]) for c in commands}) > 1:
        return None
    return SpareAccounting(options.backend, layout)


def run_all(
    commands: Sequence[Command],
    options: SeriesOptions,
    on_run: OnRun | None = None,
    spawner: Spawner | None = None,
) -> Outcome:
    """Every command's runs, in the design ``options.interleave`` names, and the host pollution
    verdict over them. ``spawner``: the caller's (started early, so its start overlaps the
    caller's), else one is opened (and closed) here where the host allows."""
    own_spawner = spawner is None
    if own_spawner:
        spawner = open_spawner()  # first: the server starts while the host telemetry does
    watchdog.ready()  # its start-up before the first run, not inside it
    host = start_host(options)
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    layout = detect_layout()  # once: the groups' parents do not move between runs
    tools = _Tools(
        events=open_events(),
        marks=_marks(options),
        layout=layout,
        spawner=spawner,
        spares=_spares(commands, options, layout, spawner),
    )
    try:
        with terminate_as_interrupt():
            rounds = None
            if options.interleave and len(commands) > 1:
                series, rounds = _interleaved(commands, options, tools, on_run)
            else:
                series = _sequential(commands, options, tools, on_run)
            # PSI's avg10 already spans 10 s, so even a short series gets the gate's three
            # samples (foreign CPU waits for a long enough interval: see HostTelemetry)
            host.sample_now()
    finally:
        sys.setswitchinterval(previous)
        if tools.spares is not None:
            tools.spares.close()
        if tools.events is not None:
            tools.events.close()
        record = host_record(host)
        if own_spawner and spawner is not None:
            spawner.close()
    return Outcome(series, record, "sequential" if rounds is None else "interleaved", rounds)
