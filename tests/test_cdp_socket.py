"""The CDP client's WebSocket (``cdp_socket``): against aiohttp's WebSocket server (a real
implementation on the other side), and against a scripted server for the frames and answers a
good server never sends. Each runs on the standard event loop and on uvloop (the harness's)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import struct
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import aiohttp
import pytest
import uvloop
from aiohttp import web

from metewand.suites.browser.cdp import CdpClient, CdpDisconnected
from metewand.suites.browser.cdp_socket import (
    ACCEPT_GUID,
    CdpSocket,
    WebSocketRefused,
    endpoint_of,
    open_websocket,
)

LOOPS = ["asyncio", "uvloop"]


def run_on(loop: str, scenario: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return (uvloop.run if loop == "uvloop" else asyncio.run)(scenario())


class Received:
    """What the client's callbacks were given."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, int]] = []
        self.closed: list[str] = []
        self.gone = asyncio.Event()

    def on_message(self, text: str, size: int) -> None:
        self.messages.append((text, size))

    def on_closed(self, reason: str) -> None:
        self.closed.append(reason)
        self.gone.set()


async def until(done: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        await asyncio.sleep(0.01)


async def opened(url: str, got: Received, max_bytes: int = 1 << 26) -> CdpSocket:
    return await open_websocket(
        url, got.on_message, got.on_closed, timeout_s=5, max_bytes=max_bytes
    )


# ---- against aiohttp's server ----


async def aiohttp_server(handler: Callable[[web.WebSocketResponse], Awaitable[None]]) -> Any:
    async def endpoint(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=False, max_msg_size=0)
        await ws.prepare(request)
        await handler(ws)
        return ws

    app = web.Application()
    app.router.add_get("/devtools/browser/x", endpoint)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"ws://127.0.0.1:{port}/devtools/browser/x"


@pytest.mark.parametrize("loop", LOOPS)
def test_messages_of_every_length_go_both_ways(loop: str) -> None:
    """Each length form (7, 16 and 64 bits) and non-ASCII text: what the server echoes is what
    was sent, so the masking is right, and the sizes are the UTF-8 bytes."""
    texts = ["", "a" * 125, "b" * 126, "c" * 65535, "d" * 65536, "e" * (3 << 20), "é→😀" * 9]

    async def echo(ws: web.WebSocketResponse) -> None:
        async for message in ws:
            if message.type == aiohttp.WSMsgType.TEXT:
                await ws.send_str(message.data)

    async def scenario() -> None:
        runner, url = await aiohttp_server(echo)
        got = Received()
        socket = await opened(url, got)
        sizes = [socket.send_text(text) for text in texts]
        await until(lambda: len(got.messages) == len(texts) or bool(got.closed), "the echoes")
        await socket.close()
        await runner.cleanup()
        assert got.messages == [(text, len(text.encode())) for text in texts]
        assert sizes == [len(text.encode()) for text in texts]

    run_on(loop, scenario)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_ping_is_answered_and_a_close_ends_the_connection_with_its_code(loop: str) -> None:
    seen: list[Any] = []

    async def ping_then_close(ws: web.WebSocketResponse) -> None:
        await ws.ping(b"are you there")
        seen.append(await ws.receive())
        await ws.close(code=4001, message=b"bye")
        seen.append(ws.close_code)

    async def scenario() -> None:
        runner, url = await aiohttp_server(ping_then_close)
        got = Received()
        socket = await opened(url, got)
        await asyncio.wait_for(got.gone.wait(), 5)
        await runner.cleanup()
        assert socket.close_code == 4001 and socket.closed
        assert got.closed == ["websocket closed (code 4001)"]
        with pytest.raises(ConnectionError):
            socket.send_text("too late")

    run_on(loop, scenario)
    pong, close_code = seen
    assert pong.type == aiohttp.WSMsgType.PONG and pong.data == b"are you there"
    assert close_code == 4001  # aiohttp's close returned: our close frame answered it


@pytest.mark.parametrize("loop", LOOPS)
def test_our_close_is_a_closing_handshake(loop: str) -> None:
    seen: list[Any] = []

    async def wait(ws: web.WebSocketResponse) -> None:
        seen.append(await ws.receive())

    async def scenario() -> None:
        runner, url = await aiohttp_server(wait)
        got = Received()
        socket = await opened(url, got)
        started = time.monotonic()
        await socket.close()
        assert time.monotonic() - started < 1.5 and got.closed
        await runner.cleanup()

    run_on(loop, scenario)
    assert seen[0].type == aiohttp.WSMsgType.CLOSE and seen[0].data == 1000


# ---- against a scripted server ----


def server_frame(opcode: int, payload: bytes, fin: bool = True, first: int = 0) -> bytes:
    """A frame as a server writes it (unmasked); ``first`` ORs extra bits into the first byte."""
    head = (0x80 if fin else 0) | opcode | first
    size = len(payload)
    if size < 126:
        return struct.pack("!BB", head, size) + payload
    if size < 1 << 16:
        return struct.pack("!BBH", head, 126, size) + payload
    return struct.pack("!BBQ", head, 127, size) + payload


def client_frames(data: bytes) -> list[tuple[int, bytes]]:
    """(opcode, unmasked payload) of each frame the client sent; every one must be masked."""
    frames, at = [], 0
    while at + 2 <= len(data):
        first, second = data[at], data[at + 1]
        assert second & 0x80, "a client frame without a mask"
        size, at = second & 0x7F, at + 2
        if size == 126:
            size, at = struct.unpack_from("!H", data, at)[0], at + 2
        elif size == 127:
            size, at = struct.unpack_from("!Q", data, at)[0], at + 8
        mask, at = data[at : at + 4], at + 4
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(data[at : at + size]))
        frames.append((first & 0x0F, payload))
        at += size
    return frames


