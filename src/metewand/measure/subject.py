"""Run one command as a measured subject (the engine of ``metewand measure``)."""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from metewand.errors import MetewandError
from metewand.measure.accounting import open_accounting
from metewand.measure.forms import Measurement, QualityFlag, complete
from metewand.measure.proc_events import ProcEvents, open_events
from metewand.measure.pss import PssScanner
from metewand.measure.sampler import FaultHook, Sampler, SamplerSummary

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
        return out


def _wait_without_reaping(pid: int) -> None:
    # WNOWAIT leaves the root a zombie, so its /proc entry (CPU ticks, children's ticks) and the
    # cgroup stay readable until we reap it.
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


class _ExitStamp:
    """A thread that stamps the moment the root exits, started before the root is.

    The sampler's baseline scan runs in the caller right after the start; a command shorter
    than that scan (``true`` takes ~0.5 ms) would otherwise be charged the scan's time, since
    the caller only gets to ``waitid`` after it. The thread is already waiting for the pid
    when the command starts, so the stamp is the exit as the kernel reports it.
    """

    def __init__(self) -> None:
        self._pid: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self.ended_ns: int | None = None
        self._thread = threading.Thread(target=self._wait, name="metewand-exit", daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        pid = self._pid.get()
        if pid is None:
            return
        _wait_without_reaping(pid)
        self.ended_ns = time.monotonic_ns()

    def watch(self, pid: int | None) -> None:
        self._pid.put(pid)

    def join(self) -> int:
        self._thread.join()
        assert self.ended_ns is not None
        return self.ended_ns


class _InlineExit:
    """``_ExitStamp``'s interface without a thread: the caller waits when it joins. Used when
    the kernel's exit event gives the exact time anyway (one thread less per run)."""

    def __init__(self) -> None:
        self._pid: int | None = None

    def watch(self, pid: int | None) -> None:
        self._pid = pid

    def join(self) -> int:
        assert self._pid is not None
        _wait_without_reaping(self._pid)
        return time.monotonic_ns()


def _start(
    argv: Sequence[str],
    join: Any,
    env: Mapping[str, str] | None,
    cwd: str | None,
    output: int | None = None,
) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``argv`` in its accounting group; returns it and the moment it was about to exec.

    The child stamps the monotonic clock (system-wide) after joining its group, just before
    exec, and sends the stamp up a pipe. The wall time starts there: Python forks its child
    with ``fork`` when a pre-exec step is needed, which costs ~1.5 ms here (page tables of a
    large parent), and that is the tool's overhead, not the command's.
    """
    read_end, write_end = os.pipe()

    def preexec() -> None:
        if join is not None:
            join()
        os.write(write_end, time.monotonic_ns().to_bytes(8, "little"))

    try:
        proc = subprocess.Popen(
            list(argv),
            preexec_fn=preexec,
            close_fds=True,
            env=env,
            cwd=cwd,
            stdout=output,
            stderr=output,
        )
        os.close(write_end)
        stamp = os.read(read_end, 8)
    except OSError as exc:
        raise SubjectStartError(argv, exc) from exc
    finally:
        os.close(read_end)
        with contextlib.suppress(OSError):
            os.close(write_end)
    return proc, int.from_bytes(stamp, "little")


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


def _abandon(accounting: Any, proc: subprocess.Popen[bytes] | None, sampler: Any) -> None:
    """Interrupted: stop sampling, kill the subject's whole tree and reap the root."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C waits for this
    try:
        if sampler is not None:
            with contextlib.suppress(Exception):
                sampler.stop(end_scan=False)
        with contextlib.suppress(Exception):
            accounting.kill()
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(ChildProcessError):
                proc.wait()
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
) -> SubjectReport:
    """Run ``argv`` to completion inside a fresh accounting and report what it cost.

    ``discard_output`` sends the command's stdout and stderr to /dev/null (repeated runs).
    ``events``: a proc-connector subscription to reuse (repeated runs); without one, a
    subscription is opened for this run where the host allows it. ``scanner``: a PSS scanner
    (and its reader threads) to reuse across runs.
    """
    if not argv:
        raise ValueError("empty command")
    own_events = events is None
    if own_events:
        events = open_events()
    accounting = open_accounting(backend, label=os.path.basename(argv[0]))
    proc: subprocess.Popen[bytes] | None = None
    sampler: Sampler | None = None
    try:
        with _terminate_as_interrupt():
            stamp: _ExitStamp | _InlineExit = _ExitStamp() if events is None else _InlineExit()
            try:
                output = subprocess.DEVNULL if discard_output else None
                proc, started = _start(argv, accounting.preexec_join(), env, cwd, output)
            except SubjectStartError:
                stamp.watch(None)
                raise
            stamp.watch(proc.pid)
            accounting.attach(proc.pid)
            sampler = Sampler(accounting, interval_ms, pss_every, scanner, fault_hook=fault_hook)
            sampler.start()
            wall = stamp.join() - started
        wall_source = "monotonic"
        span = events.span(proc.pid) if events is not None else None
        if span is not None:  # the kernel's own exec and exit times: the tightest bound
            wall, wall_source = span[1] - span[0], "proc_connector"
        summary = sampler.stop(end_scan=False)
        cpu, memory = accounting.cpu(), accounting.memory()
        _, status = os.waitpid(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
    except KeyboardInterrupt:
        _abandon(accounting, proc, sampler)
        raise
    finally:
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
    code = proc.returncode
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
    )
