"""Shared helpers for fixture-server tests: a real server on the real corpus, raw HTTP."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from metewand.suites.browser.fixtures import FixtureServer, ServerThread
from shared_paths import LEXBENCH, lexbench_or_skip

CORPUS = LEXBENCH
CORPUS_FIXTURES = CORPUS / "fixtures"


def corpus_or_skip() -> Path:
    return lexbench_or_skip() / "fixtures"


def serve(root: Path, **kwargs: object) -> Iterator[ServerThread]:
    thread = ServerThread(FixtureServer(root, **kwargs))  # type: ignore[arg-type]
    thread.start()
    try:
        yield thread
    finally:
        thread.stop()


def port_of(thread: ServerThread) -> int:
    assert thread.server.base_url is not None
    return int(thread.server.base_url.rsplit(":", 1)[1])


@dataclass(frozen=True)
class RawExchange:
    request: bytes  # exactly what was sent
    head: bytes  # status line + headers + blank line, as received
    body: bytes

    @property
    def status(self) -> int:
        return int(self.head.split(b" ", 2)[1])

    def header(self, name: str) -> str | None:
        for line in self.head.split(b"\r\n")[1:]:
            key, _, value = line.partition(b":")
            if key.strip().lower() == name.lower().encode():
                return value.strip().decode("latin-1")
        return None


def raw_http(
    port: int,
    target: bytes,
    method: bytes = b"GET",
    headers: tuple[bytes, ...] = (),
    body: bytes = b"",
) -> RawExchange:
    """One request on a fresh connection, bytes exactly as given (no client normalisation)."""
    lines = [method + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    lines += list(headers)
    if body:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    request = b"\r\n".join(lines) + b"\r\n\r\n" + body
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    data = b"".join(chunks)
    head, sep, rest = data.partition(b"\r\n\r\n")
    assert sep, data[:200]
    return RawExchange(request, head + sep, rest)
