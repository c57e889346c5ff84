"""Run one scenario adapter for one attempt and classify how it ended.

An adapter is any executable speaking the ``abb_scenario_adapter/1`` contract: one JSON payload on
stdin, exactly one JSON object on stdout, diagnostics on stderr, exit status 0 unless the adapter
itself crashed. It runs in its own session (so its process group can be signalled as a whole) and
in its own accounting group (so its CPU and peak memory are the driver's, apart from the
engine's, and so a grandchild that left the process group is still found and killed).

Whatever the adapter does, ``run_adapter`` returns one ``AdapterRun`` with one outcome:

- ``result``: a parseable result object (``ok: true``); its checks grade the attempt;
- ``adapter_error``: ``ok: false`` with ``error`` (the contract's harness problem, graded infra);
- ``adapter_crash``: a non-zero exit status or a death by signal, before its deadline;
- ``adapter_hang``: no exit by the deadline (stopped with TERM, then KILL);
- ``adapter_garbage``: exit 0 but stdout is not exactly one JSON object.

No process of the adapter's tree outlives the call: members still alive after it exits are killed
and named in ``leftover_pids`` (a well-behaved adapter leaves none). The adapter is started, waited
for and stopped by ``measure.process`` (its exit wakes the wait through a pidfd, no polling); its
pipes are read and written on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Protocol

from metewand.measure import gate, process_sweep
from metewand.measure.accounting import (
    AccountingUnavailable,
    CgroupAccounting,
    TreeAccounting,
    open_accounting,
)
from metewand.measure.forms import Measurement
from metewand.measure.process import Process
from metewand.runtime.owned import OwnedJournal
from metewand.suites.browser import event_loop
from metewand.suites.browser.classify import Classification
from metewand.suites.browser.op_marks import MarkChannel, MarkSink, OpListener

PROTOCOL: Final = "abb_scenario_adapter/1"
OUTCOMES: Final = ("result", "adapter_error", "adapter_crash", "adapter_hang", "adapter_garbage")
STDOUT_LIMIT: Final = 16 * 1024 * 1024  # a result is small; more than this is garbage, not a row
STDOUT_DRAIN_S: Final = 2.0  # after the sweep every writer is gone, so EOF is immediate
TERM_GRACE_S: Final = 2.0  # between TERM and KILL on a hang: enough for a Node/Python exit hook
KILL_WAIT_S: Final = 30.0  # KILL is not ignorable; this only bounds an uninterruptible sleep
# A well-behaved adapter's children (an MCP server it closed, a bridge) may still be exiting when
# the adapter's exit is seen (at once, through its pidfd): they are leftovers only if still
# alive after this.
EXITING_GRACE_S: Final = 0.05
SWEEP_WAIT_S: Final = 5.0  # killed members take a moment to leave; the group goes once empty
STDERR_TAIL: Final = 2000
CGROUP_BACKENDS: Final = ("cgroup2", "cgroup1")
# The deadline beyond the payload's task budget: the adapter clamps its own waits to the budget,
# so only an adapter that ignores it (or is stuck starting) meets this margin.
DEADLINE_MARGIN_S: Final = 5.0


@dataclass(frozen=True)
class AdapterCommand:
    """How to start one adapter: argv, extra environment, working directory, and the argv of its
    long-lived mode (empty: it has none; see ``adapter_server``)."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    serve_argv: tuple[str, ...] = ()


@dataclass
class AdapterRun:
    outcome: str
    detail: str
    result: dict[str, Any] | None
    exit_code: int | None
    exit_signal: int | None
    wall_ns: int
    stderr_tail: str
    leftover_pids: list[int]
    cpu_ns: Measurement | None = None  # the adapter tree's own CPU (None: no accounting opened)
    peak_memory_bytes: Measurement | None = None
    accounting_backend: str | None = None
    # the mark channel's counts when the attempt listened to it (op_marks; None: no marks)
    op_marks: dict[str, Any] | None = None

    @property
    def checks(self) -> list[dict[str, Any]]:
        observations = (self.result or {}).get("observations") or {}
        checks = observations.get("checks") if isinstance(observations, dict) else None
        return [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []

    def classification(self) -> Classification:
        return classify_run(self)

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "detail": self.detail,
            "exit_code": self.exit_code,
            "exit_signal": self.exit_signal,
            "wall_ns": self.wall_ns,
            "leftover_pids": self.leftover_pids,
            "accounting_backend": self.accounting_backend,
            "cpu_ns": self.cpu_ns.to_json() if self.cpu_ns else None,
            "peak_memory_bytes": self.peak_memory_bytes.to_json()
            if self.peak_memory_bytes
            else None,
        }


