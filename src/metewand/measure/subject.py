"""Run one command as a measured subject (the engine of ``metewand measure``)."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metewand.errors import MetewandError
from metewand.measure.accounting import open_accounting
from metewand.measure.forms import Measurement, QualityFlag, complete
from metewand.measure.proc_events import ProcEvents, open_events
from metewand.measure.process import Process
from metewand.measure.pss import PssScanner
from metewand.measure.sampler import FaultHook, Sampler, SamplerSummary

if TYPE_CHECKING:
    from metewand.measure.cgroups import CgroupLayout
    from metewand.measure.mark_fifo import MarkReader

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


@dataclass(slots=True)
class SubjectReport:
    argv: list[str]
    backend: str
    fallback_reasons: list[str]
    measurements: dict[str, Measurement]  # keyed by MEASUREMENT_FIELDS
    exit_status: int | None  # None when a signal ended the command
    signal: int | None
    quality_flags: list[QualityFlag]
    sampler: SamplerSummary
    root_pid: int
    samples: list[dict[str, Any]] = field(default_factory=list)
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


def _start(
    argv: Sequence[str],
    join: Any,
    env: Mapping[str, str] | None,
    cwd: str | None,
    output: int | None,
    watch: bool,
) -> Process:
    """Start ``argv`` in its own session and accounting group (``Process.start``).

    The wall time starts at the child's stamp just before exec: Python forks its child with
    ``fork`` when a pre-exec step is needed, which costs ~1.5 ms here (page tables of a large
    parent), and that is the tool's overhead, not the command's. ``watch``: a thread already
    waiting when the command starts stamps its exit. The sampler's baseline scan runs in the
    caller right after the start, and a command shorter than that scan (``true`` takes
    ~0.5 ms) would otherwise be charged the scan's time. Without it (the kernel's exit event
    gives the exact time anyway) the caller waits inline: one thread less per run.
    """
    try:
        return Process.start(
            argv, cwd=cwd, env=env, stdin=None, stdout=output, stderr=output, join=join,
            stamp_exec=True, watch=watch,
        )  # fmt: skip
    except OSError as exc:
        raise SubjectStartError(argv, exc) from exc


def _exit_moment(proc: Process, watched: bool) -> int:
    """When the command exited (it is left unreaped: /proc and the groups stay readable)."""
    if watched:
        seen = proc.exit_seen()
        assert seen is not None
        return seen
    proc.wait_exited(None)
    return time.monotonic_ns()


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a measurement the way Ctrl-C does (main thread only): the subject is
    killed and the groups removed, instead of metewand dying and leaving both behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _abandon(accounting: Any, proc: Process | None, sampler: Any) -> None:
    """Interrupted: stop sampling, kill the subject's whole tree and reap the root."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C waits for this
    try:
        if sampler is not None:
            with contextlib.suppress(Exception):
                sampler.stop(end_scan=False)
        with contextlib.suppress(Exception):
            accounting.kill()
        if proc is not None:
            proc.kill(wait_s=None)  # the whole group; reaps the root
    finally:
        signal.signal(signal.SIGINT, previous)


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
) -> SubjectReport:
    """Run ``argv`` to completion inside a fresh accounting and report what it cost.

    ``discard_output`` sends the command's stdout and stderr to /dev/null (repeated runs).
    ``events``: a proc-connector subscription to reuse (repeated runs); without one, a
    subscription is opened for this run where the host allows it. ``scanner``: a PSS scanner
    (and its reader threads) to reuse across runs. ``marks``: phase marks the command writes
    (``measure.mark_fifo``), read against this run's group; the report then has ``phases``.
    ``layout``: the cgroup layout detected once for repeated runs (~0.4 ms a detection here).
    """
    if not argv:
        raise ValueError("empty command")
    own_events = events is None
    if own_events:
        events = open_events()
    accounting = open_accounting(backend, label=os.path.basename(argv[0]), layout=layout)
    proc: Process | None = None
    sampler: Sampler | None = None
    phases = None
    try:
        if marks is not None:
            marks.begin(accounting)  # the start reading: the fresh group, before the command
        with _terminate_as_interrupt():
            watched = events is None
            output = subprocess.DEVNULL if discard_output else None
            proc = _start(argv, accounting.preexec_join(), env, cwd, output, watched)
            accounting.attach(proc.pid)
            sampler = Sampler(accounting, interval_ms, pss_every, scanner, fault_hook=fault_hook)
            sampler.start()
            assert proc.exec_ns is not None
            wall = _exit_moment(proc, watched) - proc.exec_ns
        wall_source = "monotonic"
        span = events.span(proc.pid) if events is not None else None
        if span is not None:  # the kernel's own exec and exit times: the tightest bound
            wall, wall_source = span[1] - span[0], "proc_connector"
        summary = sampler.stop(end_scan=False)
        if marks is not None:
            phases = marks.finish(proc.exec_ns, proc.exec_ns + wall)
        cpu, memory = accounting.cpu(), accounting.memory()
        code = proc.reap()
        proc.close()
    except KeyboardInterrupt:
        _abandon(accounting, proc, sampler)
        raise
    finally:
        if marks is not None:
            marks.close()
        accounting.close()  # kills whatever is still in the groups, then removes them
        if own_events and events is not None:
            events.close()
    flags = list(accounting.quality_flags)
    flags += [f for f in summary.quality_flags if f not in flags]
    measurements = {
        "wall_time_ns": complete(wall, wall_source),
        "cpu_time_ns": cpu.total,
        "cpu_user_time_ns": cpu.user,
        "cpu_system_time_ns": cpu.system,
        "peak_memory_bytes": memory.peak,
        "pss_baseline_bytes": summary.pss_baseline,
        "pss_peak_bytes": summary.pss_peak,
        "pss_end_bytes": summary.pss_end,
        "process_count_peak": summary.process_count_peak,
    }
    return SubjectReport(
        argv=list(argv),
        backend=accounting.backend,
        fallback_reasons=list(accounting.fallback_reasons),
        measurements=measurements,
        exit_status=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        quality_flags=flags,
        sampler=summary,
        root_pid=proc.pid,
        samples=summary.samples,
        phases=phases,
    )
