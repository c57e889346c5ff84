"""Group commit for the run store: what was written reaches the disk off the attempts' path.

A row is one ``write`` on an ``O_APPEND`` descriptor and an artifact directory one ``rename``:
once the call returns, the kernel holds them, so a killed harness (``kill -9``, an OOM kill, a
crash) loses nothing. Only the machine losing power or its kernel can lose what the page cache
had not written yet; ``fsync`` guards against that, and it is what made an attempt's wall
between attempts wait on the disk (a result-file ``fsync`` and a directory ``fsync`` each
attempt: 5-35 ms each on this shared host, measured). The ``Flusher`` does the same ``fsync``\\s
in a thread of its own: after a write is noted it syncs the directories that gained an entry
since its last pass (an artifact dir's parent, and the parents of the directories made on the
way to it), then the results file, and then rests ``interval_s`` before the next pass, so a
burst of attempts costs one pass. ``flush()`` does a pass at once and returns when it is done
(the store calls it before a state change and at close, so ``complete`` is never on disk ahead
of the rows). The price: after a power cut, rows and artifact renames of the last
``interval_s`` (1 s) may be missing (a resumed run runs those attempts again). A failed ``fsync`` is
kept and raised by the next ``check()`` (every append calls it), as an ``fsync`` error in the
append itself was before.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from pathlib import Path

from metewand.runtime.rundir import StoreError, fsync_dir

FLUSH_INTERVAL_S = 1.0


class Flusher:
    """The main thread only takes C-level locks here and wakes the thread through a
    ``SimpleQueue``: a Ctrl-C lands between any two bytecodes, and one landing inside a
    Python-level ``__enter__`` (``threading.Condition``'s) leaves its lock held, which left the
    thread, and ``close`` joining it, waiting forever."""

    def __init__(self, fd: int, interval_s: float = FLUSH_INTERVAL_S) -> None:
        self._fd = fd
        self._interval_s = interval_s
        self._state = threading.Lock()  # _dirty and _dirs
        self._wake: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._dirty = False
        self._dirs: set[str] = set()
        self._error: BaseException | None = None
        self._closing = False
        self._pass_lock = threading.Lock()  # one pass at a time (the thread's or flush()'s)
        self._thread: threading.Thread | None = None

    def note(self, directory: Path | None = None) -> None:
        """Something was written (and ``directory`` had an entry renamed into it)."""
        with self._state:  # a C lock: released whatever exception leaves the block
            pending = self._dirty
            self._dirty = True
            if directory is not None:
                self._dirs.add(str(directory))
            if self._thread is None and not self._closing:
                self._thread = threading.Thread(
                    target=self._loop, name="mw-store-flush", daemon=True
                )
                self._thread.start()
        # Already dirty: no pass has taken the flag since the note that set it, and that note
        # woke the thread, so the next pass will see this one too (one wake-up per pass, not
        # two per attempt: the row and the artifact dir; issue 24).
        if not pending:
            self._wake.put(None)

    def check(self) -> None:
        """Raise the error a background pass met, once."""
        error, self._error = self._error, None
        if error is not None:
            raise StoreError(f"results could not be made durable: {error}") from error

    def flush(self) -> None:
        """A pass now, waited for; raises what it (or an earlier pass) met."""
        self._pass()
        self.check()

    def close(self) -> None:
        self._closing = True
        self._wake.put(None)
        if self._thread is not None:
            self._thread.join()
        self.flush()

    def _loop(self) -> None:
        while not self._closing:
            if not self._dirty:
                self._wake.get()  # a note (its wake-up may have been taken by the rest)
                continue
            self._pass()
            self._rest()

    def _rest(self) -> None:
        """Wait ``interval_s`` (what is written meanwhile goes in the next pass), or until
        closing."""
        deadline = time.monotonic() + self._interval_s
        while not self._closing:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                self._wake.get(timeout=remaining)
            except queue.Empty:
                return

    def _pass(self) -> None:
        with self._pass_lock:
            with self._state:
                dirty, dirs = self._dirty, self._dirs
                self._dirty, self._dirs = False, set()
            if not dirty:
                return
            try:
                for directory in sorted(dirs):
                    try:
                        fsync_dir(directory)
                    except FileNotFoundError:
                        continue  # removed since (a resumed attempt's replaced directory)
                os.fsync(self._fd)
            except OSError as exc:
                self._error = self._error or exc
