"""Write-behind for the run store: an attempt's last file writes, its artifact dir's rename and
its row's ``write`` run on a thread of the store's, in the order they were asked for, while the
slot goes on to its next attempt (issue 24: on raw CDP these system calls were ~40% of the wall
between attempts on this host, whose file system charges 0.1-0.7 ms for a new file).

What stays on the caller's thread: everything that can refuse (a row's checks, its canonical
line, a duplicate key) and everything that holds the GIL for long, so the thread's work is
system calls, which release it, and does not hold up the next attempt's event loop.

Order is the guarantee: one thread takes the jobs first in, first out, so an attempt's files are
in its staging dir before the dir is renamed into place, and the dir is in place before the row
that names it is written. After a failed job the thread drops every later one (a row whose
artifacts failed is never written); the failure is raised by every later ``check()`` (each
append and each new artifact dir calls it), where it was raised in the caller before.

What it costs: a harness killed with ``kill -9`` can lose the jobs still queued (the last
attempt or two of each slot; a resumed run runs them again), where before it lost only attempts
in flight. ``drain()`` waits for the queue to empty: the store calls it before it reads its own
rows, before a state change and at close. The queue holds at most ``MAX_QUEUED`` batches; past
that the caller waits, so a slow disk slows the run instead of filling memory.

As in ``runtime.flusher``, the calling side takes only C-level locks (``SimpleQueue``): a
Ctrl-C can land between any two bytecodes.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from metewand.runtime.rundir import StoreError

Job = Callable[[], object]
MAX_QUEUED = 64


class _Drained:
    """A marker: the thread answers it once every batch before it has run."""

    def __init__(self) -> None:
        self.reply: queue.SimpleQueue[None] = queue.SimpleQueue()


class WriteBehind:
    """Jobs are held by ``later`` and handed to the thread with the next ``submit`` (or
    ``drain``) as one batch: an attempt's files, dir and row cost the thread one wake-up, not
    five (a wake-up is the dearest part of a small job on a host that charges for resting)."""

    def __init__(self, name: str = "mw-store-write") -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[Job, ...] | _Drained | None] = queue.SimpleQueue()
        self._held: list[Job] = []
        self._hold = threading.Lock()  # _held; a C lock, as the module doc asks
        self._error: BaseException | None = None
        self._start = threading.Lock()
        self._thread: threading.Thread | None = None
        self._clock: int | None = None  # the thread's CPU clock, once it runs

    def cpu_ns(self) -> int:
        """The thread's CPU so far (ns; 0 before it started). A profiled attempt's harness scope
        reports it: the writes of the attempt before land in the next one's span."""
        clock = self._clock
        if clock is None:
            return 0
        try:
            return time.clock_gettime_ns(clock)
        except OSError:  # the thread has ended
            return 0

    def later(self, job: Job) -> None:
        """Run ``job`` after every job given before it, with the next ``submit``."""
        with self._hold:
            self._held.append(job)

    def submit(self, job: Job | None = None) -> None:
        """Hand the thread what is held, then ``job``: each after every job given before it."""
        with self._hold:
            batch, self._held = (*self._held, *([job] if job is not None else [])), []
        if not batch:
            return
        if self._jobs.qsize() >= MAX_QUEUED:
            self._wait()
        self._started()
        self._jobs.put(batch)

    def drain(self) -> None:
        """Return once every job given so far has run (or was dropped after a failure)."""
        self.submit()
        self._wait()

    def check(self) -> None:
        """Raise the failure a job met (every time: nothing after it was written)."""
        error = self._error
        if error is not None:
            raise StoreError(f"results could not be written: {error}") from error

    def close(self) -> None:
        """Run what is queued, stop the thread, raise a failure it met."""
        self.drain()
        thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            thread.join()
        self.check()

    def _wait(self) -> None:
        if self._thread is None:
            return
        marker = _Drained()
        self._jobs.put(marker)
        marker.reply.get()

    def _started(self) -> None:
        with self._start:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        self._clock = time.pthread_getcpuclockid(threading.get_ident())
        failed = False
        while True:
            batch = self._jobs.get()
            if batch is None:
                return
            if isinstance(batch, _Drained):
                batch.reply.put(None)
                continue
            for job in batch:
                if failed:
                    break  # a later job may depend on the failed one (a row on its artifacts)
                try:
                    job()
                except BaseException as exc:  # kept for the caller; the thread goes on draining
                    self._error, failed = exc, True