def classify_run(run: AdapterRun) -> Classification:
    """The attempt's status from how the adapter ended. An adapter's own trouble is never an
    engine result: it is ``crash``/``timeout``/``infra`` with origin ``adapter``."""
    if run.outcome == "result":
        failed = [str(c.get("name", "?")) for c in run.checks if c.get("status") != "pass"]
        if not run.checks:
            return Classification("fail", "script_error", "adapter", "result has no checks")
        if not failed:
            return Classification("pass", None, None, "")
        observations = (run.result or {}).get("observations") or {}
        failure_class = str(observations.get("failure_class") or "cdp_semantic")
        reason = "checks failed: " + ", ".join(failed)
        return Classification("fail", failure_class, "engine_process", reason)
    status = {"adapter_crash": "crash", "adapter_hang": "timeout"}.get(run.outcome, "infra")
    return Classification(status, "infra", "adapter", f"{run.outcome}: {run.detail}")


def parse_result(stdout: bytes) -> tuple[str, dict[str, Any] | None, str]:
    """(outcome, result, detail) for an adapter that exited 0."""
    if len(stdout) > STDOUT_LIMIT:
        return "adapter_garbage", None, f"stdout longer than {STDOUT_LIMIT} bytes"
    text = stdout.decode("utf-8", errors="replace").strip()
    if not text:
        return "adapter_garbage", None, "stdout is empty"
    try:
        result = json.loads(text)
    except json.JSONDecodeError as exc:
        return "adapter_garbage", None, f"stdout is not one JSON object ({exc.msg}): {text[:200]!r}"
    if not isinstance(result, dict):
        return "adapter_garbage", None, f"stdout JSON is a {type(result).__name__}, not an object"
    if result.get("ok") is False:
        error = result.get("error") or {}
        if not isinstance(error, dict):
            error = {"message": str(error)}
        return "adapter_error", result, f"{error.get('class', '?')}: {error.get('message', '')}"
    if result.get("ok") is not True:
        return "adapter_garbage", result, "result object has no boolean ok"
    return "result", result, ""


def check_echo(
    outcome: str, result: dict[str, Any] | None, detail: str, attempt_id: Any, required: bool
) -> tuple[str, dict[str, Any] | None, str]:
    """A parsed result counts only for the attempt whose ``attempt_id`` it echoes. A served
    adapter must echo it (a line it wrote for another payload would otherwise be credited to
    this one); a one-shot adapter of the plain contract may leave it out, never get it wrong."""
    if outcome not in ("result", "adapter_error") or result is None or attempt_id is None:
        return outcome, result, detail
    echoed = result.get("attempt_id")
    if echoed == attempt_id or (echoed is None and not required):
        return outcome, result, detail
    why = "does not echo" if echoed is None else f"echoes {str(echoed)[:80]!r}, not"
    return "adapter_garbage", None, f"result {why} this attempt's id {attempt_id!r}"


def _open_adapter_accounting(
    label: str, journal: OwnedJournal | None = None
) -> TreeAccounting | None:
    """The adapter's own group; None when no backend works here (the run then relies on the
    process group alone, and says so through ``accounting_backend``). With the run's
    ``journal``, each group is recorded before it is made (a runner killed mid-attempt leaves
    a record the resume sweep removes it by)."""
    announce = journal.group if journal is not None else None
    try:
        return open_accounting("auto", label=label, announce=announce)
    except AccountingUnavailable:
        return None


