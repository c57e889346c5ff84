"""Run one command as a measured subject (the engine of ``metewand measure``)."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from metewand.errors import MetewandError
from metewand.measure.accounting import CpuReading, TreeAccounting, open_accounting
from metewand.measure.forms import Measurement, QualityFlag, complete
from metewand.measure.proc_events import ProcEvents, open_events
from metewand.measure.process import DEVNULL, Process
from metewand.measure.sampler import FaultHook, Sampler, SamplerSummary

if TYPE_CHECKING:
    from metewand.measure.cgroups import CgroupLayout
    from metewand.measure.mark_fifo import MarkReader
    from metewand.measure.pss import PssScanner
    from metewand.measure.spare_accounting import SpareAccounting
    from metewand.measure.spawner import Spawner

MEASUREMENT_FIELDS = (
    "wall_time_ns",
    "cpu_time_ns",
    "cpu_user_time_ns",
    "cpu_system_time_ns",
    "peak_memory_bytes",
    "pss_baseline_bytes",
    "pss_peak_bytes",
    "pss_end_bytes",
    "process_count_peak",
)


class SubjectStartError(MetewandError, RuntimeError):
    """The command could not be started (not found, not executable, ...)."""

    def __init__(self, argv: Sequence[str], error: OSError) -> None:
        super().__init__(f"cannot start {argv[0]!r}: {error.strerror or error}")
        self.argv = list(argv)
        self.errno = error.errno
        # The shell convention: 127 = not found, 126 = found but not executable.
        self.exit_code = 127 if error.errno == errno.ENOENT else 126


class SubjectReport(NamedTuple):  # not a dataclass: see measure.accounting
    argv: list[str]
    backend: str
    fallback_reasons: list[str]
    measurements: dict[str, Measurement]  # keyed by MEASUREMENT_FIELDS
    exit_status: int | None  # None when a signal ended the command
    signal: int | None
    quality_flags: list[QualityFlag]
    sampler: SamplerSummary
    root_pid: int
    samples: list[dict[str, Any]] = []  # noqa: RUF012 - always given (run_measured)
    phases: dict[str, Any] | None = None  # metewand_phases/1 when the run was marked

    @property
    def shell_exit_status(self) -> int:
        """The command's status as a shell reports it (128 + signal number for a signal)."""
        return 128 + self.signal if self.signal is not None else int(self.exit_status or 0)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            name: self.measurements[name].to_json() for name in MEASUREMENT_FIELDS
        }
        out["sources"] = {name: self.measurements[name].source for name in MEASUREMENT_FIELDS}
        out.update(
            argv=self.argv,
            backend=self.backend,
            fallback_reasons=self.fallback_reasons,
            exit_status=self.exit_status,
            signal=self.signal,
            signal_name=signal.Signals(self.signal).name if self.signal else None,
            quality_flags=[f.value for f in self.quality_flags],
            sampler={
                k: v
                for k, v in self.sampler.to_json().items()
                if k
                in (
                    "tick_count",
                    "pss_sample_count",
                    "sampler_cpu_ns",
                    "interval_ms",
                    "pss_every",
                    "fault",
                    "pss_policy",
                    "pss_triggers",
                    "pss_walked_processes",
                    "pss_reused_processes",
                )
            },
        )
        if self.phases is not None:
            out["phases"] = self.phases
        return out


class _Launch(NamedTuple):
    """How the command is started: its environment, directory, output and starter."""

    env: Mapping[str, str] | None
    cwd: str | None
    quiet: bool  # stdout and stderr to /dev/null
    spawner: Spawner | None  # None: ``Process.start`` with a pre-exec join
    meanwhile: Callable[[], None] | None = None  # run while the spawner spawns (a spare's refill)


class _Run:
    """What one run holds so far: what to report from, or to clean up after an interrupt (a
    plain class: a dataclass costs ~0.4 ms of measure's start-up to create)."""

    __slots__ = ("accounting", "proc", "sampler", "span")

    def __init__(self, accounting: TreeAccounting) -> None:
        self.accounting = accounting
        self.proc: Process | None = None
        self.sampler: Sampler | None = None
        self.span: tuple[int, int] | None = None  # monotonic ns the wall spans (marks' frame)