class ScriptedServer:
    """Answers one handshake with ``status`` and ``headers`` (by default a good server's, with
    the key's accept value) plus ``extra``, writes ``then`` in the same packet, and keeps every
    byte the client sends until it closes (or ``hold_s`` passes)."""

    def __init__(
        self,
        then: bytes = b"",
        status: str = "101 Switching Protocols",
        headers: dict[str, str] | None = None,
        extra: dict[str, str] | None = None,
        hold_s: float = 3.0,
    ) -> None:
        self.then, self.status, self.headers, self.hold_s = then, status, headers, hold_s
        self.extra = extra or {}
        self.received = b""
        self.done = asyncio.Event()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"ws://127.0.0.1:{port}/devtools/browser/x"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        key = next(
            line.split(":", 1)[1].strip()
            for line in request.split("\r\n")
            if line.lower().startswith("sec-websocket-key:")
        )
        accept = base64.b64encode(hashlib.sha1(key.encode() + ACCEPT_GUID).digest()).decode()
        headers = self.headers or {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Accept": accept,
        }
        headers = {**headers, **self.extra}
        head = f"HTTP/1.1 {self.status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        writer.write(head.encode() + b"\r\n" + self.then)
        try:
            async with asyncio.timeout(self.hold_s):
                while chunk := await reader.read(65536):
                    self.received += chunk
        except TimeoutError:
            pass
        writer.close()
        self.done.set()

    async def stop(self) -> None:
        self._server.close()
        await self._server.wait_closed()


@pytest.mark.parametrize("loop", LOOPS)
def test_fragments_make_one_message_around_a_ping(loop: str) -> None:
    """A message in three fragments with a ping between them, in the handshake's own packet."""
    frames = (
        server_frame(0x1, b'{"id":1,', fin=False)
        + server_frame(0x9, b"ping!")
        + server_frame(0x0, b'"result":', fin=False)
        + server_frame(0x0, '{"é":1}}'.encode())
        + server_frame(0x1, b'{"id":2}')
    )

    async def scenario() -> None:
        server = ScriptedServer(frames)
        got = Received()
        socket = await opened(await server.start(), got)
        await until(lambda: len(got.messages) == 2 or bool(got.closed), "two messages")
        await socket.close(timeout_s=0.2)
        await server.done.wait()
        await server.stop()
        whole = '{"id":1,"result":{"é":1}}'
        assert got.messages == [(whole, len(whole.encode())), ('{"id":2}', 8)]
        assert client_frames(server.received) == [(0xA, b"ping!"), (0x8, b"\x03\xe8")]

    run_on(loop, scenario)