def _record_process(journal: OwnedJournal | None, process: Process) -> None:
    """The adapter's pid, start time and session in the run's journal: an adapter stuck
    mid-attempt outlives a killed runner (it never reads the end of its stdin), and the resume
    sweep kills it and its session by this record."""
    if journal is not None:
        journal.process(process.pid)


def _group_members(process: Process) -> set[int]:
    return {m.pid for m in process_sweep.members(pgid=process.pgid) if m.state != "Z"}


def _left_behind(process: Process, accounting: TreeAccounting | None) -> list[int]:
    """Live members of the adapter's process group and of its accounting group, the adapter
    itself (exited, not yet reaped) apart. A cgroup holds every process the adapter started
    (they are born in it, whatever group or session they make for themselves), so the process
    group is walked (every /proc/PID/stat on the host: ~3 ms an attempt here) only when there
    is no cgroup to ask."""
    in_cgroup = accounting is not None and accounting.backend in CGROUP_BACKENDS
    found = set() if in_cgroup else _group_members(process)
    if accounting is not None:
        try:
            found.update(accounting.pids())
        except OSError:
            if in_cgroup:  # the group cannot be asked after all: walk the process group
                found = _group_members(process)
    found.discard(process.pid)
    return sorted(found)


def _sweep(
    process: Process, accounting: TreeAccounting | None, found: list[int] | None = None
) -> list[int]:
    """Kill what the adapter left behind (its process group, its accounting group's members),
    reap the adapter, and wait until all of it is gone. Returns the pids found alive.
    ``found``: what was left behind, when the caller has just looked."""
    if found is None:
        found = _left_behind(process, accounting)
    if found:  # a child told to stop as the adapter exits is still going: let it finish
        found = process_sweep.wait_gone(found, EXITING_GRACE_S)
    if process.has_exited():
        process.reap()  # KILLs what is left in its group first

    def still_there() -> list[int]:
        # After the reap the group's number may be someone else's: by pid and accounting only.
        members: set[int] = set(found)
        if accounting is not None:
            with contextlib.suppress(OSError):
                members.update(accounting.pids())
        return sorted(members)

    process_sweep.kill_until_gone(still_there, SWEEP_WAIT_S)
    return found


async def swept(process: Process, accounting: TreeAccounting | None) -> list[int]:
    """``_sweep`` after the adapter's exit: inline when its cgroup holds nobody but the exited
    adapter (the usual end: no one is left who could fork, so nothing can be waited for), on a
    worker thread otherwise (a member may take up to ``SWEEP_WAIT_S`` to go). The thread's
    hand-over cost the harness ~0.4 ms of CPU per attempt."""
    if process.has_exited() and accounting is not None and accounting.backend in CGROUP_BACKENDS:
        try:
            members = accounting.pids()
        except OSError:
            members = [-1]  # cannot be asked: the worker thread walks the process group
        if all(pid == process.pid for pid in members):
            return _sweep(process, accounting, found=[])
    return await asyncio.to_thread(_sweep, process, accounting)


def release(channel: MarkChannel | None, accounting: TreeAccounting | None) -> None:
    """Close an adapter's mark channel and remove its groups (members killed first)."""
    if channel is not None:
        channel.close()
    if accounting is not None:
        with contextlib.suppress(OSError):
            accounting.close()


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - STDERR_TAIL))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


@dataclass
class BegunAdapter:
    """An adapter process as started: the process, its groups (None: no backend here), its
    mark channel (None: no marks) and whether it waits at the gate for ``GATE_LINE``."""

    process: Process
    accounting: TreeAccounting | None
    channel: MarkChannel | None
    gated: bool


class Spares(Protocol):
    """Adapters started ahead of their attempts (``adapter_spares.AdapterSpares``)."""

    async def take(
        self, command: AdapterCommand, label: str, stderr_path: Path
    ) -> BegunAdapter | None: ...

    def refill(self, command: AdapterCommand, label: str) -> None: ...


