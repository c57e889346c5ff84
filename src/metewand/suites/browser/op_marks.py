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

Who reads the engine's counters at a line, and when:

- **the adapter** (``read_by: adapter``), where the engine's group keeps files another process
  can read (``mark_probe.CgroupProbe.reads_plan``) and the pipe holds a whole attempt's lines
  (``PIPE_BYTES``): the payload also carries ``metewand_mark_reads``, the files to read. At each
  boundary the adapter reads them itself, then the monotonic clock, and writes
  ``<name>\t<ns>\t<file>\t<file>...\n``, each file's bytes with ``|`` for a newline (or
  ``!<errno name>``: its read failed). The harness reads the pipe once, after the adapter's
  result: the loop is not woken per op. Woken per line it spent ~0.14 ms of CPU a line, ~1.4-2
  ms per attempt, more than the rest of the marks together (docs/performance.md). The readings
  are also taken at the boundary itself, not after the loop woke. Only the engine's clock gets
  these marks: the harness's own CPU (getrusage) cannot be read from another process, so in the
  harness's clock the adapter's run stays one phase.
- **the harness** (``read_by: harness``), otherwise (the /proc fallback; a pipe that cannot be
  made large enough): the event loop that runs the attempt watches the read end (``OpListener``,
  ``add_reader``) and calls the attempt's ``mark`` on each line, which reads the engine group's
  and the harness's counters then (``phase_marks.AttemptPhases``). Once the adapter's result is
  in, the watch ends and what was not read yet is marked late. A reader thread of its own (nice
  -20, as ``measure.mark_fifo``'s) read a line 5-18 µs sooner at the median, but it was started
  and stopped per attempt and woke per line: 1.9 ms of CPU per per-attempt Playwright attempt on
  Lightpanda, reads included (docs/performance.md).

A line that is not a plain name (letters, digits, ``_.:-``, at most ``MAX_NAME_CHARS``), or whose
readings are not what was asked for, is refused and counted, never marked: the adapter is a
foreign program and its lines are data.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

PAYLOAD_KEY: Final = "metewand_mark_fd"
READS_KEY: Final = "metewand_mark_reads"
MAX_NAME_CHARS: Final = 120
# more marks than this in one attempt are refused (a runaway adapter must not grow the row)
MAX_MARKS: Final = 2000
READ_CHUNK: Final = 65536
# a pipe this large holds an attempt's lines with readings (~0.3 KB each here, MAX_MARKS of them)
# until the harness reads them after the result; Linux's default pipe-max-size
PIPE_BYTES: Final = 1 << 20
_NAME: Final = re.compile(r"[A-Za-z0-9_.:\-]+")

Mark = Callable[[str | None], None]


class AdapterReads(Protocol):
    """The engine's counters as the adapter reads them at its own marks."""

    @property
    def plan(self) -> list[dict[str, Any]]:
        """The files, as the payload's READS_KEY carries them."""

    def take(self, name: str | None, monotonic_ns: int, fields: list[bytes | OSError]) -> None:
        """One line's mark; ValueError when its readings are not what the plan asked for."""


@dataclass(frozen=True)
class MarkSink:
    """Where an attempt's driver-op marks go: ``mark`` reads the counters here when a line
    arrives; ``reads`` (None: not possible) lets the adapter read them itself."""

    mark: Mark
    reads: AdapterReads | None = None


class MarkChannel:
    """One pipe for one adapter process: the read end here, the write end inherited by the
    adapter (``child_fd``, passed with ``pass_fds``; closed here once the adapter started)."""

    def __init__(self) -> None:
        # non-blocking at both ends: a full pipe drops the adapter's mark instead of stalling
        # its op, and the reader drains without blocking
        self.read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.child_fd = self._write_fd  # the number the adapter sees (pass_fds keeps it)
        self.capacity = _enlarged(self.read_fd)
        self._pending = b""
        self.bytes_read = 0
        # every writer closed its end (the adapter exited): poll would report the read end
        # ready for ever, so the listener stops watching it
        self.at_eof = False

    def started(self) -> None:
        """The adapter holds its copy of the write end: close ours."""
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1

    def listen(self, mark: Mark, reads: AdapterReads | None = None) -> OpListener:
        """Begin an attempt's marks on the running loop: what an earlier attempt left unread
        is dropped first. With ``reads`` the adapter's lines carry its readings and are read
        once, by ``finish()``; without, each is marked as it arrives."""
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self.read_fd, READ_CHUNK):
                pass
        self._pending = b""
        self.at_eof = False
        if reads is not None and self.capacity < PIPE_BYTES:
            reads = None  # lines would be lost before the end: the harness reads per line
        listener = OpListener(self, mark, asyncio.get_running_loop(), reads)
        listener.start()
        return listener

    def offer(
        self, payload: Mapping[str, Any], sink: MarkSink
    ) -> tuple[dict[str, Any], OpListener]:
        """The payload that asks the adapter for marks on this channel, and their listener."""
        listener = self.listen(sink.mark, sink.reads)
        out = {**payload, PAYLOAD_KEY: self.child_fd}
        if listener.reads is not None:
            out[READS_KEY] = listener.reads.plan
        return out, listener

    def lines(self) -> list[bytes]:
        """The complete lines readable now (a partial one waits for its end). A read shorter
        than asked for emptied the pipe: no second read to hear it is empty (raising and
        catching ``BlockingIOError`` at every mark cost ~20 µs of a woken loop's CPU)."""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.read_fd, READ_CHUNK):
                self.bytes_read += len(chunk)
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

    def __init__(
        self,
        channel: MarkChannel,
        mark: Mark,
        loop: asyncio.AbstractEventLoop,
        reads: AdapterReads | None = None,
    ) -> None:
        self.channel = channel
        self.mark = mark
        self.reads = reads
        self.received = 0
        self.refused = 0
        self._loop = loop
        self._watching = False
        self._last_ns = time.monotonic_ns()  # a line read by the adapter is not older
        self._read_before = channel.bytes_read

    def start(self) -> None:
        if self.reads is None:  # the harness reads the counters as each line arrives
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
            name, _, readings = line.partition(b"\t")
            text = name.decode("ascii", "replace").strip()
            plain = not text or (len(text) <= MAX_NAME_CHARS and _NAME.fullmatch(text))
            if not plain or self.received >= MAX_MARKS or not self._marked(text or None, readings):
                self.refused += 1
            else:
                self.received += 1

    def _marked(self, name: str | None, readings: bytes) -> bool:
        if self.reads is None:
            if readings:
                return False
            self.mark(name)
            return True
        try:
            stamp, *fields = readings.split(b"\t")
            monotonic_ns = int(stamp)
            # the adapter's clock is this one: a reading outside the attempt is not one of it
            if not self._last_ns <= monotonic_ns <= time.monotonic_ns():
                return False
            self.reads.take(name, monotonic_ns, [_field(f) for f in fields])
        except ValueError:
            return False
        self._last_ns = monotonic_ns
        return True

    def finish(self) -> dict[str, Any]:
        """Stop watching, mark what was not read yet, and say how many lines came and who read
        the counters (on the listener's loop)."""
        self._unwatch()
        with contextlib.suppress(OSError):
            self._take(self.channel.lines())
        counts: dict[str, Any] = {
            "received": self.received,
            "refused": self.refused,
            "read_by": "harness" if self.reads is None else "adapter",
        }
        if self.reads is not None and self._filled():
            counts["pipe_full"] = True  # the adapter's later lines may have been dropped
        return counts

    def _filled(self) -> bool:
        """The attempt's lines came near the pipe's size: a write may have found it full."""
        return self.channel.bytes_read - self._read_before > self.channel.capacity - READ_CHUNK


def _field(raw: bytes) -> bytes | OSError:
    """One file's reading as the adapter wrote it: its bytes (``|`` for a newline), or
    ``!<errno name>`` when its read failed."""
    if raw.startswith(b"!"):
        code = getattr(errno, raw[1:].decode("ascii", "replace"), None)
        code = code if isinstance(code, int) and code in errno.errorcode else errno.EIO
        return OSError(code, os.strerror(code))
    return raw.replace(b"|", b"\n")


def _enlarged(fd: int) -> int:
    """The pipe made PIPE_BYTES large where the system allows (its size either way)."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    try:
        return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))
    except OSError:
        return 0
