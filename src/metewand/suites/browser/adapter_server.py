"""Adapter modes behind one interface: a process per attempt, or one long-lived adapter per run.

``open_adapter(command, mode)`` returns an ``AdapterRunner`` whose ``run(payload, deadline_s,
stderr_path)`` gives the same ``AdapterRun`` as ``adapters.run_adapter`` and whose ``close()``
ends what it holds:

- ``per_attempt``: ``run_adapter`` itself (the ``abb_scenario_adapter/1`` contract);
- ``long_lived``: one adapter process started with ``command.serve_argv`` (a shipped adapter's
  ``--serve``), fed one payload per stdin line, answering one result line each. It saves the
  process start and the client library's load per attempt; the attempt keeps its isolation: the
  adapter connects, opens its own context/page and closes them per payload, each attempt has its
  own deadline, and an attempt that crashes the adapter, hangs past its deadline or answers
  garbage is charged alone (crash / timeout / infra, origin adapter): the process tree is killed
  and swept, and the next attempt starts a fresh adapter.

Costs in long-lived mode: ``cpu_ns`` is the adapter group's CPU during the attempt (a delta);
``peak_memory_bytes`` is the high-water since the attempt began where the backend can restart it
(cgroup v1 memory, cgroup v2 memory.peak on recent kernels), else unavailable (a served process's
lifetime high-water is no one attempt's). The first attempt of each adapter process also carries its start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from metewand.measure.accounting import TreeAccounting
from metewand.measure.forms import Measurement, Reason, complete, unavailable
from metewand.measure.process import Process
from metewand.runtime.owned import OwnedJournal
from metewand.suites.browser import event_loop
from metewand.suites.browser.adapters import (
    KILL_WAIT_S,
    STDOUT_LIMIT,
    TERM_GRACE_S,
    AdapterCommand,
    AdapterRun,
    Spares,
    _open_adapter_accounting,
    _record_process,
    _tail,
    check_echo,
    parse_result,
    run_adapter,
    swept,
)
from metewand.suites.browser.op_marks import MarkChannel, MarkSink

MODES: Final = ("per_attempt", "long_lived")
CLOSE_WAIT_S: Final = 5.0  # a served adapter exits on stdin EOF; past this it is stopped
STRAY_WAIT_S: Final = 0.002  # what is already in the pipe is read at once; nothing is awaited


class AdapterRunner(Protocol):
    async def run(
        self,
        payload: Mapping[str, Any],
        deadline_s: float,
        stderr_path: Path,
        marks: MarkSink | None = None,
    ) -> AdapterRun: ...

    async def close(self) -> None: ...


@dataclass
class PerAttemptAdapter:
    """A fresh adapter process per attempt (``run_adapter``)."""

    command: AdapterCommand
    label: str = "adapter"
    journal: OwnedJournal | None = None  # the run's record of what it owns (see adapters)
    spares: Spares | None = None  # the slot's adapter started ahead (adapter_spares)

    async def run(
        self,
        payload: Mapping[str, Any],
        deadline_s: float,
        stderr_path: Path,
        marks: MarkSink | None = None,
    ) -> AdapterRun:
        return await run_adapter(
            self.command,
            payload,
            deadline_s,
            stderr_path,
            self.label,
            self.journal,
            marks,
            self.spares,
        )

    async def close(self) -> None:
        return None


class LongLivedAdapter:
    """One served adapter process at a time, restarted after an attempt that broke it."""

    def __init__(
        self,
        command: AdapterCommand,
        log_path: Path,
        label: str = "adapter",
        journal: OwnedJournal | None = None,
    ) -> None:
        if not command.serve_argv:
            raise ValueError(f"{command.argv[0]}: this adapter has no long-lived (--serve) mode")
        self.command = command
        self.log_path = log_path  # the served processes' stderr, appended across restarts
        self.label = label
        # the run's record: each served process and its group, so that one stuck mid-attempt
        # when the runner is killed (it never sees its stdin end) is swept by --resume
        self.journal = journal
        self.process: Process | None = None
        self.accounting: TreeAccounting | None = None
        # the served process's mark channel (op_marks): open for its life, listened to only
        # by an attempt whose payload asks for marks
        self.channel: MarkChannel | None = None
        self.starts = 0  # adapter processes started (1 + restarts)
        self.stray_restarts = 0  # restarts for output written between payloads
        self._lock = asyncio.Lock()
        self._reader: asyncio.StreamReader | None = None
        # the adapter's stdin and stdout on the loop (not checked by isinstance: uvloop's pipe
        # transports do not subclass asyncio's classes)
        self._into: asyncio.WriteTransport | None = None
        self._out: asyncio.ReadTransport | None = None

    async def _start(self) -> Process:
        """A served adapter in its own session and accounting group, its stdin and stdout on the
        loop (one result line may be large: an AX snapshot)."""
        self.accounting = _open_adapter_accounting(self.label, self.journal)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.channel = MarkChannel()
        with self.log_path.open("ab") as log:
            process = Process.start(
                self.command.serve_argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.command.cwd,
                env={**os.environ, **self.command.env},
                pass_fds=(self.channel.child_fd,),
                join=self.accounting.preexec_join() if self.accounting else None,
            )
        self.channel.started()
        _record_process(self.journal, process)
        if self.accounting is not None:
            self.accounting.attach(process.pid)
        assert process.popen.stdin is not None and process.popen.stdout is not None
        reader = asyncio.StreamReader(limit=STDOUT_LIMIT + 1)
        out, _ = await event_loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), process.popen.stdout
        )
        into, _ = await event_loop.connect_write_pipe(asyncio.Protocol, process.popen.stdin)
        self.process, self._reader, self._into, self._out = process, reader, into, out
        self.starts += 1
        return process

    async def _discard(self) -> list[int]:
        """Stop the current adapter's tree, reap and sweep it, release its group; the pids
        found alive."""
        process, accounting = self.process, self.accounting
        self.process, self.accounting, self._reader = None, None, None
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if process is None:
            return []
        if not process.has_exited():
            await process.terminate_async(TERM_GRACE_S, KILL_WAIT_S)
        leftovers = await swept(process, accounting)
        for transport in (self._into, self._out):
            if transport is not None:
                transport.close()
        self._into = self._out = None
        process.close()
        if accounting is not None:
            with contextlib.suppress(OSError):
                accounting.close()
        return leftovers

    async def run(
        self,
        payload: Mapping[str, Any],
        deadline_s: float,
        stderr_path: Path,
        marks: MarkSink | None = None,
    ) -> AdapterRun:
        async with self._lock:
            return await self._run(payload, deadline_s, stderr_path, marks)

    async def _run(
        self,
        payload: Mapping[str, Any],
        deadline_s: float,
        stderr_path: Path,
        marks: MarkSink | None,
    ) -> AdapterRun:
        process = self.process if self._alive() else None
        if process is not None and await self._stray_output():
            self.stray_restarts += 1  # it wrote after its last result: no attempt owns that
            process = None
        if process is None:
            await self._discard()
            process = await self._start()
        accounting = self.accounting
        if "attempt_id" not in payload:  # the exchange needs one: a result echoes it
            payload = {**payload, "attempt_id": secrets.token_hex(8)}
        log_offset = self._log_size()
        cpu_before = _cpu_value(accounting)
        reset = accounting.reset_memory_peak() if accounting is not None else False
        listener = None
        if marks is not None and self.channel is not None:
            payload, listener = self.channel.offer(payload, marks)
        started = time.monotonic_ns()
        try:
            outcome, result, detail, line = await self._exchange(process, payload, deadline_s)
        finally:
            # the result line is written after every mark of the attempt: all are in the pipe
            op_marks = listener.finish() if listener is not None else None
        wall_ns = time.monotonic_ns() - started
        run = AdapterRun(outcome, detail, result, None, None, wall_ns, "", [])
        run.op_marks = op_marks
        if accounting is not None:
            run.accounting_backend = accounting.backend
            run.cpu_ns = _cpu_delta(cpu_before, _cpu_value(accounting), accounting)
            run.peak_memory_bytes = _peak(accounting, reset)
        if outcome in ("adapter_crash", "adapter_hang", "adapter_garbage"):
            run.leftover_pids = await self._discard()
            code = process.popen.returncode
            run.exit_code, run.exit_signal = (
                (None, -code) if code is not None and code < 0 else (code, None)
            )
            if outcome == "adapter_crash":
                how = f"signal {run.exit_signal}" if run.exit_signal else f"exit status {code}"
                run.detail = f"{detail} with {how}"
        self._copy_log(log_offset, stderr_path)
        run.stderr_tail = _tail(stderr_path)
        return run

    def _alive(self) -> bool:
        return self.process is not None and not self.process.has_exited()

    async def _exchange(
        self, process: Process, payload: Mapping[str, Any], deadline_s: float
    ) -> tuple[str, dict[str, Any] | None, str, bytes]:
        into, reader = self._into, self._reader
        assert into is not None and reader is not None
        try:
            into.write(json.dumps(payload).encode() + b"\n")
            async with asyncio.timeout(deadline_s):
                line = await reader.readline()
        except TimeoutError:
            return "adapter_hang", None, f"no result within {deadline_s:.1f} s", b""
        except (BrokenPipeError, ConnectionResetError):
            line = b""
        except ValueError:  # longer than the stream limit
            return "adapter_garbage", None, f"result line longer than {STDOUT_LIMIT} bytes", b""
        if not line:  # EOF: the adapter died during this attempt (how: once reaped)
            await process.wait_exited_async(5.0)
            return "adapter_crash", None, "served adapter ended during the attempt", b""
        outcome, result, detail = check_echo(
            *parse_result(line), payload.get("attempt_id"), required=True
        )
        if outcome != "adapter_garbage" and await self._stray_output():
            outcome, result = "adapter_garbage", None
            detail = "more output after the result line (one line per payload)"
        return outcome, result, detail, line

    async def _stray_output(self) -> bool:
        """Whether the adapter's stdout holds anything now (read and dropped): a served adapter
        writes exactly one line per payload and nothing between payloads."""
        reader = self._reader
        if reader is None:
            return False
        try:
            async with asyncio.timeout(STRAY_WAIT_S):
                return bool(await reader.read(STDOUT_LIMIT))
        except TimeoutError:
            return False

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def _copy_log(self, offset: int, stderr_path: Path) -> None:
        """The attempt's share of the served adapter's stderr, archived like a one-shot's."""
        stderr_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self.log_path.open("rb") as log:
                log.seek(offset)
                stderr_path.write_bytes(log.read())
        except OSError:
            stderr_path.write_bytes(b"")

    async def close(self) -> None:
        async with self._lock:
            process = self.process
            if process is not None and not process.has_exited() and self._into is not None:
                self._into.close()  # a served adapter exits when its input ends
                await process.wait_exited_async(CLOSE_WAIT_S)
            await self._discard()


