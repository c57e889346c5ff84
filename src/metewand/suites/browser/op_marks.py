"""Driver-op marks: a channel from an adapter process to the harness, one line per op boundary.

A driver path's adapter is a process of its own, so the harness cannot see where one driver op
ends and the next begins. This channel lets the adapter say so, beside the unchanged
``abb_scenario_adapter/1`` contract:

- the harness makes a pipe (``MarkChannel``) and the adapter inherits its write end;
- an attempt that wants marks carries ``metewand_mark_fd`` (that descriptor's number in the
  adapter) in its payload; an attempt without the key (``--no-phase-marks``, an interleaved
  calibration's unobserved twin) must write nothing, and an adapter that does not know the key
  ignores it, as it ignores any payload field it does not use;
- the adapter writes one line per boundary, ``<name>\\n``: a name begins that phase (metewand's
  adapters write ``driver_connect``, ``op<i>:<op>`` before each op, ``driver_close`` after the
  last); an empty line ends the current phase.

While the adapter runs, the event loop that runs its attempt watches the read end
(``OpListener``, ``add_reader``) and calls the attempt's ``mark`` on each line: the engine
group's and the harness's cheap counters are read then (``phase_marks.AttemptPhases``). Once the
adapter's result is in, the watch ends and what was not read yet is marked late. The loop waits
on the adapter while it runs, so a line finds it idle but for a fixture request in flight. A
reader thread of its own (nice -20, as ``measure.mark_fifo``'s) read a line 5-18 µs sooner at
the median, but it was started and stopped per attempt and woke per line: 1.9 ms of CPU per
per-attempt Playwright attempt on Lightpanda, reads included (docs/performance.md).
A line that is not a plain name (letters, digits, ``_.:-``, at most ``MAX_NAME_CHARS``) is
refused and counted, never marked: the adapter is a foreign program and its lines are data.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable
from typing import Final

PAYLOAD_KEY: Final = "metewand_mark_fd"
MAX_NAME_CHARS: Final = 120
# more marks than this in one attempt are refused (a runaway adapter must not grow the row)
MAX_MARKS: Final = 2000
READ_CHUNK: Final = 65536
_NAME: Final = re.compile(r"[A-Za-z0-9_.:\-]+")

Mark = Callable[[str | None], None]


class MarkChannel:
    """One pipe for one adapter process: the read end here, the write end inherited by the
    adapter (``child_fd``, passed with ``pass_fds``; closed here once the adapter started)."""

    def __init__(self) -> None:
        # non-blocking at both ends: a full pipe drops the adapter's mark instead of stalling
        # its op, and the reader drains without blocking
        self.read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.child_fd = self._write_fd  # the number the adapter sees (pass_fds keeps it)
        self._pending = b""
        # every writer closed its end (the adapter exited): poll would report the read end
        # ready for ever, so the listener stops watching it
        self.at_eof = False

    def started(self) -> None:
        """The adapter holds its copy of the write end: close ours."""
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1

    def listen(self, mark: Mark) -> OpListener:
        """Begin an attempt's marks on the running loop: what an earlier attempt left unread
        is dropped first."""
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self.read_fd, READ_CHUNK):
                pass
        self._pending = b""
        self.at_eof = False
        listener = OpListener(self, mark, asyncio.get_running_loop())
        listener.start()
        return listener

    def lines(self) -> list[bytes]:
        """The complete lines readable now (a partial one waits for its end). A read shorter
        than asked for emptied the pipe: no second read to hear it is empty (raising and
        catching ``BlockingIOError`` at every mark cost ~20 µs of a woken loop's CPU)."""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.read_fd, READ_CHUNK):
                self._pending += chunk
                if len(chunk) < READ_CHUNK:
                    break
            else:
                self.at_eof = True  # a read of nothing that did not block: no writer is left
        *complete, self._pending = self._pending.split(b"\n")
        return complete

    def close(self) -> None:
        for fd in (self.read_fd, self._write_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.read_fd = self._write_fd = -1


class OpListener:
    """Marks one attempt's lines as they arrive (on its loop), until ``finish()``."""

    def __init__(self, channel: MarkChannel, mark: Mark, loop: asyncio.AbstractEventLoop) -> None:
        self.channel = channel
        self.mark = mark
        self.received = 0
        self.refused = 0
        self._loop = loop
        self._watching = False

    def start(self) -> None:
        self._loop.add_reader(self.channel.read_fd, self._readable)
        self._watching = True

    def _readable(self) -> None:
        self._take(self.channel.lines())
        if self.channel.at_eof:  # the adapter is gone: the read end would be ready for ever
            self._unwatch()

    def _unwatch(self) -> None:
        if self._watching:
            self._watching = False
            self._loop.remove_reader(self.channel.read_fd)

    def _take(self, lines: list[bytes]) -> None:
        for line in lines:
            name = line.decode("ascii", "replace").strip()
            plain = not name or (len(name) <= MAX_NAME_CHARS and _NAME.fullmatch(name))
            if not plain or self.received >= MAX_MARKS:
                self.refused += 1
            else:
                self.received += 1
                self.mark(name or None)

    def finish(self) -> dict[str, int]:
        """Stop watching, mark what was not read yet, and say how many lines came (on the
        listener's loop)."""
        self._unwatch()
        with contextlib.suppress(OSError):
            self._take(self.channel.lines())
        return {"received": self.received, "refused": self.refused}
