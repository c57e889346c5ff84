"""The one CDP client: asyncio on a WebSocket of its own (``cdp_socket``), with flattened target
sessions.

One ``CdpClient`` owns one WebSocket (normally the browser endpoint from ``/json/version``).
Page sessions are multiplexed on it with ``Target.attachToTarget{flatten: true}``: commands
and events for a page carry its ``sessionId``.

- ``send`` matches replies by id; an ``error`` reply raises ``CdpError``; no reply in time raises
  ``CdpTimeout`` (a ``TimeoutError``); a closed socket raises ``CdpDisconnected`` (a
  ``ConnectionError``) at once for every pending command and event wait.
- Events are buffered per session (bounded; overflow drops the oldest and counts it) until a
  ``wait_for_event`` consumes them. A wait first scans the buffer, oldest first, then waits.
- ``log`` (optional) receives one ``CdpLogRecord`` per frame sent or received, so an attempt
  can save its CDP log as an artifact (``CdpLogRecorder``).
- ``timing`` accumulates the time spent waiting for the browser (command replies and event
  waits), so the runner can report time in metewand excluding CDP round-trips.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from metewand import canonical
from metewand.errors import MetewandError
from metewand.suites.browser.cdp_match import matches
from metewand.suites.browser.cdp_socket import CdpSocket, open_websocket

DEFAULT_TIMEOUT_S: Final = 10.0
MAX_MESSAGE_BYTES: Final = 512 * 1024 * 1024  # DOM snapshots and data URLs can be large
DEFAULT_EVENT_BUFFER: Final = 10_000


class _AnySession:
    """Sentinel type: an event wait or listing that ignores the session."""

    def __repr__(self) -> str:
        return "ANY_SESSION"


ANY_SESSION: Final = _AnySession()
SessionFilter = str | None | _AnySession


class CdpError(MetewandError):
    """The browser answered a command with a protocol error."""

    def __init__(self, code: int, message: str, data: Any = None, method: str = "") -> None:
        super().__init__(f"{method}: CDP error {code}: {message}" if method else message)
        self.code = code
        self.message = message
        self.data = data
        self.method = method


class CdpTimeout(MetewandError, TimeoutError):
    """No reply (or no matching event) within the timeout."""

    def __init__(self, what: str, timeout: float) -> None:
        super().__init__(f"{what}: no answer within {timeout:g} s")
        self.what = what
        self.timeout = timeout


class CdpDisconnected(MetewandError, ConnectionError):
    """The WebSocket is closed; nothing more will arrive on it."""


@dataclass(frozen=True)
class CdpLogRecord:
    """One frame: ``direction`` is ``"send"`` or ``"recv"``; ``message`` the decoded JSON
    (or ``{"unparsed": text}`` for a frame that is not JSON)."""

    wall_ms: float
    mono_ns: int
    direction: str
    message: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "wall_ms": self.wall_ms,
            "mono_ns": self.mono_ns,
            "dir": self.direction,
            "msg": self.message,
        }


class CdpLogRecorder:
    """Collects log records in memory; ``jsonl()`` renders them as canonical JSON lines and
    ``write_jsonl(path)`` saves them."""

    def __init__(self) -> None:
        self.records: list[CdpLogRecord] = []

    def __call__(self, record: CdpLogRecord) -> None:
        self.records.append(record)

    def jsonl(self, start: int = 0) -> bytes:
        """The records from ``start`` on (an attempt's share of a shared recorder)."""
        return b"".join(_log_line(record) for record in self.records[start:])

    def write_jsonl(self, path: Path) -> None:
        Path(path).write_bytes(self.jsonl())


def _log_line(record: CdpLogRecord) -> bytes:
    try:
        # a frame is what JSON parsing made (or our own message of the same kinds): written
        # without the canonical walk, ~0.4 ms of a raw CDP attempt's CPU on Lightpanda
        return canonical.dumps_parsed(record.to_json()) + b"\n"
    except canonical.CanonicalJSONError:
        # e.g. an integer beyond 2^53 in a CDP payload: keep the frame, as text
        as_text = {**record.to_json(), "msg": {"unparsed": json.dumps(record.message)}}
        return canonical.line(as_text)


@dataclass
class CdpTiming:
    """Time spent waiting on the browser, in seconds of ``time.perf_counter``."""

    command_wait_s: float = 0.0
    event_wait_s: float = 0.0
    commands: int = 0
    errors: int = 0
    events_received: int = 0
    events_dropped: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0

    @property
    def browser_wait_s(self) -> float:
        return self.command_wait_s + self.event_wait_s


@dataclass
class _EventWaiter:
    method: str
    match: Any
    session: SessionFilter
    future: asyncio.Future[dict[str, Any]]


@dataclass
class _EventBuffer:
    """Events per session, each tagged with a global arrival number for oldest-first scans."""

    limit: int
    by_session: dict[str | None, deque[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    next_seq: int = 0
    dropped: int = 0

    def add(self, event: dict[str, Any]) -> None:
        queue = self.by_session.setdefault(event.get("sessionId"), deque())
        queue.append((self.next_seq, event))
        self.next_seq += 1
        if len(queue) > self.limit:
            queue.popleft()
            self.dropped += 1

    def take(self, method: str, match: Any, session: SessionFilter) -> dict[str, Any] | None:
        """Remove and return the oldest buffered event that satisfies the filter."""
        best: tuple[int, deque[tuple[int, dict[str, Any]]], int] | None = None
        for queue in self._queues(session):
            for index, (seq, event) in enumerate(queue):
                if _event_fits(event, method, match, ANY_SESSION):
                    if best is None or seq < best[0]:
                        best = (seq, queue, index)
                    break
        if best is None:
            return None
        _, queue, index = best
        event = queue[index][1]
        del queue[index]
        return event

    def snapshot(self, session: SessionFilter) -> list[dict[str, Any]]:
        tagged = [item for queue in self._queues(session) for item in queue]
        return [event for _, event in sorted(tagged, key=lambda item: item[0])]

    def _queues(self, session: SessionFilter) -> list[deque[tuple[int, dict[str, Any]]]]:
        if isinstance(session, _AnySession):
            return list(self.by_session.values())
        queue = self.by_session.get(session)
        return [queue] if queue is not None else []


def _event_fits(event: dict[str, Any], method: str, match: Any, session: SessionFilter) -> bool:
    if event.get("method") != method:
        return False
    if not isinstance(session, _AnySession) and event.get("sessionId") != session:
        return False
    return matches(match, event.get("params", {}))


LogHook = Callable[[CdpLogRecord], None]


class CdpClient:
    """One WebSocket to a CDP endpoint. Create with ``await CdpClient.connect(ws_url)``."""

    def __init__(self, log: LogHook | None, event_buffer: int) -> None:
        self._socket: CdpSocket | None = None  # set by connect()
        self._log = log
        self._next_id = 1
        self._pending: dict[int, tuple[str, asyncio.Future[dict[str, Any]]]] = {}
        self._waiters: list[_EventWaiter] = []
        self._buffer = _EventBuffer(limit=event_buffer)
        self._closed_reason: str | None = None
        self.timing = CdpTiming()
        self.ws_url = ""
        # when the endpoint last answered a command (monotonic ns): proof it was serving then
        self.last_reply_ns: int | None = None

    @classmethod
    async def connect(
        cls,
        ws_url: str,
        *,
        log: LogHook | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        event_buffer: int = DEFAULT_EVENT_BUFFER,
    ) -> CdpClient:
        """Open the WebSocket (within ``timeout``); raises ``CdpDisconnected`` when the endpoint
        refuses or cannot be reached."""
        client = cls(log, event_buffer)
        try:
            client._socket = await open_websocket(
                ws_url,
                client._on_message,
                client._mark_closed,
                timeout_s=timeout,
                max_bytes=MAX_MESSAGE_BYTES,
            )
        except (TimeoutError, OSError, ValueError) as exc:
            raise CdpDisconnected(f"cannot connect to {ws_url}: {exc!r}") from exc
        client.ws_url = ws_url
        return client

    @property
    def is_connected(self) -> bool:
        return self._closed_reason is None and self._socket is not None and not self._socket.closed

    @property
    def closed_reason(self) -> str | None:
        return self._closed_reason

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> dict[str, Any]:
        """Send one command and return its ``result`` object."""
        if not self.is_connected:
            raise CdpDisconnected(f"{method}: not connected ({self._closed_reason})")
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        self._next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[message["id"]] = (method, future)
        started = time.perf_counter()
        try:
            await self._send_frame(message)
            # asyncio.timeout, not wait_for: on Python 3.11, a cancel that came after the reply
            # but before this resumed made wait_for return the reply and drop the cancel (a
            # hard-killed attempt then ran on). The same below for events.
            async with asyncio.timeout(timeout):
                reply = await future
        except TimeoutError:
            raise CdpTimeout(method, timeout) from None
        finally:
            self._pending.pop(message["id"], None)
            self.timing.command_wait_s += time.perf_counter() - started
            self.timing.commands += 1
        return self._result_of(method, reply)

    def _result_of(self, method: str, reply: dict[str, Any]) -> dict[str, Any]:
        error = reply.get("error")
        if error is not None:
            self.timing.errors += 1
            if not isinstance(error, dict):
                raise CdpError(-1, str(error), None, method)
            raise CdpError(
                int(error.get("code", -1)), str(error.get("message", "")), error.get("data"), method
            )
        result = reply.get("result", {})
        return result if isinstance(result, dict) else {"value": result}

    async def wait_for_event(
        self,
        method: str,
        match: Any = None,
        session_id: SessionFilter = ANY_SESSION,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> dict[str, Any]:
        """Return (and consume) the oldest event ``method`` whose params match ``match``.

        ``session_id``: ``ANY_SESSION`` (default) ignores sessions, ``None`` means the browser
        session (events without ``sessionId``), a string means that page session. The returned
        event is the whole frame (``method``, ``params``, ``sessionId`` if any).
        """
        buffered = self._buffer.take(method, match, session_id)
        if buffered is not None:
            return buffered
        if not self.is_connected:
            raise CdpDisconnected(f"waiting for {method}: not connected ({self._closed_reason})")
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        waiter = _EventWaiter(method, match, session_id, future)
        self._waiters.append(waiter)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            raise CdpTimeout(f"event {method}", timeout) from None
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            self.timing.event_wait_s += time.perf_counter() - started

    def events(self, session_id: SessionFilter = ANY_SESSION) -> list[dict[str, Any]]:
        """Buffered (not yet consumed) events, oldest first; the buffer is left unchanged."""
        return self._buffer.snapshot(session_id)

    async def close(self) -> None:
        """Close the socket; pending commands and waits fail with ``CdpDisconnected``."""
        if self._closed_reason is None:
            self._closed_reason = "closed by client"
        try:
            if self._socket is not None:
                await self._socket.close()
        finally:  # even when the close itself is cancelled (SIGTERM, Ctrl-C)
            self._fail_all()

    async def __aenter__(self) -> CdpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _send_frame(self, message: dict[str, Any]) -> None:
        text = _message_text(message)
        self._record("send", message)
        assert self._socket is not None
        try:
            self.timing.bytes_sent += self._socket.send_text(text)
            await self._socket.drain()
        except ConnectionError as exc:
            self._mark_closed(f"send failed: {exc!r}")
            raise CdpDisconnected(f"{message['method']}: {exc!r}") from exc

    def _on_message(self, text: str, size: int) -> None:
        """One message from the endpoint (``size``: its bytes on the wire, unframed)."""
        self.timing.bytes_received += size
        try:
            message = _parsed(text)
        except ValueError:
            self._record("recv", {"unparsed": text})
            return
        if not isinstance(message, dict):
            self._record("recv", {"unparsed": text})
            return
        self._record("recv", message)
        if "id" in message:
            self._on_reply(message)
        elif "method" in message:
            self._on_event(message)

    def _on_reply(self, message: dict[str, Any]) -> None:
        self.last_reply_ns = time.monotonic_ns()
        pending = self._pending.get(message["id"]) if isinstance(message["id"], int) else None
        if pending is not None and not pending[1].done():
            pending[1].set_result(message)

    def _on_event(self, event: dict[str, Any]) -> None:
        self.timing.events_received += 1
        for waiter in self._waiters:
            if waiter.future.done():
                continue
            if _event_fits(event, waiter.method, waiter.match, waiter.session):
                waiter.future.set_result(event)
                return
        self._buffer.add(event)
        self.timing.events_dropped = self._buffer.dropped

    def _mark_closed(self, reason: str) -> None:
        if self._closed_reason is None:
            self._closed_reason = reason
        self._fail_all()

    def _fail_all(self) -> None:
        reason = self._closed_reason or "disconnected"
        for method, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(CdpDisconnected(f"{method}: {reason}"))
        for waiter in list(self._waiters):
            if not waiter.future.done():
                waiter.future.set_exception(CdpDisconnected(f"event {waiter.method}: {reason}"))

    def _record(self, direction: str, message: dict[str, Any]) -> None:
        if self._log is not None:
            self._log(CdpLogRecord(time.time() * 1000.0, time.monotonic_ns(), direction, message))


@dataclass(frozen=True)
class PageTarget:
    """A page created for one attempt: its target, flattened session and (optional) context."""

    target_id: str
    session_id: str
    browser_context_id: str | None
    isolation: str


ISOLATIONS: Final = ("shared", "context")


async def new_page_target(
    client: CdpClient,
    isolation: str = "shared",
    url: str = "about:blank",
    timeout: float = DEFAULT_TIMEOUT_S,
) -> PageTarget:
    """Create a page target (in a fresh browser context for ``isolation="context"``) and attach
    to it with a flattened session."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
    context_id: str | None = None
    create: dict[str, Any] = {"url": url}
    if isolation == "context":
        created = await client.send("Target.createBrowserContext", {}, timeout=timeout)
        context_id = str(created["browserContextId"])
        create["browserContextId"] = context_id
    target = await client.send("Target.createTarget", create, timeout=timeout)
    target_id = str(target["targetId"])
    attached = await client.send(
        "Target.attachToTarget", {"targetId": target_id, "flatten": True}, timeout=timeout
    )
    return PageTarget(target_id, str(attached["sessionId"]), context_id, isolation)


async def close_target(
    client: CdpClient, page: PageTarget, timeout: float = DEFAULT_TIMEOUT_S
) -> list[str]:
    """Close the page and dispose of its context; returns the errors met (never raises for
    CDP errors, timeouts or a closed socket: cleanup must not change an attempt's result)."""
    errors: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = [("Target.closeTarget", {"targetId": page.target_id})]
    if page.browser_context_id is not None:
        calls.append(
            ("Target.disposeBrowserContext", {"browserContextId": page.browser_context_id})
        )
    for method, params in calls:
        try:
            await client.send(method, params, timeout=timeout)
        except (CdpError, CdpTimeout, CdpDisconnected) as exc:
            errors.append(f"{method}: {exc}")
    return errors


# A message's JSON, written and read by orjson: on raw CDP the standard library's took ~28 µs a
# sent message (json.dumps with arguments builds an encoder per call) and ~15 µs a received one
# in a run. What orjson refuses (an integer beyond 64 bits, NaN, a lone surrogate) goes to the
# standard library's, which reads and writes it as before; so does a message with 19 digits in
# a row, as orjson reads an integer beyond 64 bits (or below -2**63) as a float where the
# standard library keeps it exact (V8 writes 2**64 as 18446744073709552000). The digits are
# found by mapping each byte to "0" (a digit) or "." and searching for 19 zeros: 0.16 ms on a
# 184 KB DOM reply, where a regular expression took 2.7 ms (and orjson's parse 0.5).
_DIGITS_AS_ZERO: Final = bytes(0x30 if 0x30 <= b <= 0x39 else 0x2E for b in range(256))
_LONG_DIGIT_RUN: Final = b"0" * 19


def _has_long_digit_run(text: str) -> bool:
    raw = text.encode("utf-8", "surrogatepass")
    return raw.translate(_DIGITS_AS_ZERO).find(_LONG_DIGIT_RUN) >= 0


def _message_text(message: dict[str, Any]) -> str:
    try:
        return orjson.dumps(message).decode("utf-8")
    except orjson.JSONEncodeError:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def _parsed(text: str) -> Any:
    if not _has_long_digit_run(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)