def open_adapter(
    command: AdapterCommand,
    mode: str = "per_attempt",
    label: str = "adapter",
    log_path: Path | None = None,
    journal: OwnedJournal | None = None,
    spares: Spares | None = None,
) -> AdapterRunner:
    """The runner for ``mode``; ``long_lived`` needs ``log_path`` (the served stderr) and a
    command with ``serve_argv`` (metewand's shipped adapters have one). With the run's
    ``journal``, every adapter process and group it starts is recorded for the resume sweep.
    ``spares``: a ``per_attempt`` runner's adapters started ahead (``adapter_spares``)."""
    if mode == "per_attempt":
        return PerAttemptAdapter(command, label, journal, spares)
    if mode == "long_lived":
        if log_path is None:
            raise ValueError("long_lived mode needs a log_path for the adapter's stderr")
        return LongLivedAdapter(command, log_path, label, journal)
    raise ValueError(f"unknown adapter mode {mode!r}; choose from {', '.join(MODES)}")


def _cpu_value(accounting: TreeAccounting | None) -> int | None:
    if accounting is None:
        return None
    with contextlib.suppress(OSError):
        return accounting.cpu().total.value
    return None


def _cpu_delta(before: int | None, after: int | None, accounting: TreeAccounting) -> Measurement:
    source = f"{accounting.backend}:delta"
    if before is None or after is None:
        return unavailable(Reason.UNSUPPORTED, source)
    return complete(max(0, after - before), source)


def _peak(accounting: TreeAccounting, reset: bool) -> Measurement | None:
    """The attempt's high-water; a group whose peak cannot restart has only the process's
    lifetime high-water, which is no attempt's figure: unavailable, never passed off as one."""
    with contextlib.suppress(OSError):
        peak = accounting.memory().peak
        if peak is None or reset:
            return peak
        return unavailable(Reason.UNSUPPORTED, f"{accounting.backend}:peak-not-resettable")
    return None
