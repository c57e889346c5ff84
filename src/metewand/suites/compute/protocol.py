"""Orchestrator side of the worker protocol, version 1: framing, correlation, deadlines.

One reader thread per worker turns the response pipe into a queue of events (a parsed frame, a
framing violation, or end of stream), so every request can wait with a deadline while the worker's
logs keep draining. Exactly one request is outstanding at a time.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from metewand import canonical
from metewand.errors import MetewandError

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 1_048_576  # including the LF
# After the worker itself exited, how long a response it wrote just before may take to come
# through the pipe; past this, a pipe still open is held by something the worker left behind.
EXIT_GRACE_S = 0.5
# a worker that dies closes its pipes a moment before its exit is seen (load, a slow reap)
EOF_EXIT_GRACE_S = 2.0


class ProtocolViolation(MetewandError):
    """The worker broke the protocol; the session is unusable."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


class PhaseTimeout(MetewandError):
    def __init__(self, method: str, timeout_s: float) -> None:
        super().__init__(f"{method} got no response within {timeout_s:g} s")
        self.method = method


class WorkerGone(MetewandError):
    """The stream closed (or the pipe broke) while a response was expected."""


class WorkerError(MetewandError):
    """A structured ``ok: false`` reply; the session stays usable."""

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details


@dataclass(frozen=True)
class _Event:
    kind: str  # "frame", "violation", "eof", "exited" (the worker process itself ended)
    value: Any = None
    detail: str = ""


def _split_frames(buf: bytearray, out: queue.Queue[_Event]) -> bool:
    """Move complete lines from ``buf`` to ``out``; False once a violation was queued."""
    while True:
        newline = buf.find(b"\n")
        if newline < 0:
            if len(buf) >= MAX_LINE_BYTES:
                out.put(_Event("violation", "oversized_line", f"> {MAX_LINE_BYTES} bytes"))
                return False
            return True
        if newline + 1 > MAX_LINE_BYTES:
            out.put(_Event("violation", "oversized_line", f"{newline + 1} bytes"))
            return False
        raw = bytes(buf[:newline])
        del buf[: newline + 1]
        event = _decode(raw)
        out.put(event)
        if event.kind == "violation":
            return False


def _decode(raw: bytes) -> _Event:
    if raw.startswith(b"\xef\xbb\xbf"):
        return _Event("violation", "byte_order_mark")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _Event("violation", "invalid_utf8")
    try:
        value = canonical.loads(text)
    except ValueError as exc:
        return _Event("violation", "malformed_json", str(exc)[:200])
    if not isinstance(value, dict):
        return _Event("violation", "malformed_message", "a response must be a JSON object")
    return _Event("frame", value)


def _read_loop(fd: int, out: queue.Queue[_Event]) -> None:
    buf = bytearray()
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                kind = "eof" if not buf else "violation"
                out.put(_Event(kind, "early_eof" if buf else None))
                return
            buf += chunk
            if not _split_frames(buf, out):
                return
    except OSError as exc:
        out.put(_Event("violation", "io_error", str(exc)))
    finally:
        os.close(fd)


class Channel:
    """Request/response correlation over the two protocol pipes."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._write_fd = write_fd
        self._events: queue.Queue[_Event] = queue.Queue()
        self._next_id = 0
        self._lock = threading.Lock()
        self._reader = threading.Thread(
            target=_read_loop, args=(read_fd, self._events), daemon=True, name="mw-protocol"
        )
        self._reader.start()
        self.broken = False

    def request(self, method: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request and wait for its response; raises on anything but ``ok: true``."""
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("one request is already outstanding on this worker")
        try:
            return self._exchange(method, params, timeout_s)
        except (ProtocolViolation, PhaseTimeout, WorkerGone):
            self.broken = True
            raise
        finally:
            self._lock.release()

    def _exchange(self, method: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if self.broken:
            raise WorkerGone("session already discarded")
        self._check_no_stray_frame()
        rid = str(self._next_id)
        self._next_id += 1
        message = {**params, "id": rid, "method": method}
        self._write(canonical.line(message))
        deadline = time.monotonic() + timeout_s
        event = self._wait(method, deadline, timeout_s)
        return _check_response(event.value, rid)

    def _check_no_stray_frame(self) -> None:
        try:
            event = self._events.get_nowait()
        except queue.Empty:
            return
        if event.kind == "frame":
            raise ProtocolViolation("extra_response", "a response arrived with no request")
        self._raise_for(event)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._write_fd, view) :]
        except (BrokenPipeError, OSError) as exc:
            raise WorkerGone(f"request pipe closed: {exc}") from exc

    def worker_exited(self, status: int | None) -> None:
        """Told by the session's exit watch: the worker process itself has ended.

        The stream's end of file alone is not enough: a daemon the worker left behind can hold
        the pipe open for ever, and the request would wait out its whole budget.
        """
        self._events.put(_Event("exited", status))

    def _wait(self, method: str, deadline: float, timeout_s: float) -> _Event:
        remaining = deadline - time.monotonic()
        try:
            event = self._events.get(timeout=max(remaining, 0.0))
        except queue.Empty:
            raise PhaseTimeout(method, timeout_s) from None
        if event.kind == "exited":
            event = self._after_exit(event)
        if event.kind != "frame":
            self._raise_for(event)
        return event

    def _after_exit(self, exited: _Event) -> _Event:
        """The worker ended: a response it wrote just before still counts; then it is gone."""
        try:
            event = self._events.get(timeout=EXIT_GRACE_S)
        except queue.Empty:
            self._events.put(exited)
            raise WorkerGone(
                f"the worker exited (status {exited.value}) while a process it left behind "
                "holds the protocol pipe"
            ) from None
        self._events.put(exited)  # later requests see the exit at once
        return event

    def _raise_for(self, event: _Event) -> None:
        if event.kind == "eof":
            self._after_eof(event)
        if event.kind == "exited":
            self._events.put(event)  # stays at end of stream
            raise WorkerGone("the worker exited")
        raise ProtocolViolation(str(event.value), event.detail)

    def _after_eof(self, eof: _Event) -> None:
        """The stream ended: a crash if the worker exits with it; a worker that closed its
        protocol stream and runs on broke the protocol (it can never answer again)."""
        try:
            event = self._events.get(timeout=EOF_EXIT_GRACE_S)
        except queue.Empty:
            self._events.put(eof)  # stays at end of stream
            raise ProtocolViolation(
                "stream_closed", "the worker closed its protocol stream and is still running"
            ) from None
        self._events.put(event)
        self._events.put(eof)
        raise WorkerGone("protocol stream closed")

    def close(self) -> None:
        """Close the request pipe once (a second close could hit a reused descriptor)."""
        fd, self._write_fd = self._write_fd, -1
        if fd >= 0:
            os.close(fd)


def _check_response(message: dict[str, Any], rid: str) -> dict[str, Any]:
    if message.get("id") != rid:
        raise ProtocolViolation(
            "mismatched_request_id", f"expected {rid!r}, got {message.get('id')!r}"
        )
    ok = message.get("ok")
    if ok is True:
        return message
    if ok is not False:
        raise ProtocolViolation("malformed_message", "response needs ok: true or ok: false")
    error = message.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        raise ProtocolViolation("malformed_message", "error reply without error.code")
    return _raise_worker_error(error)


def _raise_worker_error(error: dict[str, Any]) -> dict[str, Any]:
    raise WorkerError(str(error["code"]), str(error.get("message", "")), error.get("details"))
