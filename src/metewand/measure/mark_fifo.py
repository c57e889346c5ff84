"""Phase marks written by the measured program itself, one name per line, into a FIFO.

``metewand measure --mark-fifo PATH``: PATH is made a FIFO (unless it already is one) and, for
each run, read in a thread; every complete line is a mark (``measure.phases``): a name begins
that phase, an empty line ends the current phase. The program opens PATH for writing, e.g.
``echo build > "$PATH"`` in a shell or ``open(path, "w", buffering=1)`` in Python.

While a run is measured the reader also holds a write end of its own, so the FIFO never reports
end-of-file between two writers (a shell opens and closes it once per ``echo``) and a writer's
``open`` never blocks.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import sys
import threading
from pathlib import Path

from metewand.errors import InvalidInput
from metewand.measure.accounting import TreeAccounting
from metewand.measure.mark_probe import MarkProbe, probe_of
from metewand.measure.phases import PhaseClock

SOURCE = "mark_fifo"
READ_CHUNK = 4096
# a mark's name is cut at 200 characters (measure.phases); bytes of a line past this are dropped
# as they arrive, so a writer that never ends its line cannot grow the reader's buffer
MAX_LINE_BYTES = 4096
MARK_THREAD_NICE = -20
SWITCH_INTERVAL_S = 0.0001


class MarkFifoError(InvalidInput, ValueError):
    """PATH exists and is not a FIFO, or cannot be made one (exit 2: nothing was run)."""


def ensure_fifo(path: str | os.PathLike[str]) -> bool:
    """Make ``path`` a FIFO; True when this call created it (so the caller removes it)."""
    target = Path(path)
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        try:
            os.mkfifo(target, 0o600)
        except OSError as exc:
            raise MarkFifoError(f"{target}: cannot create a FIFO: {exc.strerror}") from exc
        return True
    if not stat.S_ISFIFO(mode):
        raise MarkFifoError(f"{target}: exists and is not a FIFO")
    return False


class MarkReader:
    """Reads marks from the FIFO for one run and puts them on a ``PhaseClock``."""

    def __init__(self, path: str | os.PathLike[str], mark_limit: int | None = None) -> None:
        self.path = os.fspath(path)
        self.mark_limit = mark_limit  # marks kept per run; later ones are counted
        self.clock: PhaseClock | None = None
        self._probe: MarkProbe | None = None
        self._fds: list[int] = []
        self._stop_r, self._stop_w = -1, -1
        self._thread: threading.Thread | None = None
        self._pending = b""
        self._switch_interval: float | None = None

    def begin(self, accounting: TreeAccounting) -> None:
        """Open the FIFO, take the start reading and listen (before the subject starts)."""
        # descriptors kept open on the group's counters: a mark is a few preads
        self._probe = probe_of(accounting)
        self.clock = PhaseClock.of_probe(self._probe, SOURCE, self.mark_limit)
        read_fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        keep_open = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
        self._stop_r, self._stop_w = os.pipe()
        self._fds = [read_fd, keep_open, self._stop_r, self._stop_w]
        self._pending = b""
        # the thread that reads a mark needs the GIL at once, not after the host telemetry's
        # /proc scan has held it for the default 5 ms switch interval (restored in close())
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL_S))
        self.clock.begin()
        self._thread = threading.Thread(target=self._listen, name="metewand-marks", daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        # A mark's counters are read when this thread wakes; on a loaded host a waiting thread
        # can lag by milliseconds while the program burns into its next phase. Where allowed
        # (root), this thread, asleep but for ~50 µs per mark, is first in line to wake.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), MARK_THREAD_NICE)
        read_fd = self._fds[0]
        poller = select.poll()
        poller.register(read_fd, select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if read_fd in ready:
                self._drain(read_fd)
            if self._stop_r in ready:
                return

    def _drain(self, read_fd: int) -> None:
        assert self.clock is not None
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(read_fd, READ_CHUNK):
                *lines, rest = (self._pending + chunk).split(b"\n")
                self._pending = rest[:MAX_LINE_BYTES]
                for line in lines:
                    name = line[:MAX_LINE_BYTES].decode("utf-8", "replace").strip()
                    self.clock.mark(name or None)

    def finish(self, origin_ns: int | None, end_ns: int | None) -> dict[str, object]:
        """Stop listening (reading what the subject wrote) and return the phases record."""
        assert self.clock is not None
        self._stop_thread()
        self.clock.finish(origin_ns, end_ns)
        self._drain(self._fds[0])  # lines the thread had not read yet: late, at the end
        self.close()
        return self.clock.record()

    def _stop_thread(self) -> None:
        if self._thread is not None:
            os.write(self._stop_w, b"x")
            self._thread.join()
            self._thread = None

    def close(self) -> None:
        """Release the FIFO's descriptors (also after an interrupted run)."""
        with contextlib.suppress(OSError):
            self._stop_thread()
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []
        if self._probe is not None:
            self._probe.close()
            self._probe = None
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None
