"""Start measured commands inside their accounting groups without forking metewand.

A command joins its groups before its first instruction. ``subprocess`` can only arrange that
with a ``preexec_fn``: a full ``fork`` of metewand (page tables, then copy-on-write faults as
the child runs Python) and Python code in the child after the join, whose CPU (~1 ms for
``true`` here) was charged to the command. The ``Spawner`` instead keeps a small server process
(``measure.spawn_server``) and, per command:

1. moves the server into the command's fresh groups (its pid written to each ``cgroup.procs``;
   this works for cgroup2 and cgroup1 alike, unlike ``CLONE_INTO_CGROUP``, which is cgroup2
   only and not reachable from Python here),
2. has it ``posix_spawn`` the command (``vfork`` + exec: a child is born in its parent's
   groups, so the command's first allocation and every process it forks are accounted),
3. moves the server back to its own groups.

What the groups are charged for besides the command: the server's own work between steps 1 and
3 (reading the request, the spawn call, the reply; it allocates nothing new in steady state).
The command's process is the server's child: the server reaps it on request
(``SpawnedChild``), so ``measure.process.Process`` drives it as it drives a ``Popen`` — exit
through a pidfd, TERM/KILL of its process group, reaping.
"""

from __future__ import annotations

import contextlib
import errno
import marshal
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from metewand.errors import MetewandError
from metewand.measure import spawn_server

if TYPE_CHECKING:
    from metewand.measure.process import Process

# measure.process (and subprocess, threads, queues) are imported where a command is started, not
# here: measure opens its spawner first thing, so the server's interpreter starts while measure
# loads the rest of its modules (importing process here put ~35 ms of imports before the spawn).

# (group's cgroup.procs, the cgroup.procs the server returns to) for each group to join
JoinPaths = Sequence[tuple[str, str]]


class SpawnerGone(MetewandError, RuntimeError):
    """The spawn server ended or its replies stopped making sense."""


def spawner_unavailable_reason() -> str | None:
    """None where the spawner works here, else why not (then ``Process.start`` is used)."""
    if not hasattr(os, "posix_spawn") or not hasattr(os, "POSIX_SPAWN_DUP2"):
        return "os.posix_spawn is not available on this platform"
    if not sys.executable:
        return "no Python executable to run the spawn server with (sys.executable is empty)"
    # the command is not metewand's child: only a pidfd can see its exit (the check of
    # measure.process.open_exit_fd, made here without loading that module)
    try:
        os.close(os.pidfd_open(os.getpid()))
    except AttributeError:
        return "os.pidfd_open is not available on this platform"
    except OSError as exc:
        return f"pidfd_open: {exc.strerror or exc}"
    return None


# The first move of a process between groups after a quiet spell waits out an RCU grace period:
# the kernel's global cgroup_threadgroup_rwsem leaves its fast path for a writer, and returns to
# it one grace period after the last one. Measured here by writing a pid into cgroup.procs after
# 500 and 50 ms idle: 6.1 and 5.7 ms (strace of `measure --runs 1 -- true`: 9.5 ms); within 20 ms
# of the last move: 0.03-0.08 ms. measure's first run makes that move on its start-up's critical
# path. From the spawner's start to its first join, a thread keeps the fast path warm by moving
# this process into the group it is already in (a move that changes nothing and takes the same
# lock) every few ms, while measure loads its modules, so the grace period passes meanwhile.
WARM_EVERY_S = 0.005
WARM_AT_MOST_S = 0.25  # measure joins within ~0.1 s of its start; later ones start cold


