"""Issue 12 item 6: slow and hostile clients of the fixture server get a closed connection or
a 4xx, never a 500, a hang or a connection held for ever. Real server, real sockets."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from browser_fixture_helpers import corpus_or_skip, port_of, raw_http, serve
from metewand.suites.browser.fixtures import ServerThread
from metewand.suites.browser.fixtures.limits import (
    BODY_TIMEOUT_S,
    HEAD_TIMEOUT_S,
    MAX_PATH_CHARS,
    MAX_REQUEST_BODY,
    RESPONSE_TIMEOUT_S,
)

SLACK_S = 5.0  # a loaded host; the point is "closed in bounded time", not "closed at once"
JSON_POSTS = (
    "/__grade__/expected_answer",
    "/__grade__/storage_indexeddb_inventory_001",
    "/__event__/storage_indexeddb_inventory_001",
    "/v0_4/app/api/login",
)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    yield from serve(corpus_or_skip())


def _closed_after(port: int, opening: bytes, dribble: bytes = b"") -> tuple[float, bytes]:
    """Seconds until the server ends the connection, and what it sent before."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(opening)
        sock.settimeout(0.5)
        received = b""
        while time.monotonic() - started < HEAD_TIMEOUT_S + BODY_TIMEOUT_S + SLACK_S:
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                if dribble:
                    try:
                        sock.sendall(dribble)  # one byte at a time keeps the socket busy
                    except OSError:
                        break
                continue
            except OSError:
                break
            if not chunk:
                break
            received += chunk
        return time.monotonic() - started, received


def _stalled_reader(port: int) -> tuple[float, bytes]:
    """Ask for 8 MiB and read nothing until the server's deadline passed; then read what is
    left: a server that gave up ends the stream early (EOF or reset), else all 8 MiB come."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"GET /__resource__/echo?response_bytes=8388608 HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(RESPONSE_TIMEOUT_S + SLACK_S)
        sock.settimeout(SLACK_S)
        received = 0
        try:
            while chunk := sock.recv(65536):
                received += len(chunk)
        except (ConnectionResetError, TimeoutError):
            pass
        return time.monotonic() - started, str(received).encode()


def _in_parallel(
    jobs: dict[str, Callable[[], tuple[float, bytes]]],
) -> dict[str, tuple[float, bytes]]:
    results: dict[str, tuple[float, bytes]] = {}
    threads = [
        threading.Thread(target=lambda n=name, j=job: results.__setitem__(n, j()))
        for name, job in jobs.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_silent_dribbling_and_stalled_clients_are_cut_off(server: ServerThread) -> None:
    port = port_of(server)
    post_head = (
        b"POST /__grade__/expected_answer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"task_id"'
    )
    results = _in_parallel(
        {
            "silent": lambda: _closed_after(port, b""),
            "half_head": lambda: _closed_after(port, b"GET /l1/core HTTP/1.1\r\nHost: x\r\n"),
            "dribble": lambda: _closed_after(port, b"GET /l1/core HTTP/1.1\r\n", dribble=b"X"),
            "stalled_body": lambda: _closed_after(port, post_head),
            "stalled_reader": lambda: _stalled_reader(port),
        }
    )
    for name in ("silent", "half_head", "dribble"):
        waited, received = results[name]
        assert waited < HEAD_TIMEOUT_S + SLACK_S, (name, waited)
        assert b" 500 " not in received, received
    waited, received = results["stalled_body"]
    assert waited < BODY_TIMEOUT_S + SLACK_S, waited
    assert received.startswith(b"HTTP/1.1 408 "), received
    waited, received = results["stalled_reader"]
    assert int(received) < 8 * 1024 * 1024, received  # cut off, not held open until it reads
    assert waited < RESPONSE_TIMEOUT_S + 2 * SLACK_S
    # the server still serves everyone else
    assert raw_http(port, b"/l1/core").status == 200


def test_over_long_paths_are_4xx_not_500(server: ServerThread) -> None:
    port = port_of(server)
    long_component = b"/fixtures/" + b"a" * 300  # over NAME_MAX: the filesystem refuses it
    assert raw_http(port, long_component).status == 404
    deep_path = b"/fixtures/" + b"a/" * 1500
    assert raw_http(port, deep_path).status == 414
    assert len(deep_path) > MAX_PATH_CHARS
    assert raw_http(port, b"/" + b"b" * 9000).status == 400  # the request line limit


@pytest.mark.parametrize("path", JSON_POSTS)
def test_deep_and_huge_json_bodies_are_4xx_not_500(server: ServerThread, path: str) -> None:
    port = port_of(server)
    headers = (b"Content-Type: application/json",)
    for depth in (100_000, 5_000, 40):
        body = b'{"session": "s", "event": "idb_write", "task_id": "x", "seed": "s", "user": ' + (
            b"[" * depth + b"]" * depth + b"}"
        )
        exchange = raw_http(port, path.encode(), b"POST", headers, body)
        assert 400 <= exchange.status < 500, (path, depth, exchange.head)
    wide = json.dumps({"task_id": "x", "answer": "y" * (2 * 1024 * 1024)}).encode()
    assert 400 <= raw_http(port, path.encode(), b"POST", headers, wide).status < 500


def test_a_body_over_the_limit_is_413(server: ServerThread) -> None:
    body = b"x" * (MAX_REQUEST_BODY + 1)
    exchange = raw_http(port_of(server), b"/__resource__/echo", b"POST", (), body)
    assert exchange.status == 413
