"""The WebSocket under a ``CdpClient``: RFC 6455 as a client speaks it to a CDP endpoint.

Why not aiohttp's client: an attempt opens a fresh connection to its engine, and opening one
through aiohttp's request machinery cost ~1 ms more of the harness's CPU than this does (cold,
as between two attempts: connect, one command and close, 1.6 against 0.7 ms here on Lightpanda),
an eighth of a raw-CDP attempt's harness CPU (docs/performance.md). The peer's raw-CDP driver
speaks WebSocket over its own socket too.

What it does, and no more:

- **Handshake**: one ``GET`` with a fresh key and no extensions offered; the answer must be
  ``101`` with ``Upgrade: websocket``, ``Connection: upgrade`` and the key's accept value, and
  no extension. Anything else refuses the connection (``WebSocketRefused``).
- **Frames in**: text and binary messages, fragmented or not, handed to ``on_message`` as text
  with their size in bytes, inside ``data_received`` (no queue: the client's event buffer is
  the bound); a ping is answered with its pong; a close is answered and ends the connection.
  A frame a server must not send (masked, reserved bits or opcodes, a control frame too long
  or fragmented, a continuation with nothing to continue, text that is not UTF-8, a message
  over ``max_bytes``) closes the connection with the code RFC 6455 gives it.
- **Frames out**: masked text frames; ``drain()`` waits while the transport asks to pause.
- **Close**: a close frame, then up to ``close_timeout_s`` for the endpoint's; past it (or when
  cancelled), the connection is cut.

``on_closed(reason)`` is called once, when the connection is gone, with the reason in words.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, cast
from urllib.parse import urlsplit

from metewand.errors import MetewandError

ACCEPT_GUID: Final = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_HEAD_BYTES: Final = 64 * 1024  # the handshake's answer, headers included
CLOSE_TIMEOUT_S: Final = 2.0

TEXT, BINARY, CLOSE, PING, PONG, CONTINUATION = 0x1, 0x2, 0x8, 0x9, 0xA, 0x0
NORMAL, PROTOCOL_ERROR, INVALID_DATA, TOO_BIG, INTERNAL_ERROR = 1000, 1002, 1007, 1009, 1011
NO_STATUS: Final = 1005  # a close frame without a code

OnMessage = Callable[[str, int], None]
OnClosed = Callable[[str], None]


class WebSocketRefused(MetewandError, ConnectionError):
    """The endpoint did not accept the WebSocket handshake."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    resource: str  # path and query, as the request line carries them
    authority: str  # the Host header: host[:port] as the URL spells it
    secure: bool


