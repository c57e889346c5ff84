"""One process lifecycle for everything metewand starts: measured subjects, compute workers,
evaluators, materializers and build commands, browser engines and scenario adapters.

- **start**: ``Process.start`` runs argv in a session of its own (so the whole tree it forks,
  helpers re-parented to init included, is one process group and one session), optionally
  joining an accounting group before exec (``join``) and stamping the moment just before exec.
- **wait**: the kernel says when the process exits. A pidfd (``pidfd_open``) becomes readable at
  exit; where there is none (old kernel, other platform) a thread blocked in
  ``waitid(WNOWAIT)`` writes one byte to a pipe, and the pipe's read end stands in for the
  pidfd. Either way ``exit_fd`` is one descriptor that ``poll`` and an asyncio loop can wait on:
  no sleep-and-look loop anywhere, and the exit is seen within the scheduler's wake-up latency.
  ``waiter`` records which one was used (``pidfd`` or ``waitid-thread`` with the reason).
- **stop**: one escalation, TERM (and CONT, so a stopped tree sees it) to the group, a grace,
  then KILL to the group; sync (``terminate``) and async (``terminate_async``) drive the same
  steps.
- **reap**: the exit wait never reaps, so ``/proc/PID`` and the accounting group stay readable
  until the owner reaps it (``reap`` / ``wait``). Reaping KILLs what is left in the group
  first: a tree lives and dies with its leader, and once the leader is reaped its number may
  lead someone else's group, so no group signal is sent after that.

What a run leaves behind after a ``kill -9`` is found and killed by ``measure.process_sweep``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import signal
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, Final, NamedTuple

from metewand.measure import watchdog

if TYPE_CHECKING:
    import subprocess

# subprocess's DEVNULL, without loading subprocess (~2.5 ms of measure's start-up: its selectors,
# locale and threading machinery) where the spawn server starts the commands
DEVNULL: Final = -3

WAITER_PIDFD: Final = "pidfd"
WAITER_THREAD: Final = "waitid-thread"

Join = Callable[[], None]
OnExit = Callable[["Process"], None]
Stream = int | IO[Any] | None


class Ending(NamedTuple):  # not a dataclass: see measure.accounting
    """How a stop went: the status (None: still not reaped after the KILL wait), whether TERM
    was not enough, and whether the process had exited before anything was sent."""

    returncode: int | None
    kill_needed: bool
    already_exited: bool


def open_exit_fd(pid: int) -> tuple[int | None, str | None]:
    """A pidfd for ``pid`` (any process, not only a child) or None with the reason."""
    try:
        return os.pidfd_open(pid), None
    except AttributeError:
        return None, "os.pidfd_open is not available on this platform"
    except OSError as exc:
        return None, f"pidfd_open: {exc.strerror or exc}"


def exit_wait_method() -> tuple[str, str | None]:
    """How this host's processes will be waited for: (``pidfd``, None) or (``waitid-thread``,
    why there is no pidfd) — what ``metewand doctor`` reports."""
    fd, reason = open_exit_fd(os.getpid())
    if fd is None:
        return WAITER_THREAD, reason
    os.close(fd)
    return WAITER_PIDFD, None


def fd_ready(fd: int, timeout_s: float | None) -> bool:
    """Wait until ``fd`` is readable (``None``: no limit). ``poll``, not ``select``: a process
    holding many descriptors may be given one above 1023."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    limit_ms = None if timeout_s is None else max(0, int(timeout_s * 1000 + 0.999))
    return bool(poller.poll(limit_ms))


async def fd_ready_async(fd: int, timeout_s: float | None) -> bool:
    """``fd_ready`` on the running loop. A private duplicate is registered, so any number of
    waits on one process may run at once (a loop keeps one reader per descriptor)."""
    import asyncio  # here: measure's start-up need not load asyncio (~13 ms)

    loop = asyncio.get_running_loop()
    own = os.dup(fd)
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(True)

    loop.add_reader(own, wake)
    try:
        async with asyncio.timeout(timeout_s):
            await ready
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(own)
        os.close(own)


