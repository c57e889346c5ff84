"""The spawn server: a small interpreter that starts measured commands with ``posix_spawn``.

Run as a script (``python -I -S spawn_server.py``) by ``measure.spawner``; it imports only the
standard library's built-in modules, so it starts in a few milliseconds and its heap is its own
(not a copy of metewand's, whose pages it would dirty and be charged for).

Why a separate process: a measured command must be in its accounting groups from its first
instruction, and a group is joined by writing a pid into it. ``subprocess`` can only do that
with a ``preexec_fn``, which turns ``vfork`` into a full ``fork`` of metewand and runs Python in
the child (~1.6 ms a run here, and that child's CPU was charged to the command). Instead
metewand moves this server into the fresh groups, asks it to spawn (a child is born in its
parent's groups), and moves it back out: the command then starts with ``vfork`` + exec.

Protocol, over two pipes (fds given on the command line), each message a 4-byte little-endian
length and a ``marshal``-ed tuple:
    ("spawn", path, argv, env, cwd, quiet, exited) -> ("ok", pid, started_ns)
                                                    | ("err", errno, text)
        (env None: the server's own environment, inherited from metewand at its start;
        exited: children to reap first, whose status the caller has read from /proc/PID/stat)
    ("wait", pid, block)                   -> ("ok", returncode or None) | ("err", errno, text)
``started_ns`` is CLOCK_MONOTONIC just before ``posix_spawn``; ``returncode`` follows
``subprocess`` (negative: the signal that ended it). End of file on the request pipe ends the
server. The children lead their own sessions; the server only spawns and reaps them.
"""

from __future__ import annotations

import marshal
import os
import signal
import sys
import time

# Signals restored to their defaults in every command: the server ignores SIGINT (a Ctrl-C is
# metewand's to handle), and Python itself ignores SIGPIPE and SIGXFSZ, as subprocess restores.
RESET_SIGNALS = (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ)


def _read_exact(fd: int, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _receive(fd: int) -> tuple | None:  # type: ignore[type-arg]
    head = _read_exact(fd, 4)
    if head is None:
        return None
    body = _read_exact(fd, int.from_bytes(head, "little"))
    return None if body is None else marshal.loads(body)


def _send(fd: int, message: tuple) -> None:  # type: ignore[type-arg]
    body = marshal.dumps(message)
    os.write(fd, len(body).to_bytes(4, "little") + body)


def _spawn(
    path: str,
    argv: list[str],
    env: dict[str, str] | None,
    cwd: str | None,
    quiet: bool,
    devnull: int,
    home: str,
) -> tuple[int, int]:
    actions = (
        [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)] if quiet else []
    )
    if cwd is not None:
        os.chdir(cwd)  # posix_spawn has no chdir action here; the server has no other use of it
    try:
        started = time.monotonic_ns()
        pid = os.posix_spawn(
            path,
            argv,
            os.environ if env is None else env,
            file_actions=actions,
            setsid=True,
            setsigdef=RESET_SIGNALS,
            setsigmask=(),
        )
    finally:
        if cwd is not None:  # home again before the reply: the caller may look at once
            os.chdir(home)
    return pid, started


def _wait(pid: int, block: bool) -> int | None:
    done, status = os.waitpid(pid, 0 if block else os.WNOHANG)
    if done == 0:
        return None
    return os.waitstatus_to_exitcode(status)


def _reap(pids: list[int]) -> None:
    for pid in pids:
        try:  # noqa: SIM105 - contextlib is not loaded here: the server imports built-ins only
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def serve(requests: int, replies: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for fd in (requests, replies):  # inherited to be passed here; the commands get neither
        os.set_inheritable(fd, False)
    devnull = os.open(os.devnull, os.O_RDWR)
    home = os.getcwd()
    while True:
        message = _receive(requests)
        if message is None:  # the caller closed: it waits for this exit (Spawner.close), so
            os._exit(0)  # no interpreter teardown; nothing is buffered (os.write only)
        try:
            if message[0] == "spawn":
                _, path, argv, env, cwd, quiet, exited = message
                _reap(exited)
                pid, started = _spawn(path, argv, env, cwd, quiet, devnull, home)
                _send(replies, ("ok", pid, started))
            else:
                _send(replies, ("ok", _wait(message[1], message[2])))
        except OSError as exc:
            _send(replies, ("err", exc.errno or 0, exc.strerror or str(exc)))


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
