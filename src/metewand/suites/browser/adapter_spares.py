"""A slot's next per-attempt adapter, started ahead of its attempt.

A per-attempt adapter starts through the gate (``measure.gate``): a shell started by ``vfork``,
moved into the adapter's fresh groups, then told to exec the adapter. The move is a write of the
shell's pid to each group's ``cgroup.procs``, and the first such move after a quiet while waits
for an RCU grace period in the kernel (the cgroup thread-group lock's writer side): 6-11 ms of
wall here on an idle host, up to 23 ms with an engine busy, against 0.1 ms for a move right
after another. Attempts are hundreds of ms apart, so each paid it, inside its ``duration_ms``
(the adapter cannot start before it is in its groups).

``AdapterSpares`` keeps one adapter's gate ready: once an attempt's adapter has its input, the
next one is started (its groups made, its shell started, its mark channel open, its stderr in
a file of the run's staging dir) and moved into its groups on a worker thread, while the
current adapter runs. The next attempt of the same command takes it: the move is long done, its
stderr file is renamed into the attempt's artifact dir, and the gate line and payload are
written as for an adapter started then. The spare is only a shell waiting on its stdin inside
empty fresh groups: nothing of it is charged to the attempt that takes it but the shell's exec,
as for one started then. A spare made for another command (another driver path or label) or
whose move failed is discarded (killed, groups removed) and the attempt starts its own; the
slot's last spare is discarded when its adapters close. Its groups are in the run's journal
before they are made and its process once moved, so a killed runner's spare is swept on resume
(a shell killed before that exits by itself when its stdin ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from metewand.measure import gate
from metewand.measure.accounting import CgroupAccounting
from metewand.measure.process import Process
from metewand.runtime.owned import OwnedJournal
from metewand.suites.browser.adapters import (
    AdapterCommand,
    BegunAdapter,
    _env,
    _open_adapter_accounting,
    _record_process,
    release,
)
from metewand.suites.browser.op_marks import MarkChannel

DISCARD_WAIT_S: Final = 5.0


def spare_key(command: AdapterCommand, label: str) -> tuple[Any, ...]:
    """What a spare must match to serve an attempt: the command and its label."""
    return (command.argv, tuple(sorted(command.env.items())), command.cwd, label)


@dataclass
class _Spare:
    key: tuple[Any, ...]
    begun: BegunAdapter
    stderr_path: Path
    joined: Future[None]  # the shell's move into its groups (the spares' mover thread)


class AdapterSpares:
    """One slot's next per-attempt adapter (see the module doc); used on the slot's loop."""

    def __init__(self, stage_dir: Path, journal: OwnedJournal | None = None) -> None:
        self.stage_dir = stage_dir  # on the artifact dirs' file system: the stderr is renamed
        self.journal = journal
        self._spare: _Spare | None = None
        self.refused: str | None = None  # why no spare is made here (no groups, no gate)
        self.last_error: str | None = None  # why the last refill made none (it is tried again)
        self.taken = 0
        self.discarded = 0
        self._mover: ThreadPoolExecutor | None = None  # one thread, made with the first spare

    @property
    def waiting(self) -> BegunAdapter | None:
        """The spare waiting for its attempt, if any."""
        return self._spare.begun if self._spare is not None else None

    async def take(
        self, command: AdapterCommand, label: str, stderr_path: Path
    ) -> BegunAdapter | None:
        """The spare when it is this command's and in its groups, its stderr now at
        ``stderr_path``; else None (a spare that does not serve is discarded)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        if spare.key != spare_key(command, label):
            await self._discard(spare)
            return None
        try:
            await _moved(spare.joined)
            if spare.begun.process.has_exited():  # killed while it waited: not a start
                raise ChildProcessError(f"the spare gate {spare.begun.process.pid} exited")
            os.replace(spare.stderr_path, stderr_path)
        except OSError:  # the move failed (a group gone, no permission), or the above
            await self._discard(spare)
            return None
        except BaseException:  # cancelled while the move was finishing: it goes all the same
            await asyncio.shield(self._discard(spare))
            raise
        self.taken += 1
        return spare.begun

    def refill(self, command: AdapterCommand, label: str) -> None:
        """See ``_refill``; a failure here is never the current attempt's: the next attempt
        then starts its own adapter (``last_error`` says why none was ready)."""
        try:
            self._refill(command, label)
        except Exception as exc:  # noqa: BLE001 - the attempt in flight goes on regardless
            self.last_error = f"{type(exc).__name__}: {exc}"

    def _refill(self, command: AdapterCommand, label: str) -> None:
        """Start the next adapter's gate now, its move into its groups on a worker thread. It
        has a mark channel whether its attempt will mark or not (an attempt without marks
        does not tell the adapter about it: an interleaved calibration's unobserved twin and
        its observed attempt can then take each other's spares)."""
        if self._spare is not None or self.refused is not None:
            return
        accounting = _open_adapter_accounting(label, self.journal)
        if not gate.can_join(accounting):
            self.refused = "no accounting groups to start an adapter in ahead of its attempt"
            release(None, accounting)
            return
        channel = MarkChannel()
        stderr_name: str | None = None
        process: Process | None = None
        try:
            self.stage_dir.mkdir(parents=True, exist_ok=True)
            fd, stderr_name = tempfile.mkstemp(prefix="adapter-stderr-", dir=self.stage_dir)
            with os.fdopen(fd, "wb") as stderr_file:
                process = gate.start_held(
                    command.argv,
                    env=_env(command),
                    cwd=command.cwd,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr_file,
                    pass_fds=(channel.child_fd,),
                )
            channel.started()
            joined = self._movers().submit(self._move, accounting, process)
        except BaseException:  # nothing half made is kept (refill says why none is ready)
            if process is not None:
                process.kill(DISCARD_WAIT_S)
                process.close()
            release(channel, accounting)
            if stderr_name is not None:
                with contextlib.suppress(OSError):
                    os.unlink(stderr_name)
            raise
        begun = BegunAdapter(process, accounting, channel, gated=True)
        self._spare = _Spare(spare_key(command, label), begun, Path(stderr_name), joined)

    def _move(self, accounting: CgroupAccounting, process: Process) -> None:
        """On the mover thread: the shell into its groups, then its journal record. By then
        (the move takes ~10 ms) the shell waits on its stdin; read on the loop right after its
        start, its /proc entry held the loop 0.75 ms while the shell was still starting (0.13
        ms of CPU either way). A runner killed before the record leaves a shell that exits by
        itself (its stdin ends), in groups already recorded."""
        accounting.attach(process.pid)
        _record_process(self.journal, process)

    def _movers(self) -> ThreadPoolExecutor:
        if self._mover is None:
            self._mover = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mw-spare-move")
        return self._mover

    async def close(self) -> None:
        """Discard the spare left (the slot's adapters close), then let the mover thread go."""
        spare, self._spare = self._spare, None
        if spare is not None:
            await self._discard(spare)
        if self._mover is not None:
            self._mover.shutdown(wait=False)
            self._mover = None

    async def _discard(self, spare: _Spare) -> None:
        self.discarded += 1
        with contextlib.suppress(Exception):  # moved or not, it goes
            await _moved(spare.joined)
        process, begun = spare.begun.process, spare.begun
        with contextlib.suppress(ProcessLookupError, PermissionError):
            process.signal_group(signal.SIGKILL)  # a shell still waiting for its line
        await process.wait_async(DISCARD_WAIT_S)
        for pipe in (process.popen.stdin, process.popen.stdout):
            if pipe is not None:
                pipe.close()
        process.close()
        release(begun.channel, begun.accounting)
        with contextlib.suppress(OSError):
            spare.stderr_path.unlink()


async def _moved(joined: Future[None]) -> None:
    """The move's end: a move done long before (the usual case: it ends ~10 ms into the
    current adapter's run) is read at once, so its end never wakes the loop; one still under
    way is waited for."""
    if not joined.done():
        await asyncio.wrap_future(joined)
    joined.result()
