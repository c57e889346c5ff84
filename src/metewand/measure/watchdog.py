"""Nothing metewand starts outlives it: a watchdog process per metewand process.

``kill -9`` of metewand gives it no chance to stop what it started: its workers, engines and
adapters run in sessions of their own (so ``PR_SET_PDEATHSIG``, which reaches only direct
children and is cleared across a set-uid exec, would miss their helpers), and its accounting
groups stay in the hierarchies. So the first time a metewand process makes a group or starts a
process, it starts a watchdog (``watchdog_main``): a small interpreter in a session of its own,
outside every group, that holds a pidfd of its runner and hears, over a pipe, each parent its
groups are made in (before the first one; the groups themselves it finds by their names) and
each process (once started; ``release`` when reaped). When the runner is gone for whatever
reason, the watchdog kills what is left of them and removes the groups and the
private directories it was told of (an engine's profile, which a killed engine would otherwise
leave in the temp dir), within a second or so, then exits; when the runner ended normally there
is nothing left to do.

What it cannot cover, and what covers it: the watchdog killed as well (``kill -9`` of both):
a run's ``owned.jsonl`` (``runtime.owned.sweep`` on ``--resume`` / ``metewand clean``), and
the group names (``measure.orphans``), by which every later watchdog and ``metewand clean
--orphans`` remove groups whose creator is gone; a process started without a group in the
moment between its start and its record reaching the pipe.

A forked child of metewand (a Dask worker started by fork) is a runner of its own: it starts
its own watchdog on its first guard.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
from typing import Final

# os.path, not pathlib: this module is on `measure`'s start-up path, which loads no pathlib
_HERE: Final = os.path.dirname(os.path.realpath(__file__))
SRC_ROOT: Final = os.path.dirname(os.path.dirname(_HERE))
# the watchdog's script, run by path in an interpreter of its own: importing it here would only
# close a circle (it sweeps through process_sweep, which needs measure.process, which needs us)
WATCHDOG_SCRIPT: Final = os.path.join(os.path.dirname(__file__), "watchdog_main.py")


class _Registry:
    """What this process guards (replayed to a new watchdog if its watchdog is gone)."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.fd = -1  # the command pipe's write end; -1: no watchdog running
        self.pid: int | None = None
        self.lines: dict[str, None] = {}  # "R start parent" / "P pid start session", in order
        self.failed: str | None = None  # why no watchdog could be started
        self.ready_fd = -1  # readable once the watchdog's interpreter is up

    def send(self, line: str) -> None:
        self.lines[line] = None
        if self.fd >= 0 and _write(self.fd, line + "\n"):
            return
        self._restart()

    def forget(self, line: str, command: str) -> None:
        if self.lines.pop(line, 0) is None and self.fd >= 0:
            _write(self.fd, command + "\n")

    def _restart(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        if self.failed is not None:
            return
        if self.ready_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.ready_fd)
        try:
            self.fd, self.pid, self.ready_fd = _start()
        except OSError as exc:
            self.failed = f"watchdog not started: {exc}"
            return
        if not _write(self.fd, "".join(line + "\n" for line in self.lines)):
            self.failed = "watchdog ended at once"


def _start() -> tuple[int, int, int]:
    """A watchdog in a session of its own; (the command pipe's write end, its pid, the read
    end of the pipe it writes to once started)."""
    read_end, write_end = os.pipe()
    ready_read, ready_write = os.pipe()
    try:
        runner_fd: int | None = os.pidfd_open(os.getpid())
    except (AttributeError, OSError):
        runner_fd = None  # the pipe's end of file stands in for it
    try:
        passed = [read_end, ready_write] + ([] if runner_fd is None else [runner_fd])
        for fd in passed:
            os.set_inheritable(fd, True)
        argv = [
            sys.executable,
            "-I",
            "-S",
            WATCHDOG_SCRIPT,
            SRC_ROOT,
            str(read_end),
            str(-1 if runner_fd is None else runner_fd),
            str(os.getpid()),
            str(ready_write),
        ]
        # stdin, stdout and stderr on /dev/null: the watchdog outlives its runner by a moment
        # (its sweep), and a reader of the runner's output (`metewand measure --json | jq`, a
        # captured subprocess) must see end of file when the runner exits, not then
        null = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
        pid = os.posix_spawn(sys.executable, argv, dict(os.environ), file_actions=null, setsid=True)
    except BaseException:
        os.close(write_end)
        os.close(ready_read)
        raise
    finally:
        os.close(read_end)
        os.close(ready_write)
        if runner_fd is not None:
            os.close(runner_fd)
    return write_end, pid, ready_read