def endpoint_of(url: str) -> Endpoint:
    """``ws://`` or ``wss://`` URL -> where to connect; ValueError for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise ValueError(f"not a WebSocket URL: {url!r}")
    secure = parts.scheme == "wss"
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    port = parts.port or (443 if secure else 80)
    return Endpoint(parts.hostname, port, resource, parts.netloc, secure)


async def open_websocket(
    url: str,
    on_message: OnMessage,
    on_closed: OnClosed,
    *,
    timeout_s: float,
    max_bytes: int,
) -> CdpSocket:
    """Connect and complete the handshake within ``timeout_s``; OSError (``WebSocketRefused``
    for a refused handshake, TimeoutError past the time) when it cannot."""
    endpoint = endpoint_of(url)
    loop = asyncio.get_running_loop()
    context = ssl.create_default_context() if endpoint.secure else None
    socket: CdpSocket | None = None
    try:
        async with asyncio.timeout(timeout_s):
            _, socket = await loop.create_connection(
                lambda: CdpSocket(endpoint, on_message, on_closed, max_bytes),
                endpoint.host,
                endpoint.port,
                ssl=context,
            )
            await socket.opened
    except BaseException:
        if socket is not None:
            socket.opened.cancel()  # no one is left to hear why
            socket.abort()
        raise
    return socket


class CdpSocket(asyncio.Protocol):
    """One client WebSocket; made by ``open_websocket``."""

    def __init__(
        self, endpoint: Endpoint, on_message: OnMessage, on_closed: OnClosed, max_bytes: int
    ) -> None:
        loop = asyncio.get_running_loop()
        self._endpoint = endpoint
        self._on_message = on_message
        self._on_closed = on_closed
        self._max_bytes = max_bytes
        self._key = base64.b64encode(os.urandom(16))
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self.opened: asyncio.Future[None] = loop.create_future()
        self._lost: asyncio.Future[None] = loop.create_future()
        self._fragments: list[bytes] = []
        self._fragments_opcode = 0
        self._fragments_bytes = 0
        self._close_sent = False
        self.close_code: int | None = None  # the endpoint's close frame's, once it came
        self._failure: str | None = None
        self._can_write: asyncio.Future[None] | None = None  # set while the transport is full

    @property
    def closed(self) -> bool:
        return self._close_sent or self._lost.done()

    # --- asyncio.Protocol ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's is not an asyncio.Transport subclass: no isinstance)
        self._transport = cast(asyncio.Transport, transport)
        self._transport.write(
            b"GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
            % (self._endpoint.resource.encode(), self._endpoint.authority.encode(), self._key)
        )

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if not self.opened.done() and not self._handshake():
            return
        try:
            self._read_frames()
        except _Failure as failure:
            self._fail(failure.code, failure.reason)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.opened.done():
            self.opened.set_exception(
                WebSocketRefused(f"connection closed during the handshake ({exc!r})")
            )
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)
        if not self._lost.done():
            self._lost.set_result(None)
            self._on_closed(self._reason(exc))

    def pause_writing(self) -> None:
        self._can_write = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)
        self._can_write = None

    # --- what the client calls ---

    def send_text(self, text: str) -> int:
        """One text message; returns its size in bytes. ConnectionError once closing."""
        if self.closed or self._transport is None or self._transport.is_closing():
            raise ConnectionError("the WebSocket is closed")
        payload = text.encode("utf-8")
        self._transport.write(_frame(TEXT, payload))
        return len(payload)

    async def drain(self) -> None:
        """Wait while the transport's buffer is over its high-water mark."""
        if self._can_write is not None:
            await self._can_write

    def abort(self) -> None:
        """Cut the connection now, without a closing handshake."""
        if self._transport is not None:
            self._transport.abort()

    async def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """The closing handshake; the connection is cut past ``timeout_s`` or when cancelled."""
        if self._transport is None:
            return
        self._send_close(NORMAL)
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(self._lost)
        except TimeoutError:
            self.abort()
        except BaseException:  # cancelled (SIGTERM, Ctrl-C): nothing is left open
            self.abort()
            raise

    # --- inside ---

    def _handshake(self) -> bool:
        """Whether the handshake's answer is in and good; refuses the connection if it is bad."""
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                self._refuse(f"no end of the handshake's headers in {MAX_HEAD_BYTES} bytes")
            return False
        head = bytes(self._buffer[:end]).decode("latin-1")
        del self._buffer[: end + 4]
        problem = _handshake_problem(head, self._key)
        if problem is not None:
            self._refuse(problem)
            return False
        self.opened.set_result(None)
        return True

    def _refuse(self, problem: str) -> None:
        assert self._transport is not None
        if not self.opened.done():
            self.opened.set_exception(WebSocketRefused(f"{self._endpoint.authority}: {problem}"))
        self._failure = problem
        self._transport.abort()

    def _read_frames(self) -> None:
        """Every whole frame in the buffer, in order; a part of one waits for more bytes."""
        buffer, at = self._buffer, 0
        try:
            # a close (theirs or ours for a bad frame) ends the reading
            while self._transport is not None and not self._transport.is_closing():
                frame = _parse_header(buffer, at)
                if frame is None:
                    return
                opcode, fin, start, size = frame
                self._check_size(opcode, fin, size)
                if len(buffer) < start + size:
                    return
                with memoryview(buffer) as view:  # one copy, not a slice's and then bytes'
                    payload = bytes(view[start : start + size])
                at = start + size
                self._on_frame(opcode, fin, payload)
        finally:
            del buffer[:at]

    def _check_size(self, opcode: int, fin: bool, size: int) -> None:
        if opcode >= CLOSE:
            if not fin or size > 125:
                raise _Failure(PROTOCOL_ERROR, "a control frame fragmented or over 125 bytes")
        elif self._fragments_bytes + size > self._max_bytes:
            raise _Failure(TOO_BIG, f"a message over {self._max_bytes} bytes")

    def _on_frame(self, opcode: int, fin: bool, payload: bytes) -> None:
        if opcode == CLOSE:
            self._on_close_frame(payload)
        elif opcode == PING:
            if not self._close_sent and self._transport is not None:
                self._transport.write(_frame(PONG, payload))
        elif opcode == PONG:
            pass
        elif opcode in (TEXT, BINARY, CONTINUATION):
            self._on_data(opcode, fin, payload)
        else:
            raise _Failure(PROTOCOL_ERROR, f"reserved opcode {opcode:#x}")

    def _on_data(self, opcode: int, fin: bool, payload: bytes) -> None:
        if (opcode == CONTINUATION) != bool(self._fragments_opcode):
            raise _Failure(PROTOCOL_ERROR, "a fragment out of order")
        if not fin or self._fragments_opcode:
            self._fragments.append(payload)
            self._fragments_bytes += len(payload)
            self._fragments_opcode = self._fragments_opcode or opcode
            if not fin:
                return
            opcode, payload = self._fragments_opcode, b"".join(self._fragments)
            self._fragments, self._fragments_opcode, self._fragments_bytes = [], 0, 0
        if opcode == TEXT:
            try:
                text = payload.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _Failure(INVALID_DATA, f"a text message that is not UTF-8 ({exc})") from None
        else:  # CDP speaks text; a binary message is read as text all the same
            text = payload.decode("utf-8", errors="replace")
        try:
            self._on_message(text, len(payload))
        except Exception as exc:  # the reader must never die silently
            raise _Failure(INTERNAL_ERROR, f"reader failed: {exc!r}") from exc

    def _on_close_frame(self, payload: bytes) -> None:
        self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else NO_STATUS
        self._send_close(NORMAL if self.close_code == NO_STATUS else self.close_code)
        assert self._transport is not None
        self._transport.close()  # both closes are sent: the TCP connection can go

    def _send_close(self, code: int) -> None:
        if self._close_sent or self._transport is None or self._transport.is_closing():
            return
        self._close_sent = True
        self._transport.write(_frame(CLOSE, struct.pack("!H", code)))

    def _fail(self, code: int, reason: str) -> None:
        self._failure = reason
        self._send_close(code)
        if self._transport is not None:
            self._transport.close()

    def _reason(self, exc: Exception | None) -> str:
        if self._failure is not None:
            return f"websocket error: {self._failure}"
        if self.close_code is not None:
            return f"websocket closed (code {self.close_code})"
        if exc is not None:
            return f"connection lost: {exc!r}"
        return "connection closed without a close frame"