async def run_adapter(
    command: AdapterCommand,
    payload: Mapping[str, Any],
    deadline_s: float,
    stderr_path: Path,
    label: str = "adapter",
    journal: OwnedJournal | None = None,
    marks: MarkSink | None = None,
    spares: Spares | None = None,
) -> AdapterRun:
    """Run ``command`` with ``payload`` on stdin; stderr is archived at ``stderr_path``; with
    the run's ``journal`` the adapter's group and process are recorded (``_record_process``).
    ``marks``: where the attempt's phase marks go; the adapter then gets a mark channel
    (``op_marks``) and the payload its descriptor (and the engine group's files, where the
    adapter reads them itself), and each line it writes is a mark.
    ``spares``: the slot's adapter started ahead is used when it is this command's, and the
    next one is started once this one has its input (``adapter_spares``)."""
    stderr_path.parent.mkdir(parents=True, exist_ok=True)
    with_channel = marks is not None
    started = time.monotonic_ns()
    ahead = None
    if spares is not None:
        ahead = await spares.take(command, label, stderr_path)
    begun = ahead or start_adapter(command, stderr_path, label, journal, with_channel)
    process, accounting, channel = begun.process, begun.accounting, begun.channel
    listener: OpListener | None = None
    try:
        try:
            if channel is not None and marks is not None:  # a spare has one, used or not
                payload, listener = channel.offer(payload, marks)
            if accounting is not None and not begun.gated:
                accounting.attach(process.pid)
            refill = None
            if spares is not None:
                refill = functools.partial(spares.refill, command, label)
            first = gate.GATE_LINE if begun.gated else b""
            run = await _supervise(
                process,
                payload,
                deadline_s,
                stderr_path,
                accounting,
                started,
                listener,
                first,
                refill,
            )
            listener = None  # _supervise finished it once the adapter had exited
            return run
        finally:
            process.close()
    finally:
        if listener is not None:
            listener.finish()
        release(channel, accounting)


def start_adapter(
    command: AdapterCommand,
    stderr_path: Path,
    label: str,
    journal: OwnedJournal | None,
    with_channel: bool,
) -> BegunAdapter:
    """The adapter started now in its own groups, through the gate where there are groups
    (then still waiting for ``GATE_LINE``): a ``preexec_fn`` join is a full fork of this
    process, which cost it ~29 ms of CPU per adapter with an 80 MB heap."""
    accounting = _open_adapter_accounting(label, journal)
    channel = MarkChannel() if with_channel else None
    groups = accounting if gate.can_join(accounting) else None
    try:
        with stderr_path.open("wb") as stderr_file:
            process = _start(command, _env(command), stderr_file, channel, accounting, groups)
    except BaseException:
        release(channel, accounting)
        raise
    _record_process(journal, process)
    if channel is not None:
        channel.started()
    return BegunAdapter(process, accounting, channel, groups is not None)


def _env(command: AdapterCommand) -> dict[str, str]:
    return {**os.environ, **command.env}


def _start(
    command: AdapterCommand,
    env: dict[str, str],
    stderr: IO[bytes],
    channel: MarkChannel | None,
    accounting: TreeAccounting | None,
    groups: CgroupAccounting | None,
) -> Process:
    """The adapter, started inside its groups; a gated one waits for ``GATE_LINE`` on stdin."""
    streams: dict[str, Any] = {
        "stdin": subprocess.PIPE,
        "stdout": subprocess.PIPE,
        "stderr": stderr,
        "pass_fds": (channel.child_fd,) if channel is not None else (),
    }
    if groups is not None:  # through the gate, moved into ``groups`` already
        return gate.start_joined(command.argv, groups, env=env, cwd=command.cwd, **streams)
    join = accounting.preexec_join() if accounting is not None else None
    return Process.start(command.argv, env=env, cwd=command.cwd, join=join, **streams)


async def _feed(pipe: IO[bytes], data: bytes) -> asyncio.WriteTransport:
    """Write the payload to the adapter's stdin on the loop and close it once written. An
    adapter that exits (or closes stdin) before reading it makes the write fail quietly: its
    exit tells why."""
    transport, _ = await event_loop.connect_write_pipe(asyncio.Protocol, pipe)
    transport.write(data)
    transport.close()
    return transport