def _start(
    argv: Sequence[str], accounting: TreeAccounting, launch: _Launch, watch: bool
) -> Process:
    """Start ``argv`` in its own session and accounting groups.

    With a spawner (``measure.spawner``) the command is spawned inside its groups (``vfork``
    + exec), and its wall time starts just before the spawn. Without one, Python forks its child
    with ``fork`` to run the join before exec (~1.5 ms here: page tables of a large parent), and
    the wall time starts at the child's stamp just before exec, so the fork is not charged.
    ``watch``: a thread already waiting when the command starts stamps its exit. The sampler's
    baseline scan runs in the caller right after the start, and a command shorter than that
    scan (``true`` takes ~0.5 ms) would otherwise be charged the scan's time. Without it (the
    kernel's exit event gives the exact time anyway) the caller waits inline: one thread less.
    """
    try:
        if launch.spawner is not None:
            return launch.spawner.start(
                argv,
                accounting.join_paths(),
                env=launch.env,
                cwd=launch.cwd,
                quiet=launch.quiet,
                watch=watch,
                meanwhile=launch.meanwhile,
            )
        output = DEVNULL if launch.quiet else None
        return Process.start(
            argv,
            cwd=launch.cwd,
            env=launch.env,
            stdin=None,
            stdout=output,
            stderr=output,
            join=accounting.preexec_join(),
            stamp_exec=True,
            watch=watch,
        )
    except OSError as exc:
        raise SubjectStartError(argv, exc) from exc


