"""The CDP client against real chromium and lightpanda, and the pure event matcher."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from browser_engine_fixtures import REAL_ENGINES, running_engine
from metewand.suites.browser.cdp import (
    CdpClient,
    CdpDisconnected,
    CdpError,
    CdpLogRecorder,
    CdpTimeout,
    _message_text,
    _parsed,
    close_target,
    new_page_target,
)
from metewand.suites.browser.cdp_match import PatternError, matches
from metewand.suites.browser.engine_process import EngineProcess

PAGE = "data:text/html,<title>metewand</title><p>hi</p>"
NEVER = "new Promise(() => {})"


# ---- matcher (pure) ----


def test_none_pattern_matches_anything() -> None:
    assert matches(None, {"a": 1}) and matches(None, None)


def test_dict_pattern_is_a_recursive_subset() -> None:
    value = {"frame": {"id": "F", "url": "about:blank", "extra": 1}, "type": "Navigation"}
    assert matches({"frame": {"url": "about:blank"}}, value)
    assert matches({}, value)
    assert not matches({"frame": {"url": "x"}}, value)
    assert not matches({"missing": None}, value)
    assert not matches({"frame": "F"}, value)


def test_null_inside_a_pattern_matches_only_null() -> None:
    assert matches({"a": None}, {"a": None})
    assert not matches({"a": None}, {"a": 0})


def test_lists_match_index_wise_with_equal_length() -> None:
    assert matches(
        {"args": [{"value": 1}, {"value": 2}]}, {"args": [{"value": 1, "t": "n"}, {"value": 2}]}
    )
    assert not matches({"args": [{"value": 1}]}, {"args": [{"value": 1}, {"value": 2}]})
    assert not matches({"args": [2, 1]}, {"args": [1, 2]})


def test_one_of_matches_any_alternative_at_any_depth() -> None:
    pattern = {"frame": {"url": {"$one_of": ["about:blank", {"$one_of": ["data:x"]}]}}}
    assert matches(pattern, {"frame": {"url": "about:blank"}})
    assert matches(pattern, {"frame": {"url": "data:x"}})
    assert not matches(pattern, {"frame": {"url": "http://x"}})
    assert matches({"$one_of": [{"a": 1}, {"b": 2}]}, {"b": 2, "c": 3})


def test_booleans_are_not_numbers_but_ints_equal_floats() -> None:
    assert not matches({"v": True}, {"v": 1})
    assert not matches({"v": 0}, {"v": False})
    assert matches({"v": 1}, {"v": 1.0})
    assert not matches({"v": 1}, {"v": [1]})


def test_malformed_one_of_is_an_error() -> None:
    with pytest.raises(PatternError):
        matches({"$one_of": [1], "x": 2}, {"x": 2})
    with pytest.raises(PatternError):
        matches({"$one_of": 1}, 1)


# ---- client against real engines ----


@pytest.fixture(scope="module", params=REAL_ENGINES)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineProcess]:
    yield from running_engine(request.param, tmp_path_factory.mktemp(request.param))


def run(engine: EngineProcess, body: Any, log: CdpLogRecorder | None = None) -> Any:
    async def scenario() -> Any:
        async with await CdpClient.connect(str(engine.ws_url), log=log) as client:
            return await body(client)

    return asyncio.run(scenario())


def test_send_receive_log_and_timing(engine: EngineProcess, tmp_path: Path) -> None:
    log = CdpLogRecorder()

    async def body(client: CdpClient) -> None:
        version = await client.send("Browser.getVersion")
        assert version["product"] and version["protocolVersion"] == "1.3"
        assert client.timing.commands == 1 and client.timing.command_wait_s > 0
        assert client.timing.bytes_sent > 0 and client.timing.bytes_received > 0

    run(engine, body, log)
    sent = [r.message for r in log.records if r.direction == "send"]
    received = [r.message for r in log.records if r.direction == "recv"]
    assert sent[0]["method"] == "Browser.getVersion"
    assert any(m.get("id") == sent[0]["id"] for m in received)
    path = tmp_path / "cdp.jsonl"
    log.write_jsonl(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["dir"] for line in lines] == [r.direction for r in log.records]


def test_error_reply_raises_cdp_error(engine: EngineProcess) -> None:
    async def body(client: CdpClient) -> None:
        with pytest.raises(CdpError) as caught:
            await client.send("Metewand.noSuchMethod")
        assert caught.value.code != 0 and caught.value.message
        assert caught.value.method == "Metewand.noSuchMethod"
        assert client.timing.errors == 1
        assert (await client.send("Browser.getVersion"))["product"]  # still usable

    run(engine, body)


def test_command_and_event_timeouts(engine: EngineProcess) -> None:
    async def body(client: CdpClient) -> None:
        page = await new_page_target(client)
        started = time.monotonic()
        with pytest.raises(CdpTimeout):
            await client.send(
                "Runtime.evaluate",
                {"expression": NEVER, "awaitPromise": True},
                session_id=page.session_id,
                timeout=0.3,
            )
        with pytest.raises(CdpTimeout):
            await client.wait_for_event("Page.metewandNever", timeout=0.2)
        assert time.monotonic() - started < 3
        assert client.is_connected
        await close_target(client, page)

    run(engine, body)


def test_a_cancel_that_arrives_with_the_reply_is_not_swallowed(engine: EngineProcess) -> None:
    """A cancel (a task's hard-kill bound, Ctrl-C) that reaches ``send`` after its reply came in
    but before ``send`` resumed must still cancel it. Python 3.11's ``asyncio.wait_for`` returned
    the reply there and dropped the cancel, so a hard-killed attempt ran on and passed (seen in CI).
    The window is caught by polling the reply's future; a try that misses it is not counted."""

    async def body(client: CdpClient) -> int:
        caught = 0
        for _ in range(300):
            message_id = client._next_id
            task = asyncio.create_task(client.send("Browser.getVersion"))
            while not task.done():
                await asyncio.sleep(0)
                pending = client._pending.get(message_id)
                if pending is not None and pending[1].done() and not task.done():
                    task.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await task
                    caught += 1
            if caught == 5:
                break
        assert (await client.send("Browser.getVersion"))["product"]  # still usable
        return caught

    assert run(engine, body) == 5


def test_flattened_session_navigation_and_event_buffer(engine: EngineProcess) -> None:
    async def body(client: CdpClient) -> None:
        page = await new_page_target(client)
        sid = page.session_id
        await client.send("Page.enable", session_id=sid)
        await client.send("Page.navigate", {"url": PAGE}, session_id=sid)
        load = await client.wait_for_event("Page.loadEventFired", session_id=sid, timeout=10)
        assert load["sessionId"] == sid
        title = await client.send(
            "Runtime.evaluate",
            {"expression": "document.title", "returnByValue": True},
            session_id=sid,
        )
        assert title["result"]["value"] == "metewand"
        # frameNavigated arrived before loadEventFired: it is served from the buffer
        wanted = {"frame": {"url": {"$one_of": [PAGE, "about:blank"]}}}
        with pytest.raises(CdpTimeout):
            await client.wait_for_event(
                "Page.frameNavigated", {"frame": {"url": "http://nope/"}}, sid, timeout=0.1
            )
        assert any(e["method"] == "Page.frameNavigated" for e in client.events(sid))
        navigated = await client.wait_for_event("Page.frameNavigated", wanted, sid, timeout=0.1)
        assert navigated["params"]["frame"]["url"] == PAGE
        assert client.events(None) == [e for e in client.events() if "sessionId" not in e]
        assert await close_target(client, page) == []

    run(engine, body)


def test_a_reply_orjson_refuses_is_read_as_the_standard_library_reads_it(
    engine: EngineProcess, tmp_path: Path
) -> None:
    # a page's string may hold a lone surrogate, which the engine sends as a \\ud800 escape:
    # orjson refuses it, and the message is read (and logged) all the same
    log = CdpLogRecorder()

    async def body(client: CdpClient) -> None:
        page = await new_page_target(client)
        lone = await client.send(
            "Runtime.evaluate",
            {"expression": "String.fromCharCode(0xd800) + 'x'", "returnByValue": True},
            session_id=page.session_id,
        )
        assert lone["result"]["value"] == "\ud800x"
        plain = await client.send(
            "Runtime.evaluate",
            {"expression": "[0.1, 2 ** 60, 'é']", "returnByValue": True},
            session_id=page.session_id,
        )
        assert plain["result"]["value"] == [0.1, 2**60, "é"]
        assert await close_target(client, page) == []

    run(engine, body, log)
    log.write_jsonl(tmp_path / "cdp.jsonl")  # the lone surrogate is logged, not lost
    assert "\\ud800x" in (tmp_path / "cdp.jsonl").read_text()


@pytest.mark.parametrize(
    "text",
    [
        '{"id":1,"v":NaN}',
        '{"id":1,"v":123456789012345678901234567890}',
        '{"id":1,"v":[18446744073709552000, 9223372036854775807]}',
        '{"id":1,"v":-9223372036854775809}',
        '{"s":"\\ud800"}',
    ],
)
def test_what_orjson_cannot_read_the_standard_library_reads(text: str) -> None:
    assert repr(_parsed(text)) == repr(json.loads(text))


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_a_message_is_read_as_the_standard_library_reads_it(value: Any) -> None:
    text = json.dumps({"id": 1, "result": value})  # NaN and Infinity as the standard library
    assert repr(_parsed(text)) == repr(json.loads(text))


def test_what_orjson_cannot_write_the_standard_library_writes() -> None:
    message = {"id": 1, "method": "M", "params": {"big": 2**70, "x": 0.5}}
    assert json.loads(_message_text(message)) == message


def test_context_isolation_gives_each_attempt_its_own_context(engine: EngineProcess) -> None:
    async def body(client: CdpClient) -> None:
        first = await new_page_target(client, isolation="context")
        assert first.browser_context_id
        targets = await client.send("Target.getTargets")
        info = {t["targetId"]: t for t in targets["targetInfos"]}
        assert info[first.target_id]["browserContextId"] == first.browser_context_id
        assert await close_target(client, first) == []
        second = await new_page_target(client, isolation="context")
        assert second.browser_context_id
        assert await close_target(client, second) == []

    run(engine, body)


def test_cookies_do_not_cross_contexts(engine: EngineProcess) -> None:
    if engine.engine.name == "lightpanda":
        pytest.skip("lightpanda allows one browser context per CDP connection")
    cookie = {"name": "mw", "value": "1", "url": "http://127.0.0.1/"}

    async def body(client: CdpClient) -> None:
        isolated = await new_page_target(client, isolation="context")
        shared = await new_page_target(client, isolation="shared")
        await client.send("Network.enable", session_id=isolated.session_id)
        await client.send("Network.setCookie", cookie, session_id=isolated.session_id)
        mine = await client.send(
            "Network.getCookies", {"urls": [cookie["url"]]}, session_id=isolated.session_id
        )
        theirs = await client.send(
            "Network.getCookies", {"urls": [cookie["url"]]}, session_id=shared.session_id
        )
        assert [c["name"] for c in mine["cookies"]] == ["mw"]
        assert theirs["cookies"] == []
        for page in (isolated, shared):
            await close_target(client, page)

    run(engine, body)


def test_bad_isolation_value_is_refused() -> None:
    with pytest.raises(ValueError):
        asyncio.run(new_page_target(None, isolation="incognito"))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", REAL_ENGINES)
def test_disconnect_fails_pending_work_at_once(name: str, tmp_path: Path) -> None:
    async def scenario(process: EngineProcess) -> None:
        client = await CdpClient.connect(str(process.ws_url))
        page = await new_page_target(client)
        waiting = asyncio.ensure_future(client.wait_for_event("Page.never", timeout=30))
        pending = asyncio.ensure_future(
            client.send(
                "Runtime.evaluate",
                {"expression": NEVER, "awaitPromise": True},
                session_id=page.session_id,
                timeout=30,
            )
        )
        await asyncio.sleep(0.1)
        killed_at = time.monotonic()
        os.killpg(int(process.pid or 0), signal.SIGKILL)
        for task in (waiting, pending):
            with pytest.raises(CdpDisconnected):
                await task
        assert time.monotonic() - killed_at < 5
        assert not client.is_connected and client.closed_reason
        with pytest.raises(CdpDisconnected):
            await client.send("Browser.getVersion")
        await client.close()

    for process in running_engine(name, tmp_path):
        asyncio.run(scenario(process))


def test_connect_to_a_closed_port_is_a_disconnect() -> None:
    with pytest.raises(CdpDisconnected):
        asyncio.run(CdpClient.connect("ws://127.0.0.1:9/devtools/browser/x", timeout=2))


def test_each_client_closes_its_connection_and_the_next_one_is_served(
    engine: EngineProcess,
) -> None:
    """Attempts connect one after another: a client's close completes the closing handshake
    (the engine closed its side, so Lightpanda, one connection at a time, serves the next)."""

    async def scenario() -> None:
        for _ in range(3):
            async with await CdpClient.connect(str(engine.ws_url)) as client:
                assert (await client.send("Browser.getVersion"))["product"]
            assert not client.is_connected
            assert client._socket is not None and client._socket.close_code == 1000

    asyncio.run(scenario())