class _Failure(MetewandError):
    """A frame that ends the connection with ``code``."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _parse_header(buffer: bytearray, at: int) -> tuple[int, bool, int, int] | None:
    """(opcode, fin, where the payload starts, its size) of the frame at ``at``; None while
    its header is not all in."""
    if len(buffer) < at + 2:
        return None
    first, second = buffer[at], buffer[at + 1]
    if first & 0x70:
        raise _Failure(PROTOCOL_ERROR, "reserved bits set (no extension was agreed)")
    if second & 0x80:
        raise _Failure(PROTOCOL_ERROR, "a masked frame from the server")
    size, start = second & 0x7F, at + 2
    if size == 126:
        if len(buffer) < start + 2:
            return None
        size, start = struct.unpack_from("!H", buffer, start)[0], start + 2
    elif size == 127:
        if len(buffer) < start + 8:
            return None
        size, start = struct.unpack_from("!Q", buffer, start)[0], start + 8
    return first & 0x0F, bool(first & 0x80), start, size


def _frame(opcode: int, payload: bytes) -> bytes:
    """A final, masked frame (a client masks every frame it sends)."""
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
    mask = os.urandom(4)
    return head + mask + _masked(payload, mask)


def _masked(payload: bytes, mask: bytes) -> bytes:
    """``payload`` XOR the repeated ``mask``, as one big-integer XOR (linear, in C)."""
    size = len(payload)
    if size == 0:
        return b""
    key = (mask * (size // 4 + 1))[:size]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(size, "big")


def _handshake_problem(head: str, key: bytes) -> str | None:
    """What is wrong with the handshake's answer (status line and headers), or None."""
    status_line, *lines = head.split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or parts[1] != "101":
        return f"the handshake was answered {status_line!r}"
    headers: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    accept = base64.b64encode(hashlib.sha1(key + ACCEPT_GUID).digest()).decode()
    if headers.get("upgrade", "").lower() != "websocket":
        return "no Upgrade: websocket in the handshake's answer"
    if "upgrade" not in (
        token.strip().lower() for token in headers.get("connection", "").split(",")
    ):
        return "no Connection: upgrade in the handshake's answer"
    if headers.get("sec-websocket-accept") != accept:
        return "the handshake's Sec-WebSocket-Accept does not match the key sent"
    if headers.get("sec-websocket-extensions"):
        return "an extension nobody offered in the handshake's answer"
    return None
