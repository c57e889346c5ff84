"""Find and kill what started processes left behind, and wait for it to be gone.

A process is known by its identity, recorded when it starts: pid, start time (clock ticks since
boot, from /proc/PID/stat) and session. After a ``kill -9`` of metewand, ``left_alive`` finds
what is left of the recorded processes:

- a process whose pid *and* start time match a record (a recycled pid has a later start time,
  so it is never hit);
- a member of a recorded session (the recorded process led it) started no earlier than that
  leader, while the leader is gone or still the recorded process. The kernel keeps a session's
  id allocated while any member lives, so helpers re-parented to init keep it; a reused pid
  leading a newer session has another start time, and that session is never hit.

Waiting for killed processes to go uses pidfds (readable at exit, for any process, not only
children), so nothing sleeps and looks; where there are no pidfds the wait falls back to
looking at /proc every ``FALLBACK_POLL_S``.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from metewand.measure import procfs
from metewand.measure.process import open_exit_fd

FALLBACK_POLL_S: Final = 0.01


@dataclass(frozen=True)
class Identity:
    pid: int
    starttime: int
    session: int

    def to_json(self) -> dict[str, int]:
        return {"pid": self.pid, "starttime": self.starttime, "session": self.session}

    @classmethod
    def from_record(cls, record: Any) -> Identity | None:
        """The identity in a recorded JSON object; None when the record lacks one."""
        if not isinstance(record, dict):
            return None
        pid, starttime, session = (record.get(k) for k in ("pid", "starttime", "session"))
        if not all(type(v) is int for v in (pid, starttime, session)):
            return None
        return cls(int(pid), int(starttime), int(session))  # type: ignore[arg-type]


def identity_of(pid: int) -> Identity | None:
    """The identity of a live process now; None when it is gone or unreadable."""
    try:
        stat = procfs.read_stat(pid)
    except (procfs.ProcessGone, OSError, ValueError, IndexError):
        return None
    return Identity(pid, stat.starttime_ticks, stat.session)


def _stat(pid: int) -> procfs.ProcStat | None:
    with contextlib.suppress(procfs.ProcessGone, OSError, ValueError, IndexError):
        return procfs.read_stat(pid)
    return None


def left_alive(identities: Iterable[Identity]) -> list[int]:
    """Live (non-zombie) processes of the recorded ones and of their sessions (module doc)."""
    exact: set[tuple[int, int]] = set()
    leaders: dict[int, int] = {}
    for ident in identities:
        exact.add((ident.pid, ident.starttime))
        if ident.session == ident.pid:
            leaders[ident.session] = min(
                ident.starttime, leaders.get(ident.session, ident.starttime)
            )
    for session, leader_born in list(leaders.items()):
        leader = _stat(session)
        if leader is not None and leader.starttime_ticks != leader_born:
            del leaders[session]  # a reused pid leading a newer session
    own = os.getpid()
    found = []
    for pid in procfs.iter_pids():
        stat = _stat(pid)
        if stat is None or pid == own or stat.state == "Z":
            continue
        born = leaders.get(stat.session)
        if (born is not None and stat.starttime_ticks >= born) or (
            pid,
            stat.starttime_ticks,
        ) in exact:
            found.append(pid)
    return sorted(found)


def members(*, session: int | None = None, pgid: int | None = None) -> list[procfs.ProcStat]:
    """Every process (zombies included) of a session or a process group, by a /proc walk."""
    found = []
    for pid in procfs.iter_pids():
        stat = _stat(pid)
        if stat is None:
            continue
        if (session is not None and stat.session == session) or (
            pgid is not None and stat.pgrp == pgid
        ):
            found.append(stat)
    return found


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat.state != "Z"


def wait_gone(pids: Iterable[int], timeout_s: float) -> list[int]:
    """Wait until every pid has exited (zombies count as gone); returns those still alive."""
    fds: dict[int, int] = {}
    waiting: list[int] = []
    for pid in pids:
        fd, _ = open_exit_fd(pid)
        if fd is not None:
            fds[fd] = pid
        elif _alive(pid):
            waiting.append(pid)  # no pidfd: looked at in /proc
    deadline = time.monotonic() + timeout_s
    try:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        pending = set(fds)
        while pending or waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            limit = min(left, FALLBACK_POLL_S) if waiting else left
            for fd, _ in poller.poll(max(1, int(limit * 1000))):
                pending.discard(fd)
                poller.unregister(fd)
            waiting = [pid for pid in waiting if _alive(pid)]
        return sorted([fds[fd] for fd in pending if _alive(fds[fd])] + waiting)
    finally:
        for fd in fds:
            os.close(fd)


def kill_until_gone(
    find: Callable[[], Iterable[int]], timeout_s: float
) -> tuple[list[int], list[int]]:
    """SIGKILL the live processes ``find`` names and wait for them to go, again until it names
    none alive (a member may fork between the look and the kill) or the time is up. Zombies
    count as gone. Returns (every pid killed, those still alive)."""
    deadline = time.monotonic() + timeout_s
    killed: list[int] = []
    own = os.getpid()
    while True:
        targets = [pid for pid in find() if pid != own and _alive(pid)]
        if not targets:
            return sorted(set(killed)), []
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed += targets
        alive = wait_gone(targets, max(0.0, deadline - time.monotonic()))
        if time.monotonic() >= deadline:
            still = sorted(set(alive) | {p for p in find() if p != own and _alive(p)})
            return sorted(set(killed)), still