def _write(fd: int, text: str) -> bool:
    data = text.encode("utf-8", "surrogateescape")
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        return False
    return True


_lock = threading.Lock()
_registry: _Registry | None = None


def _mine() -> _Registry:
    global _registry
    if _registry is None or _registry.owner != os.getpid():
        _registry = _Registry()
    return _registry


def guard_groups_in(parent: str, own_start: int) -> None:
    """Before this process makes its first group in ``parent``: the watchdog removes every
    group there named as made by this process (``measure.orphans.group_name``: its pid and
    ``own_start``, its start time) if this process dies first.

    One message per parent for the process's life, not one per group (as until 2026-12-06):
    each message wakes the watchdog, and a run of ``measure --runs N`` makes two groups while
    its command is being spawned (``measure.spare_accounting``), where a third process woken on
    this 2-core host slowed the spawn by ~0.1 ms."""
    line = f"R {own_start} {parent}"
    with _lock:
        registry = _mine()
        if line not in registry.lines:
            registry.send(line)


def guard_process(pid: int) -> tuple[int, int] | None:
    """A process this one started: the watchdog kills it and its session if this one dies.
    Its (start time, session), for ``release_process``; None when it is already gone."""
    from metewand.measure import (
        procfs,
    )  # here: importing watchdog stays cheap (measure starts it first)

    try:
        stat = procfs.read_stat(pid)
    except (procfs.ProcessGone, OSError, ValueError, IndexError):
        return None
    with _lock:
        _mine().send(f"P {pid} {stat.starttime_ticks} {stat.session}")
    return stat.starttime_ticks, stat.session


def guard_dir(path: str) -> None:
    """A private directory this process made (an engine's profile and TMPDIR): the watchdog
    removes it, after the kills, if this process dies first."""
    if "\n" in path or not os.path.isabs(path):
        return  # one line per command, and never a path relative to the watchdog's cwd
    with _lock:
        _mine().send(f"D {path}")


def release_dir(path: str) -> None:
    """This process removed the directory itself: the watchdog forgets it."""
    with _lock:
        _mine().forget(f"D {path}", f"U {path}")


def release_process(pid: int, starttime: int, session: int) -> None:
    """The process was reaped: its number may be reused; the watchdog forgets it."""
    with _lock:
        _mine().forget(f"P {pid} {starttime} {session}", f"F {pid} {starttime}")


def start() -> None:
    """Start this process's watchdog now if it has none, without waiting (``ready`` waits): a
    caller sure to need one starts it early, so its interpreter starts while the caller works."""
    with _lock:
        registry = _mine()
        if registry.fd < 0:
            registry._restart()


def ready(timeout_s: float = 2.0) -> bool:
    """Start this process's watchdog if it has none and wait (at most ``timeout_s``) until its
    interpreter is up: its start-up then falls before what the caller measures next
    (``measure.series``), not inside it (its orphan sweep runs at nice 19)."""
    with _lock:
        registry = _mine()
        if registry.fd < 0:
            registry._restart()
        fd, registry.ready_fd = registry.ready_fd, -1
    if fd < 0:
        return registry.failed is None  # already waited for once (or none could start)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(int(timeout_s * 1000)))
    finally:
        os.close(fd)


def watchdog_pid() -> int | None:
    """The pid of this process's watchdog (None: none started by this process)."""
    registry = _registry
    if registry is None or registry.owner != os.getpid() or registry.fd < 0:
        return None
    return registry.pid


def _after_fork_in_child() -> None:
    global _lock, _registry
    _lock = threading.Lock()  # a thread of the parent may have held it at the fork
    for fd in (_registry.fd, _registry.ready_fd) if _registry is not None else ():
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)  # the parent's pipes: not this process's
    _registry = None


os.register_at_fork(after_in_child=_after_fork_in_child)
