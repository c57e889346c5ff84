"""A client that closes a server-sent-events stream early (a page whose attempt ended) is
normal: the fixture server logs no failure and no traceback (seen in a full corpus run)."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import pytest

from browser_fixture_helpers import port_of, serve
from metewand.suites.browser.fixtures.endpoints.realtime import SSE_EVENTS, SSE_INTERVAL_S


def test_sse_client_closing_early_is_not_a_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for thread in serve(tmp_path):
        with socket.create_connection(("127.0.0.1", port_of(thread)), timeout=5) as sock:
            sock.sendall(b"GET /__sse__/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            first = sock.recv(4096)
            assert b"200" in first.split(b"\r\n", 1)[0]
        time.sleep(SSE_EVENTS * SSE_INTERVAL_S + 0.3)  # the handler writes into the closed socket
    failures = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert failures == [], [r.getMessage() for r in failures]
