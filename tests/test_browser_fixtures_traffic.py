"""Traffic counters checked against exact byte counts seen on the wire."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import jsonschema
import pytest

from browser_fixture_helpers import corpus_or_skip, port_of, raw_http, serve
from metewand.suites.browser.fixtures import ServerThread, TrafficCounters

SCHEMA_PATH = Path(__file__).parents[1] / "src/metewand/schemas/abb_fixture_traffic-1.schema.json"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    yield from serve(corpus_or_skip())


def finish(server: ServerThread, key: str, grace_s: float = 0.5) -> TrafficCounters:
    counters = server.call(server.server.traffic.end_attempt_settled(key, grace_s))
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator(schema).validate(counters.to_json())
    return counters


def dechunk(body: bytes) -> bytes:
    out, rest = b"", body
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return out
        out, rest = out + rest[:size], rest[size + 2 :]


def test_static_file_exact_bytes(server: ServerThread) -> None:
    traffic = server.server.traffic
    traffic.begin_attempt("static")
    exchange = raw_http(port_of(server), b"/pixel.png")
    counters = finish(server, "static")
    assert len(exchange.body) == 70 == (corpus_or_skip() / "l1/pixel.png").stat().st_size
    assert counters.available and counters.reason is None
    assert counters.app.requests == 1
    assert counters.app.tx_body_bytes == 70
    assert counters.app.tx_header_bytes == len(exchange.head)
    assert counters.app.rx_header_bytes == len(exchange.request)
    assert counters.app.rx_body_bytes == 0
    assert counters.harness.requests == 0


def test_grade_request_goes_to_harness_counter(server: ServerThread) -> None:
    # Acceptance 4: /__grade__/ is harness traffic, never the engine's.
    traffic = server.server.traffic
    traffic.begin_attempt("grade")
    body = json.dumps({"task_id": "v2_idb_cursor_forward", "answer": "FWD=A,B,C,D,E"}).encode()
    headers = (b"Content-Type: application/json",)
    exchange = raw_http(port_of(server), b"/__grade__/expected_answer", b"POST", headers, body)
    counters = finish(server, "grade")
    assert json.loads(exchange.body)["ok"] is True
    assert counters.app.requests == 0
    assert counters.app.rx_body_bytes == counters.app.tx_body_bytes == 0
    assert counters.app.rx_header_bytes == counters.app.tx_header_bytes == 0
    assert counters.harness.requests == 1
    assert counters.harness.rx_body_bytes == len(body)
    assert counters.harness.tx_body_bytes == len(exchange.body)
    assert counters.harness.rx_header_bytes == len(exchange.request) - len(body)
    assert counters.harness.tx_header_bytes == len(exchange.head)
    as_json = counters.to_json()
    assert as_json["excluded_harness_request_count"] == 1
    assert as_json["fixture_request_count"] == 0


def test_event_request_goes_to_harness_counter(server: ServerThread) -> None:
    server.server.traffic.begin_attempt("event")
    body = b'{"session":"s-ev","event":"idb_write"}'
    raw_http(port_of(server), b"/__event__/storage_indexeddb_inventory_001", b"POST", (), body)
    counters = finish(server, "event")
    assert (counters.app.requests, counters.harness.requests) == (0, 1)
    assert counters.harness.rx_body_bytes == len(body)


def test_upload_and_calibration_bodies(server: ServerThread) -> None:
    server.server.traffic.begin_attempt("bodies")
    boundary = b"mwboundary"
    upload = (
        b"--mwboundary\r\n"
        b'Content-Disposition: form-data; name="f"; filename="a.txt"\r\n'
        b"Content-Type: text/plain\r\n\r\n" + b"u" * 500 + b"\r\n--mwboundary--\r\n"
    )
    ctype = b"Content-Type: multipart/form-data; boundary=" + boundary
    up = raw_http(port_of(server), b"/v0_4/upload", b"POST", (ctype,), upload)
    echo = raw_http(
        port_of(server), b"/__resource__/echo?response_bytes=4096", b"POST", (), b"q" * 77
    )
    counters = finish(server, "bodies")
    assert b"uploaded:a.txt:500:" in up.body
    assert counters.app.requests == 2
    assert counters.app.rx_body_bytes == len(upload) + 77
    assert counters.app.tx_body_bytes == len(up.body) + 4096
    assert counters.app.tx_header_bytes == len(up.head) + len(echo.head)


def test_redirect_chain_counts_every_hop(server: ServerThread) -> None:
    server.server.traffic.begin_attempt("redirect")
    port = port_of(server)
    hops = [raw_http(port, b"/v0_4/redirect/hop?n=2"), raw_http(port, b"/v0_4/redirect/hop?n=1")]
    landing = raw_http(port, hops[-1].header("Location").encode())  # type: ignore[union-attr]
    counters = finish(server, "redirect")
    assert [h.status for h in hops] == [302, 302] and landing.status == 200
    exchanges = [*hops, landing]
    assert counters.app.requests == 3
    assert counters.app.tx_body_bytes == len(landing.body)
    assert counters.app.tx_header_bytes == sum(len(e.head) for e in exchanges)
    assert counters.app.rx_header_bytes == sum(len(e.request) for e in exchanges)


def test_sse_counts_streamed_chunks_without_framing(server: ServerThread) -> None:
    server.server.traffic.begin_attempt("sse")
    exchange = raw_http(port_of(server), b"/__sse__/messages")
    counters = finish(server, "sse")
    payload = dechunk(exchange.body)
    assert payload.count(b"data: wsd-sse-") == 3
    assert counters.app.tx_body_bytes == len(payload) < len(exchange.body)
    assert counters.app.tx_header_bytes == len(exchange.head)


def test_websocket_payloads_both_ways(server: ServerThread) -> None:
    sizes = (5, 300, 70_000)  # 7-bit, 16-bit and 64-bit frame length forms

    async def talk() -> None:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(server.server.url("/__ws__/echo").replace("http", "ws")) as ws,
        ):
            for size in sizes:
                await ws.send_str("w" * size)
                reply = await ws.receive(timeout=5)
                assert reply.data == "echo:" + "w" * size
            await ws.send_bytes(b"\x01" * 10)
            assert (await ws.receive(timeout=5)).data == b"echo:" + b"\x01" * 10

    server.server.traffic.begin_attempt("ws")
    asyncio.run(talk())
    counters = finish(server, "ws", grace_s=2.0)
    assert counters.available, counters
    assert counters.app.requests == 1
    assert counters.app.rx_body_bytes == sum(sizes) + 10
    assert counters.app.tx_body_bytes == sum(sizes) + 10 + 5 * 4
    assert counters.app.tx_header_bytes > len("HTTP/1.1 101 Switching Protocols\r\n")
    assert counters.app.rx_header_bytes > 0


def test_open_websocket_makes_value_unavailable(server: ServerThread) -> None:
    async def hold() -> TrafficCounters:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(server.server.url("/__ws__/echo").replace("http", "ws")) as ws,
        ):
            await ws.send_str("x")
            await ws.receive(timeout=5)
            # Blocking here is fine: the server runs on its own loop; the socket stays open.
            return server.call(server.server.traffic.end_attempt_settled("hold", 0.05))

    server.server.traffic.begin_attempt("hold")
    counters = asyncio.run(hold())
    assert not counters.available and counters.reason == "inflight_requests"
    assert counters.to_json()["fixture_app_tx_body_bytes"] is None


def test_concurrent_attempts_without_marker_are_unavailable_not_zero(server: ServerThread) -> None:
    traffic = server.server.traffic
    traffic.begin_attempt("c1")
    traffic.begin_attempt("c2")
    raw_http(port_of(server), b"/l1/core")
    first, second = finish(server, "c1"), finish(server, "c2")
    for counters in (first, second):
        assert not counters.available and counters.reason == "ambiguous_attribution"
        doc = counters.to_json()
        assert doc["fixture_app_tx_body_bytes"] is None and doc["ambiguous_request_count"] == 1
        assert all(not m.has_value for m in counters.measurements().values())


def test_marker_header_and_cookie_attribute_and_are_not_counted(server: ServerThread) -> None:
    traffic = server.server.traffic
    one = traffic.begin_attempt("m1")
    traffic.begin_attempt("m2", markers=("sess-m2",))
    port = port_of(server)
    marker = f"{one.header}: {one.token}".encode()
    by_header = raw_http(port, b"/l1/core", headers=(marker,))
    cookie = f"Cookie: a=1; {one.cookie}={one.token}".encode()
    by_cookie = raw_http(port, b"/l1/core", headers=(cookie,))
    by_session = raw_http(port, b"/v2/idb/cursor_forward?db=sess-m2")
    first, second = finish(server, "m1"), finish(server, "m2")
    assert first.available and second.available
    assert first.app.requests == 2 and second.app.requests == 1
    expected_rx = len(by_header.request) - len(marker) - 2
    expected_rx += len(by_cookie.request) - len(f"; {one.cookie}={one.token}")
    assert first.app.rx_header_bytes == expected_rx
    assert first.app.tx_body_bytes == 2 * len(by_header.body)
    assert second.app.rx_header_bytes == len(by_session.request)


def test_requests_without_attempt_are_not_attributed(server: ServerThread) -> None:
    tracker = server.server.traffic
    before = tracker.unattributed.requests
    raw_http(port_of(server), b"/page2")
    assert tracker.unattributed.requests == before + 1
    tracker.begin_attempt("late")
    counters = finish(server, "late")
    assert counters.available and counters.app.requests == 0  # a real zero: nothing was sent


def test_duplicate_attempt_key_is_refused(server: ServerThread) -> None:
    server.server.traffic.begin_attempt("dup")
    with pytest.raises(ValueError, match="dup"):
        server.server.traffic.begin_attempt("dup")
    finish(server, "dup")


def test_request_body_attributes_when_headers_leave_it_open(server: ServerThread) -> None:
    """Two attempts active at once (one server shared by concurrent attempts): a POST whose body
    carries one attempt's token belongs to that attempt, counted with its exact bytes."""
    traffic = server.server.traffic
    one = traffic.begin_attempt("b1")
    traffic.begin_attempt("b2")
    body = json.dumps({"attempt": one.token, "payload": "x" * 100}).encode()
    exchange = raw_http(
        port_of(server),
        b"/__resource__/echo",
        method=b"POST",
        headers=(b"Content-Type: application/json",),
        body=body,
    )
    first, second = finish(server, "b1"), finish(server, "b2")
    assert first.available and second.available
    assert first.app.requests == 1 and second.app.requests == 0
    assert first.app.rx_body_bytes == len(body)
    assert first.app.rx_header_bytes == len(exchange.request) - len(body)
    # a body with no token stays ambiguous: never guessed, never 0
    traffic.begin_attempt("b3")
    traffic.begin_attempt("b4")
    raw_http(port_of(server), b"/__resource__/echo", method=b"POST", body=b"no token here")
    assert finish(server, "b3").reason == "ambiguous_attribution"
    assert finish(server, "b4").reason == "ambiguous_attribution"
