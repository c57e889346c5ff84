"""Repeated runs of one or more commands, each run in its own accounting group.

The engine of ``metewand measure --runs/--warmup/...``: runs, nothing else (statistics live in
``compare.series_stats``). Every run is a full ``run_measured`` subject, so every run has the
tree's CPU (user/system), peak memory and process count. Host telemetry runs beside the runs
(``measure.host.HostTelemetry``, as in suite runs: load, memory, swap, PSI and foreign CPU) and is
judged by the same pollution gate; the measured commands are this process's children, so their
CPU is the benchmark's own, never foreign.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metewand.errors import MetewandError
from metewand.measure import watchdog
from metewand.measure.cgroups import CgroupLayout, detect_layout
from metewand.measure.host import HostTelemetry
from metewand.measure.host_gate import GateThresholds
from metewand.measure.proc_events import ProcEvents, open_events
from metewand.measure.process import Process
from metewand.measure.pss import PssScanner
from metewand.measure.spawner import Spawner, open_spawner
from metewand.measure.subject import SubjectReport, run_measured

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
# needs the GIL, and the default 5 ms would let the sampler's baseline scan delay the stamp.
SWITCH_INTERVAL_S = 0.0001


class CommandFailed(MetewandError, RuntimeError):
    """A measured command exited non-zero (and failures were not to be ignored)."""

    def __init__(self, command: str, status: int) -> None:
        super().__init__(
            f"command {command!r} exited with status {status}; "
            "use --ignore-failure to measure it anyway"
        )
        self.command = command
        self.status = status


@dataclass(frozen=True)
class Command:
    """One command as given (``text``) and the argv that runs it."""

    text: str
    argv: tuple[str, ...]
    parameters: dict[str, str] = field(default_factory=dict)


def to_argv(words: Sequence[str], shell: str) -> tuple[str, ...]:
    """``auto``: one word holding spaces or shell syntax runs under ``sh -c``, else as argv."""
    if shell == "sh":
        return ("sh", "-c", words[0] if len(words) == 1 else shlex.join(words))
    if shell == "auto" and len(words) == 1 and SHELL_CHARS & set(words[0]):
        return ("sh", "-c", words[0])
    return tuple(words)


def build_commands(
    groups: Sequence[Sequence[str]], shell: str, parameters: Sequence[dict[str, str]]
) -> list[Command]:
    """Each command group once per parameter setting, ``{NAME}`` replaced by its value."""
    commands = []
    for setting in parameters or [{}]:
        for words in groups:
            filled = [_fill(word, setting) for word in words]
            text = filled[0] if len(filled) == 1 else shlex.join(filled)
            commands.append(Command(text, to_argv(filled, shell), dict(setting)))
    return commands


def _fill(word: str, setting: dict[str, str]) -> str:
    for name, value in setting.items():
        word = word.replace("{" + name + "}", value)
    return word


@dataclass
class SeriesOptions:
    runs: int | None = None  # exactly this many measured runs; else min_runs/max_time decide
    warmup: int = 0
    min_runs: int = 10
    max_runs: int | None = None
    max_time_s: float = 3.0
    prepare: tuple[str, ...] | None = None  # argv run (unmeasured) before every run
    ignore_failure: bool = False
    backend: str = "auto"
    interval_ms: int = 100
    pss_every: int = 5
    show_output: bool = False
    host_interval_s: float = 1.0
    host_foreign_cpu_max: float = 0.10
    mark_fifo: str | None = None  # the commands write phase names here (measure.mark_fifo)


@dataclass
class Series:
    command: Command
    runs: list[dict[str, Any]]  # one per measured run, raw integers (see run_record)
    warmups: int


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


def run_record(report: SubjectReport) -> dict[str, Any]:
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
    )
    if report.phases is not None:
        record["phases"] = report.phases
    return record


@dataclass
class _Tools:
    """What every run of a series shares: set up once, not once a run."""

    events: ProcEvents | None
    scanner: PssScanner
    marks: MarkReader | None
    layout: CgroupLayout
    spawner: Spawner | None


def _prepare(options: SeriesOptions) -> None:
    """--prepare: not measured, its own process, outside the run's group."""
    assert options.prepare is not None
    output = None if options.show_output else subprocess.DEVNULL
    prepare = Process.start(options.prepare, stdin=None, stdout=output, stderr=output)
    try:
        code = prepare.reap()
    finally:
        prepare.kill()  # only an interrupt gets here with it still running
        prepare.close()
    if code != 0 and not options.ignore_failure:
        raise CommandFailed(shlex.join(options.prepare), code)


def _one(command: Command, options: SeriesOptions, tools: _Tools) -> SubjectReport:
    if options.prepare:
        _prepare(options)
    report = run_measured(
        list(command.argv),
        options.backend,
        options.interval_ms,
        options.pss_every,
        discard_output=not options.show_output,
        events=tools.events,
        scanner=tools.scanner,
        marks=tools.marks,
        layout=tools.layout,
        spawner=tools.spawner,
    )
    status = report.shell_exit_status
    if status != 0 and not options.ignore_failure:
        raise CommandFailed(command.text, status)
    return report


def run_series(
    command: Command,
    options: SeriesOptions,
    on_run: Callable[[Command, int, dict[str, Any]], None] | None = None,
    spawner: Spawner | None = None,
) -> Series:
    """``spawner``: start the runs through it (``measure.spawner``), else by fork."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    tools = _Tools(
        events=open_events(),
        scanner=PssScanner(),  # one set of reader threads for every run of the series
        marks=_marks(options.mark_fifo),
        layout=detect_layout(),  # once per series: the groups' parents do not move between runs
        spawner=spawner,
    )
    try:
        for _ in range(options.warmup):
            _one(command, options, tools)
        runs: list[dict[str, Any]] = []
        started = time.monotonic()
        while _wants_more(len(runs), time.monotonic() - started, options):
            runs.append(run_record(_one(command, options, tools)))
            if on_run is not None:
                on_run(command, len(runs), runs[-1])
    finally:
        sys.setswitchinterval(previous)
        tools.scanner.close()
        if tools.events is not None:
            tools.events.close()
    return Series(command, runs, options.warmup)


def _marks(path: str | None) -> MarkReader | None:
    if path is None:
        return None
    from metewand.measure.mark_fifo import MarkReader  # only with --mark-fifo

    return MarkReader(path)


def _wants_more(done: int, elapsed_s: float, options: SeriesOptions) -> bool:
    if options.runs is not None:
        return done < options.runs
    if options.max_runs is not None and done >= options.max_runs:
        return False
    return done < options.min_runs or elapsed_s < options.max_time_s


def run_all(
    commands: Sequence[Command],
    options: SeriesOptions,
    on_run: Callable[[Command, int, dict[str, Any]], None] | None = None,
    spawner: Spawner | None = None,
) -> tuple[list[Series], dict[str, Any]]:
    """Every command's series in the order given, and the host pollution verdict over them.
    ``spawner``: the caller's (started early, so its start overlaps the caller's), else one is
    opened (and closed) here where the host allows."""
    own_spawner = spawner is None
    if own_spawner:
        spawner = open_spawner()  # first: the server starts while the host telemetry does
    watchdog.ready()  # its start-up before the first run, not inside it
    host = start_host(options)
    series = []
    try:
        for command in commands:
            series.append(run_series(command, options, on_run, spawner))
            # PSI's avg10 already spans 10 s, so even a short series gets the gate's three
            # samples (foreign CPU waits for a long enough interval: see HostTelemetry)
            host.sample_now()
    finally:
        record = host_record(host)
        if own_spawner and spawner is not None:
            spawner.close()
    return series, record