class Process:
    """A started process: its group, its exit descriptor, its stop and its reaping."""

    def __init__(
        self,
        popen: subprocess.Popen[Any],
        exec_ns: int | None,
        watcher: _Watcher | None = None,
        guarded: bool = True,
    ) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.pgid = popen.pid  # a session leader leads its own process group
        self.exec_ns = exec_ns  # the monotonic clock just before exec (``stamp_exec``)
        self.exit_seen_ns: int | None = None  # when the watcher saw the exit
        self._watchers: list[OnExit] = []
        self._watcher = watcher
        self._lock = threading.Lock()
        pidfd, reason = open_exit_fd(popen.pid)
        if pidfd is not None:
            self.exit_fd, self.waiter, self.waiter_reason = pidfd, WAITER_PIDFD, None
        else:
            self.exit_fd, self.waiter, self.waiter_reason = self._exit_pipe(), WAITER_THREAD, reason
        # guarded until reaped: a kill -9 of metewand leaves its watchdog to end it (watchdog).
        # ``guarded`` False: it was born inside accounting groups the watchdog already guards
        # (it kills their members), so no record of its own (two /proc reads and two pipe
        # writes a run, ~0.2 ms)
        self._guard = watchdog.guard_process(popen.pid) if guarded else None
        if watcher is not None:
            watcher.watch(self)

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stdin: Stream = DEVNULL,
        stdout: Stream = None,
        stderr: Stream = None,
        pass_fds: Sequence[int] = (),
        join: Join | None = None,
        stamp_exec: bool = False,
        watch: bool = False,
        guarded: bool = True,
    ) -> Process:
        """Start ``argv`` in a new session. ``join`` runs in the child before exec (it moves
        the child into its accounting group, so nothing the child forks escapes it).
        ``stamp_exec``: record the monotonic clock the child read just before exec (the
        fork's own cost is the tool's, not the command's). ``watch``: a watcher thread, started
        before the process is, stamps ``exit_seen_ns`` (a command shorter than what the caller
        does right after the start is then not charged for it). ``guarded``: see
        ``started_by``. Raises OSError when it cannot start."""
        return cls.started_by(
            lambda: cls._popen(argv, cwd, env, stdin, stdout, stderr, pass_fds, join, stamp_exec),
            watch,
            guarded,
        )

    @classmethod
    def started_by(
        cls, start: Callable[[], tuple[Any, int | None]], watch: bool, guarded: bool = True
    ) -> Process:
        """The process ``start`` starts, returned as ``(popen, exec_ns)``: a ``Popen`` or an
        object with its ``pid``/``returncode``/``poll``/``wait`` (``measure.spawner``).
        ``watch``: the exit watcher thread is started before ``start`` runs. ``guarded``: the
        watchdog keeps a record of it (False: it is inside groups the watchdog guards)."""
        watcher = _Watcher() if watch else None
        try:
            popen, exec_ns = start()
        except BaseException:
            if watcher is not None:
                watcher.cancel()
            raise
        return cls(popen, exec_ns, watcher, guarded)

    @staticmethod
    def _popen(
        argv: Sequence[str],
        cwd: str | os.PathLike[str] | None,
        env: Mapping[str, str] | None,
        stdin: Stream,
        stdout: Stream,
        stderr: Stream,
        pass_fds: Sequence[int],
        join: Join | None,
        stamp_exec: bool,
    ) -> tuple[subprocess.Popen[Any], int | None]:
        import subprocess  # only where the spawn server is not used

        if not stamp_exec:
            popen = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=env,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                pass_fds=tuple(pass_fds),
                start_new_session=True,
                preexec_fn=join,
            )
            return popen, None
        read_end, write_end = os.pipe()

        def join_then_stamp() -> None:
            if join is not None:
                join()
            os.write(write_end, time.monotonic_ns().to_bytes(8, "little"))

        try:
            popen = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=env,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                pass_fds=tuple(pass_fds),
                start_new_session=True,
                preexec_fn=join_then_stamp,
            )
        except BaseException:
            os.close(read_end)
            os.close(write_end)
            raise
        os.close(write_end)  # the child's copy is the only writer left: EOF if it never stamps
        try:
            stamp = os.read(read_end, 8)
        finally:
            os.close(read_end)
        return popen, int.from_bytes(stamp, "little")

    def _exit_pipe(self) -> int:
        """No pidfd here: a thread blocked in ``waitid(WNOWAIT)`` (which leaves the child
        unreaped) writes one byte at exit; the byte is never read, so the end stays readable."""
        read_end, write_end = os.pipe()
        pid = self.pid

        def wait() -> None:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            os.write(write_end, b"x")
            os.close(write_end)

        threading.Thread(target=wait, name=f"metewand-exit-{pid}", daemon=True).start()
        return read_end

    # -- exit ---------------------------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        """The status once the process has exited (reaping it then), else None."""
        if self.popen.returncode is None and self.has_exited():
            self.reap()
        return self.popen.returncode

    def has_exited(self) -> bool:
        """Has the process exited? Never reaps (its /proc entry stays readable)."""
        if self.exit_fd < 0:
            return self.popen.poll() is not None
        return self.popen.returncode is not None or fd_ready(self.exit_fd, 0)

    def wait_exited(self, timeout_s: float | None) -> bool:
        """Block until the process exits (True) or ``timeout_s`` passes (False); no reaping."""
        if self.exit_fd < 0:  # closed: only Popen is left to ask
            import subprocess

            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout_s)
            return self.popen.returncode is not None
        return self.popen.returncode is not None or fd_ready(self.exit_fd, timeout_s)

    async def wait_exited_async(self, timeout_s: float | None) -> bool:
        if self.popen.returncode is not None or self.exit_fd < 0:
            return self.has_exited()
        return await fd_ready_async(self.exit_fd, timeout_s)

    def reap(self) -> int:
        """Collect the status of the process (blocking until it exits). What is left in its
        group is KILLed first: a tree lives and dies with its leader, and only while the leader
        is unreaped is the group's number sure to be still its own."""
        if self.popen.returncode is None:
            self.wait_exited(None)
            self.signal_group(signal.SIGKILL)
        return self.popen.wait()

    def wait(self, timeout_s: float | None) -> int | None:
        """The status once the process exits within ``timeout_s`` (reaped), else None."""
        return self.reap() if self.wait_exited(timeout_s) else None

    async def wait_async(self, timeout_s: float | None) -> int | None:
        return self.reap() if await self.wait_exited_async(timeout_s) else None

    def exit_status_unreaped(self) -> int | None:
        """``si_status`` of the exited, not yet reaped process (its exit status, or the signal
        that ended it); None while it runs or once it is reaped."""
        if self.popen.returncode is None:
            with contextlib.suppress(ChildProcessError, OSError):
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
                return info.si_status if info is not None else None
        return None

    def on_exit(self, callback: OnExit) -> None:
        """Call ``callback(self)`` from the watcher thread the moment the process exits
        (without reaping it); ``exit_seen_ns`` is stamped before any callback runs."""
        with self._lock:
            if self.exit_seen_ns is None:
                self._watchers.append(callback)
                self._ensure_watcher()
                return
        callback(self)  # already seen

    def exit_seen(self, timeout_s: float | None = None) -> int | None:
        """The moment the watcher saw the exit (waiting up to ``timeout_s`` for it)."""
        with self._lock:
            self._ensure_watcher()
            watcher = self._watcher
        assert watcher is not None
        watcher.join(timeout_s)
        return self.exit_seen_ns

    def _ensure_watcher(self) -> None:
        if self._watcher is None:
            self._watcher = _Watcher()
        self._watcher.watch(self)

    def _watched(self) -> None:
        """Run by the watcher thread once the exit descriptor is readable."""
        self.exit_seen_ns = time.monotonic_ns()
        with self._lock:
            watchers, self._watchers = self._watchers, []
        for callback in watchers:
            callback(self)

    # -- stop ---------------------------------------------------------------------------------

    def signal_group(self, signum: int) -> None:
        """Signal the whole process group (members left after the leader's exit too). Never
        after the leader was reaped: its number could then lead someone else's group."""
        if self.popen.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signum)

    def _escalation(self, grace_s: float, kill_wait_s: float) -> Generator[float, bool, Ending]:
        """The one stop sequence: yields how long to wait for the exit, is sent whether it came."""
        if self.has_exited():
            return Ending(self.reap(), False, True)  # the reap KILLs members left behind
        self.signal_group(signal.SIGTERM)
        self.signal_group(signal.SIGCONT)  # a stopped tree would hold the TERM for the grace
        kill_needed = not (yield grace_s)
        if kill_needed:
            self.signal_group(signal.SIGKILL)
            if not (yield kill_wait_s):  # only an uninterruptible sleep gets here
                return Ending(None, True, False)
        return Ending(self.reap(), kill_needed, False)

    def terminate(self, grace_s: float, kill_wait_s: float = 5.0) -> Ending:
        """TERM the group, wait up to ``grace_s``, KILL the group; reaps the leader."""
        steps = self._escalation(grace_s, kill_wait_s)
        try:
            limit = next(steps)
            while True:
                limit = steps.send(self.wait_exited(limit))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def terminate_async(self, grace_s: float, kill_wait_s: float = 5.0) -> Ending:
        steps = self._escalation(grace_s, kill_wait_s)
        try:
            limit = next(steps)
            while True:
                limit = steps.send(await self.wait_exited_async(limit))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def kill(self, wait_s: float | None = 5.0) -> int | None:
        """KILL the whole group now and reap the leader (None if it outlived ``wait_s``)."""
        self.signal_group(signal.SIGKILL)
        return self.wait(wait_s)

    def close(self) -> None:
        """Release the exit descriptor (once: a closed number may already be another file's)."""
        fd, self.exit_fd = self.exit_fd, -1
        guard, self._guard = getattr(self, "_guard", None), None
        if guard is not None and self.popen.returncode is not None:
            watchdog.release_process(self.pid, *guard)
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        self.close()


