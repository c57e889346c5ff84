"""Stopping a compute run on Ctrl-C: every worker process still alive is killed, and a worker
started after the stop is killed as soon as it starts (a thread may be between attempts when the
signal arrives). Attempts that were cut short leave no row and no artifacts; ``--resume`` redoes
them.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Protocol

from metewand.errors import MetewandError


class Killable(Protocol):
    def returncode(self) -> int | None: ...

    def kill(self) -> None: ...


class RunInterrupted(MetewandError):
    """An attempt finished after the run was told to stop; its outcome is not a result."""


class SessionRegistry:
    """Every worker session a run starts, so an interrupt can kill them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        self._stopping = threading.Event()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def started(self, session: Killable) -> None:
        with self._lock:
            late = self._stopping.is_set()
            if not late:
                self._sessions.add(session)
        if late:
            session.kill()

    def stop(self) -> int:
        """Refuse new sessions and kill the live ones; returns how many were killed."""
        with self._lock:
            self._stopping.set()
            live = [s for s in self._sessions if s.returncode() is None]
        for session in live:
            session.kill()
        return len(live)