class MoveLockWarmer:
    """Moves this process into its own cgroup2 group every ``WARM_EVERY_S`` until ``stop`` (or
    ``WARM_AT_MOST_S``); nothing at all where that group cannot be written (not root, no cgroup2,
    an inner group): it only saves time."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        # the group is found on the thread: measure.cgroups loads there, beside measure's own
        # imports (which need it too), not before the spawn server starts
        self.thread = threading.Thread(target=self._run, name="mw-move-warm", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from metewand.measure.cgroups import own_v2_dir

        deadline = time.monotonic() + WARM_AT_MOST_S
        group = own_v2_dir()
        if group is None:
            return
        try:
            fd = os.open(os.path.join(group, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            return
        pid = str(os.getpid()).encode()
        try:
            while time.monotonic() < deadline:
                os.write(fd, pid)
                if self._stop.wait(WARM_EVERY_S):
                    return
        except OSError:
            return
        finally:
            os.close(fd)

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()


def _write_pid(procs_path: str, pid: bytes) -> None:
    fd = os.open(procs_path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, pid)
    finally:
        os.close(fd)


def resolve_executable(name: str, env: Mapping[str, str] | None) -> str:
    """The file ``name`` runs, searched in ``env``'s PATH as ``subprocess`` does (the server's
    own PATH may differ). FileNotFoundError, or PermissionError when only non-executable files
    of that name are found."""
    if os.sep in name:
        return name
    denied = None
    for directory in os.get_exec_path(env):
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            if os.access(candidate, os.X_OK):
                return candidate
            denied = denied or candidate
    if denied is not None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), denied)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


class Spawner:
    """One spawn server for a ``metewand measure`` invocation; ``close`` ends it."""

    def __init__(self) -> None:
        requests_read, self._requests = os.pipe()
        self._replies, replies_write = os.pipe()
        try:
            for fd in (requests_read, replies_write):
                os.set_inheritable(fd, True)
            argv = [
                sys.executable,
                "-I",
                "-S",
                spawn_server.__file__,
                str(requests_read),
                str(replies_write),
            ]
            self.pid = os.posix_spawn(sys.executable, argv, dict(os.environ))
        except BaseException:
            for fd in (self._requests, self._replies):
                os.close(fd)
            raise
        finally:
            os.close(requests_read)
            os.close(replies_write)
        self._broken = False
        self._lock = threading.Lock()  # one exchange at a time: the pipes carry no request ids
        self._pid_bytes = str(self.pid).encode()
        self._homes: dict[str, int] = {}  # the groups it returns to: kept open across runs
        self._resolved: dict[tuple[str, str | None], str] = {}  # (name, PATH) -> file
        self._exited: list[int] = []  # children to reap with the next spawn request
        self.move_warmer = MoveLockWarmer()  # stopped by the first join

    def start(
        self,
        argv: Sequence[str],
        join: JoinPaths,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        quiet: bool = False,
        watch: bool = False,
        meanwhile: Callable[[], None] | None = None,
    ) -> Process:
        """Start ``argv`` in a new session inside the groups of ``join``. ``exec_ns`` of the
        result is the monotonic clock just before the spawn (the spawn's own cost included, as
        a fork-and-wait tool measures it). ``meanwhile`` runs while the server spawns, before
        its reply is read (``measure.spare_accounting``); it must not raise. Raises OSError
        when the command cannot start."""
        from metewand.measure.process import Process

        path = self._resolve(argv[0], env)
        # None: the server's own environment, which is this process's as it was at the server's
        # start (measure changes nothing in it after); copying it every run cost ~0.1 ms
        environment = None if env is None else dict(env)

        def spawn() -> tuple[Any, int]:
            pid, started_ns = self._spawn_joined(
                path, list(argv), environment, cwd, quiet, join, meanwhile
            )
            return SpawnedChild(self, pid), started_ns

        # born inside its groups, which the watchdog guards (it kills their members): no
        # record of its own; without groups (the proc backend), the process itself is guarded
        return Process.started_by(spawn, watch, guarded=not join)

    def _resolve(self, name: str, env: Mapping[str, str] | None) -> str:
        """``resolve_executable``, remembered for this server's life (a series runs one
        command many times; a search of PATH cost ~0.1 ms a run)."""
        key = (name, os.environ.get("PATH") if env is None else env.get("PATH"))
        found = self._resolved.get(key)
        if found is None:
            found = self._resolved[key] = resolve_executable(name, env)
        return found

    def _go_home(self, home: str) -> None:
        fd = self._homes.get(home)
        if fd is None:
            fd = self._homes[home] = os.open(home, os.O_WRONLY | os.O_CLOEXEC)
        os.write(fd, self._pid_bytes)

    def _spawn_joined(
        self,
        path: str,
        argv: list[str],
        env: dict[str, str] | None,
        cwd: str | None,
        quiet: bool,
        join: JoinPaths,
        meanwhile: Callable[[], None] | None,
    ) -> tuple[int, int]:
        moved: list[str] = []
        self.move_warmer.stop()
        try:
            for procs, home in join:
                _write_pid(procs, self._pid_bytes)
                moved.append(home)
            reply = self._ask(("spawn", path, argv, env, cwd, quiet), meanwhile)
        finally:
            try:
                for home in moved:  # out again before anything else: only the spawn is charged
                    self._go_home(home)
            except OSError:
                self._broken = True  # left in the groups: their removal will kill it
                raise
        return int(reply[0]), int(reply[1])

    def wait(self, pid: int, block: bool) -> int | None:
        """Reap ``pid`` (the server's child): its returncode, or None if it still runs."""
        code = self._ask(("wait", pid, block))[0]
        return None if code is None else int(code)

    def reap(self, pid: int) -> None:
        """Have the server reap ``pid``, which has exited (its status is already known): with
        the next spawn request, not a message of its own (a wake-up of the server a run less;
        until then it is a zombie, outside every group, and the server's end reaps what is left).
        """
        with self._lock:
            self._exited.append(pid)

    def _send(self, message: tuple[Any, ...]) -> None:
        body = marshal.dumps(message)
        os.write(self._requests, len(body).to_bytes(4, "little") + body)

    def _ask(
        self, message: tuple[Any, ...], meanwhile: Callable[[], None] | None = None
    ) -> tuple[Any, ...]:
        with self._lock:
            if self._broken:
                raise SpawnerGone("the spawn server is no longer usable")
            if message[0] == "spawn":  # it carries the children to reap (``reap``)
                message, self._exited = (*message, self._exited), []
            try:
                self._send(message)
                if meanwhile is not None:
                    meanwhile()
                reply = self._read_reply()
            except BaseException:
                self._broken = True  # an interrupted exchange leaves the pipes out of step
                raise
        if reply[0] == "err":
            raise OSError(reply[1], reply[2])
        return tuple(reply[1:])

    def _read_reply(self) -> tuple[Any, ...]:
        head = self._read_exact(4)
        reply = marshal.loads(self._read_exact(int.from_bytes(head, "little")))
        if not isinstance(reply, tuple) or not reply:
            raise SpawnerGone(f"unexpected reply from the spawn server: {reply!r}")
        return reply

    def _read_exact(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = os.read(self._replies, size - len(data))
            if not chunk:
                raise SpawnerGone("the spawn server ended")
            data += chunk
        return data

    def close(self) -> None:
        """End the server (end of file on its requests) and reap it."""
        if self._requests < 0:
            return
        self.move_warmer.stop()
        for fd in (self._requests, self._replies, *self._homes.values()):
            os.close(fd)
        self._homes.clear()
        self._requests = self._replies = -1
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

    def __enter__(self) -> Spawner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SpawnedChild:
    """The ``Popen`` surface ``Process`` uses, for a child of the spawn server.

    Its exit is seen through a pidfd of its own and its status read from its zombie's
    ``/proc/PID/stat`` (``exit_code``, Linux 3.5+), so collecting it is one message the server
    acts on without a reply (no round trip per run); where that file cannot be read the server
    is asked and its reply awaited, as before.
    """

    def __init__(self, spawner: Spawner, pid: int) -> None:
        self.spawner = spawner
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._reap(block=False)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            status = zombie_status(self.pid)  # already exited (the usual case): no wait at all
            if status is not None:
                self.spawner.reap(self.pid)
                self.returncode = status
                return status
            from metewand.measure.process import fd_ready, open_exit_fd

            fd, _ = open_exit_fd(self.pid)
            if fd is not None:
                try:
                    if not fd_ready(fd, timeout):
                        import subprocess

                        raise subprocess.TimeoutExpired([str(self.pid)], timeout or 0)
                finally:
                    os.close(fd)
            self.returncode = self._reap(block=True)
        assert self.returncode is not None
        return self.returncode

    def _reap(self, block: bool) -> int | None:
        status = zombie_status(self.pid)
        if status is not None:
            self.spawner.reap(self.pid)
            return status
        # A server that is gone raises SpawnerGone: init inherited the child and reaped it, and
        # its status is lost (never made up).
        return self.spawner.wait(self.pid, block)


def zombie_status(pid: int) -> int | None:
    """The returncode (``subprocess``'s convention) of ``pid`` if it is an unreaped zombie,
    from the last field of ``/proc/PID/stat``; None while it runs or when it cannot be read."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 50 or fields[0] != b"Z":  # state, ..., exit_code is the 52nd field
        return None
    return os.waitstatus_to_exitcode(int(fields[-1]))


_NOT_STARTED: list[str] = []  # why the last open_spawner found none (start_method reports it)


def open_spawner() -> Spawner | None:
    """A spawn server where this host allows one, else None (``Process.start`` with a fork)."""
    _NOT_STARTED.clear()
    reason = spawner_unavailable_reason()
    if reason is None:
        try:
            return Spawner()
        except OSError as exc:
            reason = f"the spawn server could not start: {exc.strerror or exc}"
    _NOT_STARTED.append(reason)
    return None


def start_method(spawner: Spawner | None) -> dict[str, str | None]:
    """How measured commands were started, and why not through the spawn server."""
    if spawner is not None:
        return {"method": "spawn_server", "reason": None}
    reason = _NOT_STARTED[-1] if _NOT_STARTED else spawner_unavailable_reason()
    return {"method": "fork_preexec", "reason": reason or "no spawn server was opened"}