class _Watcher:
    """A thread that waits (blocked, never polling) for one process's exit descriptor, then
    tells the process. It can be started before the process exists (``Process.start(watch=)``)
    so that thread creation is not between the exec and the exit."""

    def __init__(self) -> None:
        self._handoff: queue.SimpleQueue[tuple[Process, int] | None] = queue.SimpleQueue()
        self._given = False
        self._thread = threading.Thread(target=self._run, name="metewand-exit-watch", daemon=True)
        self._thread.start()

    def watch(self, process: Process) -> None:
        if not self._given:
            self._given = True
            # A descriptor of its own, taken now: the owner may close the process's own before
            # this thread runs.
            self._handoff.put((process, os.dup(process.exit_fd)))

    def cancel(self) -> None:
        if not self._given:
            self._given = True
            self._handoff.put(None)

    def join(self, timeout_s: float | None) -> None:
        self._thread.join(timeout_s)

    def _run(self) -> None:
        given = self._handoff.get()
        if given is None:
            return
        process, own = given
        try:
            fd_ready(own, None)
        finally:
            os.close(own)
        process._watched()


class Captured(NamedTuple):
    """What ``run_captured`` saw: the status (None when the deadline ended it) and the output."""

    returncode: int | None
    stdout: bytes
    stderr: bytes

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_captured(
    argv: Sequence[str],
    timeout_s: float | None,
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Captured:
    """Run a short command to its end (or its deadline, then KILL its group) and return its
    output. The output goes to files, not pipes: a helper it left holding a pipe would keep a
    reader waiting, and the exit (not the pipes' end) is what ends the run."""
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = Process.start(argv, cwd=cwd, env=env, stdout=out, stderr=err)
        try:
            exited = proc.wait_exited(timeout_s)
        finally:
            code = proc.kill()  # reaps; what it left in its group goes with it
            proc.close()
        out.seek(0)
        err.seek(0)
        return Captured(code if exited else None, out.read(), err.read())