BAD_FRAMES = {
    "masked": (b"\x81\x82abcd" + bytes([ord("h") ^ ord("a"), ord("i") ^ ord("b")]), 1002),
    "reserved bit": (server_frame(0x1, b"hi", first=0x40), 1002),
    "reserved opcode": (server_frame(0x3, b"hi"), 1002),
    "continuation of nothing": (server_frame(0x0, b"hi"), 1002),
    "long control frame": (server_frame(0x9, b"p" * 126), 1002),
    "fragmented control frame": (server_frame(0x9, b"p", fin=False), 1002),
    "text not UTF-8": (server_frame(0x1, b"\xff\xfe"), 1007),
    "over max_bytes": (server_frame(0x1, b"x" * 2000), 1009),
    "fragments over max_bytes": (
        server_frame(0x1, b"x" * 600, fin=False) + server_frame(0x0, b"x" * 600),
        1009,
    ),
    "new message inside a fragmented one": (
        server_frame(0x1, b"x", fin=False) + server_frame(0x1, b"y"),
        1002,
    ),
}


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("case", sorted(BAD_FRAMES))
def test_a_frame_no_server_may_send_closes_with_its_code(loop: str, case: str) -> None:
    frame, code = BAD_FRAMES[case]

    async def scenario() -> None:
        server = ScriptedServer(server_frame(0x1, b'{"ok":1}') + frame)
        got = Received()
        await opened(await server.start(), got, max_bytes=1024)
        await asyncio.wait_for(got.gone.wait(), 5)
        await server.done.wait()
        await server.stop()
        assert got.messages == [('{"ok":1}', 8)]  # what came before the bad frame
        assert len(got.closed) == 1 and got.closed[0].startswith("websocket error: ")
        assert client_frames(server.received) == [(0x8, struct.pack("!H", code))]

    run_on(loop, scenario)


REFUSALS = {
    "status": ("403 Forbidden", None, "'HTTP/1.1 403 Forbidden'"),
    "accept": (
        "101 Switching Protocols",
        {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Accept": "bm9wZQ=="},
        "Sec-WebSocket-Accept does not match",
    ),
    "upgrade": (
        "101 Switching Protocols",
        {"Connection": "Upgrade", "Sec-WebSocket-Accept": "x"},
        "no Upgrade: websocket",
    ),
}


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_bad_handshake_answer_refuses_the_connection(loop: str, case: str) -> None:
    status, headers, said = REFUSALS[case]

    async def scenario() -> None:
        server = ScriptedServer(status=status, headers=headers)
        url = await server.start()
        with pytest.raises(WebSocketRefused, match=said):
            await opened(url, Received())
        with pytest.raises(CdpDisconnected, match="cannot connect"):
            await CdpClient.connect(url, timeout=2)
        await server.stop()

    run_on(loop, scenario)


@pytest.mark.parametrize("loop", LOOPS)
def test_an_extension_nobody_offered_refuses_the_connection(loop: str) -> None:
    async def scenario() -> None:
        server = ScriptedServer(extra={"Sec-WebSocket-Extensions": "permessage-deflate"})
        with pytest.raises(WebSocketRefused, match="extension nobody offered"):
            await opened(await server.start(), Received())
        await server.stop()

    run_on(loop, scenario)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_close_never_answered_is_cut_in_time(loop: str) -> None:
    async def scenario() -> None:
        server = ScriptedServer(hold_s=5)
        got = Received()
        socket = await opened(await server.start(), got)
        started = time.monotonic()
        await socket.close(timeout_s=0.3)
        assert 0.25 < time.monotonic() - started < 1.5
        await asyncio.wait_for(got.gone.wait(), 1)
        await asyncio.wait_for(server.done.wait(), 2)  # the server saw the connection end
        await server.stop()

    run_on(loop, scenario)


def test_endpoints_of_urls() -> None:
    plain = endpoint_of("ws://127.0.0.1:9222/devtools/browser/abc?x=1")
    assert (plain.host, plain.port, plain.resource, plain.authority, plain.secure) == (
        "127.0.0.1",
        9222,
        "/devtools/browser/abc?x=1",
        "127.0.0.1:9222",
        False,
    )
    six = endpoint_of("wss://[::1]/devtools")
    assert (six.host, six.port, six.authority, six.secure) == ("::1", 443, "[::1]", True)
    assert endpoint_of("ws://localhost").resource == "/"
    for bad in ("http://127.0.0.1:9222/", "ws:///nohost", "devtools/browser"):
        with pytest.raises(ValueError, match="not a WebSocket URL"):
            endpoint_of(bad)