async def _open_reader(pipe: IO[bytes]) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    reader = asyncio.StreamReader()
    transport, _ = await event_loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), pipe
    )
    return reader, transport


async def _read_all(stream: asyncio.StreamReader | None) -> bytes:
    """stdout up to EOF, but never more than the limit plus one byte (which marks garbage)."""
    chunks: list[bytes] = []
    size = 0
    while stream is not None and size <= STDOUT_LIMIT:
        chunk = await stream.read(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


async def _exit_or_overflow(
    process: Process, reader: asyncio.Task[bytes], deadline_s: float
) -> tuple[bool, bool]:
    """(hung, overflow): wait for the adapter's exit, or its stdout passing ``STDOUT_LIMIT``
    (an adapter printing 300 MB would otherwise block on a full pipe until its deadline)."""
    exited = asyncio.ensure_future(process.wait_exited_async(deadline_s))
    await asyncio.wait({exited, reader}, return_when=asyncio.FIRST_COMPLETED)
    if reader.done() and len(reader.result()) > STDOUT_LIMIT:
        exited.cancel()
        return False, True
    return not await exited, False


async def _supervise(
    process: Process,
    payload: Mapping[str, Any],
    deadline_s: float,
    stderr_path: Path,
    accounting: TreeAccounting | None,
    started: int,
    listener: OpListener | None = None,
    first: bytes = b"",
    fed: Callable[[], None] | None = None,
) -> AdapterRun:
    # The adapter's exit ends the attempt, not stdout's EOF: a grandchild that inherited stdout
    # (a bridge, a daemon) would otherwise hold the run open. It is swept first, then stdout read.
    assert process.popen.stdin is not None and process.popen.stdout is not None
    stdout_reader, stdout_transport = await _open_reader(process.popen.stdout)
    reader = asyncio.create_task(_read_all(stdout_reader))
    stdin_transport = await _feed(process.popen.stdin, first + json.dumps(payload).encode())
    if fed is not None:  # e.g. the next adapter started ahead, while this one starts up
        fed()
    hung, overflow = await _exit_or_overflow(process, reader, deadline_s)
    if hung or overflow:  # past the limit it is garbage however it ends: stop it now
        await process.terminate_async(TERM_GRACE_S, KILL_WAIT_S)
    wall_ns = time.monotonic_ns() - started
    # the adapter has exited: every mark it wrote is in the pipe (read now, before the sweep)
    op_marks = listener.finish() if listener is not None else None
    leftovers = await swept(process, accounting)
    try:
        async with asyncio.timeout(STDOUT_DRAIN_S):
            stdout = await reader
    except TimeoutError:
        stdout = b""
    if stdin_transport.get_write_buffer_size():  # never read: drop it (else already closed)
        stdin_transport.abort()
    stdout_transport.close()
    code = process.popen.returncode
    exit_code, exit_signal = (None, -code) if code is not None and code < 0 else (code, None)
    if overflow:
        outcome, result, detail = (
            "adapter_garbage",
            None,
            f"stdout longer than {STDOUT_LIMIT} bytes",
        )
    elif hung:
        outcome, result, detail = "adapter_hang", None, f"no exit within {deadline_s:.1f} s"
    elif exit_code != 0:
        how = f"signal {exit_signal}" if exit_signal else f"exit status {exit_code}"
        outcome, result, detail = "adapter_crash", None, f"adapter ended with {how}"
    else:
        outcome, result, detail = check_echo(
            *parse_result(stdout), payload.get("attempt_id"), required=False
        )
    run = AdapterRun(
        outcome, detail, result, exit_code, exit_signal, wall_ns, _tail(stderr_path), leftovers
    )
    run.op_marks = op_marks
    if accounting is not None:
        run.accounting_backend = accounting.backend
        run.cpu_ns = accounting.cpu().total
        run.peak_memory_bytes = accounting.memory().peak
    return run