def _exit_moment(proc: Process, watched: bool, sampler: Sampler, start: bool) -> int:
    """When the command exited (it is left unreaped: /proc and the groups stay readable). The
    sampler's ticks start only if the command outlives the first tick's due time (``start``:
    the sampler itself is started then, baseline included)."""
    first_tick_s = sampler.interval_ms / 1000

    def outlived() -> None:
        if start:
            sampler.start(ticking=True)
        else:
            sampler.start_ticking()

    if watched:
        seen = proc.exit_seen(first_tick_s)
        if seen is None:
            outlived()
            seen = proc.exit_seen()
        assert seen is not None
        return seen
    if not proc.wait_exited(first_tick_s):
        outlived()
        proc.wait_exited(None)
    return time.monotonic_ns()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a measurement the way Ctrl-C does (main thread only): the subject is
    killed and the groups removed, instead of metewand dying and leaving both behind. Nested
    (a series around its runs) it changes nothing: one handler for all the runs."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is _interrupt
    ):
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _abandon(run: _Run) -> None:
    """Interrupted: stop sampling, kill the subject's whole tree and reap the root."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C waits for this
    try:
        if run.sampler is not None:
            with contextlib.suppress(Exception):
                run.sampler.stop(end_scan=False)
        with contextlib.suppress(Exception):
            run.accounting.kill()
        if run.proc is not None:
            # the whole group; reaps the root (a broken spawner cannot: init then does)
            with contextlib.suppress(MetewandError):
                run.proc.kill(wait_s=None)
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_to_exit(
    run: _Run,
    argv: Sequence[str],
    launch: _Launch,
    events: ProcEvents | None,
    make_sampler: Callable[[TreeAccounting], Sampler],
    pss: bool,
) -> tuple[Measurement, Measurement | None]:
    """Start the command, sample its tree until it exits. Its wall time: the kernel's own exec
    and exit times when ``events`` has them (the tightest bound), else this process's stamps.
    The tree's process peak when the kernel reported every fork and exit (else None: the
    sampler's count stands).

    Without ``pss`` (repeated runs record no PSS), when the kernel's events give the process
    peak and the groups give CPU and memory, the sampler has nothing to add to a command that
    ends before its first tick: it is started only if the command outlives that."""
    watched = events is None
    run.proc = proc = _start(argv, run.accounting, launch, watched)
    run.accounting.attach(proc.pid, joined=launch.spawner is not None)
    run.sampler = sampler = make_sampler(run.accounting)
    eager = pss or events is None or run.accounting.backend == "proc"
    if eager:
        sampler.start(ticking=False)  # the baseline now; ticks from the first one due
    assert proc.exec_ns is not None
    run.span = (proc.exec_ns, _exit_moment(proc, watched, sampler, start=not eager))
    tree = events.tree(proc.pid) if events is not None else None
    if tree is None or tree.span is None:
        return complete(run.span[1] - run.span[0], "monotonic"), None
    run.span = exec_ns, exit_ns = tree.span
    peak = tree.process_peak()
    return complete(exit_ns - exec_ns, "proc_connector"), (
        complete(peak, "proc_connector:fork_exit") if peak is not None else None
    )


def _measurements(
    wall: Measurement,
    processes: Measurement | None,
    cpu: CpuReading,
    memory_peak: Measurement,
    summary: SamplerSummary,
) -> dict[str, Measurement]:
    return {
        "wall_time_ns": wall,
        "cpu_time_ns": cpu.total,
        "cpu_user_time_ns": cpu.user,
        "cpu_system_time_ns": cpu.system,
        "peak_memory_bytes": memory_peak,
        "pss_baseline_bytes": summary.pss_baseline,
        "pss_peak_bytes": summary.pss_peak,
        "pss_end_bytes": summary.pss_end,
        "process_count_peak": processes or summary.process_count_peak,
    }


def _quality_flags(accounting: TreeAccounting, summary: SamplerSummary) -> list[QualityFlag]:
    flags = list(accounting.quality_flags)
    return flags + [f for f in summary.quality_flags if f not in flags]


def run_measured(
    argv: Sequence[str],
    backend: str = "auto",
    interval_ms: int = 100,
    pss_every: int = 5,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    fault_hook: FaultHook | None = None,
    discard_output: bool = False,
    events: ProcEvents | None = None,
    scanner: PssScanner | None = None,
    marks: MarkReader | None = None,
    layout: CgroupLayout | None = None,
    spawner: Spawner | None = None,
    pss: bool = True,
    spares: SpareAccounting | None = None,
) -> SubjectReport:
    """Run ``argv`` to completion inside a fresh accounting and report what it cost.

    ``discard_output`` sends the command's stdout and stderr to /dev/null (repeated runs).
    ``events``: a proc-connector subscription to reuse (repeated runs); without one, a
    subscription is opened for this run where the host allows it. ``scanner``: a PSS scanner
    (and its reader threads) to reuse across runs. ``marks``: phase marks the command writes
    (``measure.mark_fifo``), read against this run's group; the report then has ``phases``.
    ``layout``: the cgroup layout detected once for repeated runs (~0.4 ms a detection here).
    ``spawner``: start the command through this spawn server (``measure.spawner``), else by a
    fork with a pre-exec join. ``pss``: False takes no PSS scan (the PSS fields are then
    unavailable; ``measure``'s repeated runs keep none). ``spares``: take this run's accounting
    from it, and (with a spawner) make the next run's while the command is spawned
    (``measure.spare_accounting``; its backend and layout stand for ``backend`` and ``layout``).
    """
    if not argv:
        raise ValueError("empty command")
    own_events = events is None
    if own_events:
        events = open_events()
    label = os.path.basename(argv[0])
    if spares is None:
        launch = _Launch(env, cwd, discard_output, spawner)
        run = _Run(open_accounting(backend, label=label, layout=layout))
    else:
        refill = None if spawner is None else partial(spares.refill, label)
        launch = _Launch(env, cwd, discard_output, spawner, refill)
        run = _Run(spares.take(label))

    def make_sampler(accounting: TreeAccounting) -> Sampler:
        return Sampler(accounting, interval_ms, pss_every, scanner, fault_hook=fault_hook, pss=pss)

    try:
        if marks is not None:
            marks.begin(run.accounting)  # the start reading: the fresh group, before the command
        with terminate_as_interrupt():
            wall, processes = _run_to_exit(run, argv, launch, events, make_sampler, pss)
        return _finish(run, argv, wall, processes, marks)
    except KeyboardInterrupt:
        _abandon(run)
        raise
    finally:
        if marks is not None:
            marks.close()
        run.accounting.close()  # kills whatever is still in the groups, then removes them
        if own_events and events is not None:
            events.close()


def _finish(
    run: _Run,
    argv: Sequence[str],
    wall: Measurement,
    processes: Measurement | None,
    marks: MarkReader | None,
) -> SubjectReport:
    """Read the exited command's groups, reap it and build its report."""
    proc, sampler, accounting = run.proc, run.sampler, run.accounting
    assert proc is not None and sampler is not None and run.span is not None
    summary = sampler.stop(end_scan=False)
    phases = marks.finish(*run.span) if marks is not None else None
    cpu, memory_peak = accounting.cpu(), accounting.memory_peak()
    code = proc.reap()
    proc.close()
    return SubjectReport(
        argv=list(argv),
        backend=accounting.backend,
        fallback_reasons=list(accounting.fallback_reasons),
        measurements=_measurements(wall, processes, cpu, memory_peak, summary),
        exit_status=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        quality_flags=_quality_flags(accounting, summary),
        sampler=summary,
        root_pid=proc.pid,
        samples=summary.samples,
        phases=phases,
    )
