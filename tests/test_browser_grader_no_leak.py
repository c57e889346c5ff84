"""Issue 12 item 4: the fixture server's graders give verdicts, never answers.

Any loopback client can call ``/__grade__/*`` (the engine's own page JavaScript too), so the
HTTP answer holds check names and pass/fail only; the evidence, which names the expected value,
is written to the run directory by the harness (``grader_evidence.json``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from browser_engine_fixtures import running_engine
from browser_fixture_helpers import corpus_or_skip, serve
from browser_run_helpers import lexbench_or_skip, rows_of
from metewand.suites.browser.cdp import CdpClient, close_target, new_page_target
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.fixtures import ServerThread
from metewand.suites.browser.fixtures.answers import inventory_count
from metewand.suites.browser.fixtures.endpoints.harness import GRADER_TOKEN_HEADER
from metewand.suites.browser.run_config import RunConfig
from metewand.suites.browser.runner import run_browser

INVENTORY = "storage_indexeddb_inventory_001"
L2_TASK = "r3_dA_e_before_content"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    yield from serve(corpus_or_skip())


def _one_entry_per_mode(server: ServerThread) -> dict[str, Any]:
    chosen: dict[str, Any] = {}
    for _task_id, entry in sorted(server.server.answers.entries.items()):
        chosen.setdefault(entry.mode, entry)
    assert set(chosen) == {"equals", "contains", "contains_all"}
    return chosen


def _secrets(expected: str | tuple[str, ...]) -> list[str]:
    return [expected] if isinstance(expected, str) else list(expected)


async def _post_all(base: str, posts: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    async with aiohttp.ClientSession() as http:
        bodies = []
        for path, payload in posts:
            async with http.post(base + path, json=payload) as reply:
                bodies.append(await reply.read())
        return bodies


def test_every_grader_answers_verdicts_only(server: ServerThread) -> None:
    entries = _one_entry_per_mode(server)
    posts: list[tuple[str, dict[str, Any]]] = []
    for entry in entries.values():
        right = entry.expected if isinstance(entry.expected, str) else " ".join(entry.expected)
        for answer in ("wrong", "", None, right):
            posts.append(
                ("/__grade__/expected_answer", {"task_id": entry.task_id, "answer": answer})
            )
    seed = "leak-seed"
    posts.append((f"/__grade__/{INVENTORY}", {"seed": seed, "session": "s", "answer": "0"}))
    posts.append((f"/__event__/{INVENTORY}", {"session": "s", "event": "idb_write"}))
    bodies = asyncio.run(_post_all(server.server.base_url or "", posts))
    graded = [json.loads(b) for b in bodies[:-1]]
    for verdict in graded:
        assert set(verdict) == {"ok", "checks", "failure"}
        assert all(set(check) == {"name", "status"} for check in verdict["checks"]), verdict
    for index, entry in enumerate(entries.values()):
        verdicts = graded[index * 4 : index * 4 + 4]
        assert [v["ok"] for v in verdicts] == [False, False, False, True]
        for body in bodies[index * 4 : index * 4 + 3]:  # wrong answers: nothing to learn
            text = body.decode("utf-8")
            for secret in _secrets(entry.expected):
                assert secret not in text and json.dumps(secret)[1:-1] not in text, text
    inventory = bodies[-2].decode("utf-8")
    assert str(inventory_count(seed)) not in inventory, inventory
    assert json.loads(bodies[-1]) == {"ok": True}


async def _page_fetches_grader(process: EngineProcess, base: str, task_id: str) -> str:
    assert process.ws_url is not None
    async with await CdpClient.connect(process.ws_url) as client:
        page = await new_page_target(client)
        try:
            await client.send("Page.navigate", {"url": base + "/l1/core"}, page.session_id)
            for _ in range(100):  # until the fixture page is the document (same origin)
                probe = {"expression": "location.origin + document.readyState"}
                ready = await client.send("Runtime.evaluate", probe, page.session_id)
                if ready["result"].get("value") == base + "complete":
                    break
                await asyncio.sleep(0.05)
            script = (
                f"fetch('/__grade__/expected_answer', {{method: 'POST', headers: "
                f"{{'Content-Type': 'application/json'}}, body: JSON.stringify("
                f"{{task_id: {json.dumps(task_id)}, answer: 'guess'}})}}).then(r => r.text())"
            )
            params = {"expression": script, "awaitPromise": True, "returnByValue": True}
            reply = await client.send("Runtime.evaluate", params, session_id=page.session_id)
            return str(reply["result"]["value"])
        finally:
            await close_target(client, page)


def test_page_javascript_in_chromium_gets_no_expected_answer(
    server: ServerThread, tmp_path: Path
) -> None:
    entry = _one_entry_per_mode(server)["equals"]
    for process in running_engine("chrome", tmp_path / "logs"):
        text = asyncio.run(
            _page_fetches_grader(process, server.server.base_url or "", entry.task_id)
        )
        verdict = json.loads(text)
        assert verdict["ok"] is False and verdict["checks"][0] == {
            "name": "answer_equals_expected",
            "status": "fail",
        }
        assert entry.expected not in text


@pytest.fixture(scope="module")
def harness_only() -> Iterator[ServerThread]:
    yield from serve(corpus_or_skip(), harness_only_graders=True)


async def _grade_with(
    base: str, payload: dict[str, Any], headers: list[dict[str, str]]
) -> list[tuple[int, dict[str, Any]]]:
    out = []
    async with aiohttp.ClientSession() as http:
        for header in headers:
            for path in ("/__grade__/expected_answer", f"/__grade__/{INVENTORY}"):
                async with http.post(base + path, json=payload, headers=header) as reply:
                    out.append((reply.status, await reply.json()))
    return out


def test_harness_only_graders_refuse_every_other_client(harness_only: ServerThread) -> None:
    # A run's server: only the harness, which holds the token, may grade. Page JavaScript and
    # the engine itself (loopback clients both) cannot even ask for a verdict.
    token = harness_only.server.context.grader_token
    assert token
    entry = _one_entry_per_mode(harness_only)["equals"]
    payload = {"task_id": entry.task_id, "answer": entry.expected}
    tries = [{}, {GRADER_TOKEN_HEADER: "guess"}, {GRADER_TOKEN_HEADER: token}]
    results = asyncio.run(_grade_with(harness_only.server.base_url or "", payload, tries))
    assert [status for status, _ in results[:4]] == [403, 403, 403, 403]
    assert all(body["checks"] == [] and not body["ok"] for _, body in results[:4])
    assert results[4] == (
        200,
        {
            "ok": True,
            "checks": [{"name": "answer_equals_expected", "status": "pass"}],
            "failure": None,
        },
    )
    assert results[5][0] == 400  # the inventory grader needs a seed: asked, not refused


def test_run_keeps_the_evidence_in_the_run_directory(tmp_path: Path) -> None:
    corpus = lexbench_or_skip()
    config = RunConfig(str(corpus), ("chrome",), seed="t", task_ids=(L2_TASK,), keep_going=True)
    messages: list[str] = []
    result = run_browser(config, tmp_path, "r", echo=messages.append)
    assert result.exit_code == 0, messages
    assert result.run_dir is not None
    (row,) = rows_of(result.run_dir)
    assert row["status"] == "pass", row
    evidence_file = f"artifacts/{row['key']}/grader_evidence.json"
    assert evidence_file in row["artifacts"]
    kept = json.loads((result.run_dir / evidence_file).read_text())
    expected = json.loads((corpus / "fixtures" / "expected_answers.json").read_text())[L2_TASK]
    (record,) = kept["records"]
    assert record["ok"] is True and record["task_id"] == L2_TASK
    assert repr(expected["expected"]) in record["checks"][0]["evidence"]
    assert kept["records_not_kept"] == 0
