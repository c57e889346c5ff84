"""Write-behind for the run store: an attempt's last file writes, its artifact dir's rename and
its row's ``write`` run on a thread of the store's, in the order they were asked for, while the
slot does the rest of its work between two attempts (issue 24: on raw CDP these system calls
were the largest part of the wall between attempts on this host, whose file system charges
0.1-0.7 ms for a new file or directory).

**Never inside an attempt.** The thread's work overlaps the harness's own work between two
attempts (the observers' end, the row, the next attempt's set-up), and no more: a slot calls
``drain()`` before the next attempt's observers begin, so the writes of one attempt never share
the cores with the next one's engine. (Run on into the next attempt, they lengthened its
duration on Lightpanda by 1.4 ms [0.5, 2.2], which is what a benchmark must not do.)

What stays on the caller's thread: everything that can refuse (a row's checks, its canonical
line, a duplicate key) and everything that holds the GIL for long, so the thread's work is
system calls, which release it.

Order is the guarantee: one thread takes the jobs first in, first out, so an attempt's files are
in its staging dir before the dir is renamed into place, and the dir is in place before the row
that names it is written. After a failed job the thread drops every later one (a row whose
artifacts failed is never written); the failure is raised by every later ``check()`` (each
append and each new artifact dir calls it), where it was raised in the caller before.

What it costs: a harness killed with ``kill -9`` between two attempts can lose the last
attempt's row still queued (a resumed run runs it again), where before it lost only attempts in
flight. ``drain()`` returns at once when nothing is queued; otherwise it waits for the queue to
empty. The store calls it before it reads its own rows, before a state change and at close. The
queue holds at most ``MAX_QUEUED`` jobs; past that the caller waits, so a slow disk slows the
run instead of filling memory.

As in ``runtime.flusher``, the calling side takes only C-level locks (``SimpleQueue``,
``threading.Lock``): a Ctrl-C can land between any two bytecodes.
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
    """A marker: the thread answers it once every job before it has run."""

    def __init__(self) -> None:
        self.reply: queue.SimpleQueue[None] = queue.SimpleQueue()


class WriteBehind:
    def __init__(self, name: str = "mw-store-write") -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[Job | _Drained | None] = queue.SimpleQueue()
        self._count = threading.Lock()  # _given and _ended
        self._given = 0  # jobs handed to the thread
        self._ended = 0  # jobs it has run or dropped
        self._error: BaseException | None = None
        self._start = threading.Lock()
        self._thread: threading.Thread | None = None
        self._clock: int | None = None  # the thread's CPU clock, once it runs

    def submit(self, job: Job) -> None:
        """Run ``job`` on the thread after every job submitted before it."""
        if self._jobs.qsize() >= MAX_QUEUED:
            self._wait()
        self._started()
        with self._count:
            self._given += 1
            self._jobs.put(job)

    def idle(self) -> bool:
        """Whether every job submitted so far has run (or was dropped)."""
        with self._count:
            return self._ended == self._given

    def drain(self) -> None:
        """Return once every job submitted so far has run (or was dropped after a failure); at
        once when the thread is idle, without waking it."""
        if not self.idle():
            self._wait()

    def check(self) -> None:
        """Raise the failure a job met (every time: nothing after it was written)."""
        error = self._error
        if error is not None:
            raise StoreError(f"results could not be written: {error}") from error

    def cpu_ns(self) -> int:
        """The thread's CPU so far (ns; 0 before it started)."""
        clock = self._clock
        if clock is None:
            return 0
        try:
            return time.clock_gettime_ns(clock)
        except OSError:  # the thread has ended
            return 0

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
            job = self._jobs.get()
            if job is None:
                return
            if isinstance(job, _Drained):
                job.reply.put(None)
                continue
            if not failed:  # after a failure, a later job may depend on it (a row on its dir)
                try:
                    job()
                except BaseException as exc:  # kept for the caller; the thread goes on draining
                    self._error, failed = exc, True
            with self._count:
                self._ended += 1
