"""The harness's connection to its fixture server's graders: one kept open across attempts
(``probes.grader_client``), one per grade without it; verdicts the same either way."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web

from metewand.suites.browser.fixtures import FixtureServer
from metewand.suites.browser.fixtures.context import FixtureContext
from metewand.suites.browser.fixtures.endpoints import default_endpoints
from metewand.suites.browser.fixtures.limits import HEAD_TIMEOUT_S
from metewand.suites.browser.probes import (
    GRADER_KEEPALIVE_S,
    grade_server_side,
    grader_client,
)

PORT_ENDPOINT = "/__grade__/peer_port"


async def _peer_port(request: web.Request, _ctx: FixtureContext) -> web.Response:
    """A verdict that names the client's port: which connection the grade came on."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return web.json_response({"ok": True, "checks": [], "port": peer[1] if peer else None})


def _server(root: Path) -> FixtureServer:
    endpoints = default_endpoints()
    endpoints.add(PORT_ENDPOINT, "POST", _peer_port, purpose="test: the grade's connection")
    (root / "index.html").write_text("<p>fixture</p>")
    return FixtureServer(root, endpoints=endpoints, harness_only_graders=True)


async def _ports(server: FixtureServer, grades: int, shared: bool) -> list[Any]:
    base = await server.start()
    token = server.context.grader_token
    http = grader_client() if shared else None
    try:
        ports = []
        for n in range(grades):
            verdict = await grade_server_side(base, PORT_ENDPOINT, {"n": n}, token, http)
            ports.append(verdict["port"])
        return ports
    finally:
        if http is not None:
            await http.close()
        await server.stop()


def test_a_kept_client_grades_every_attempt_on_one_connection(tmp_path: Path) -> None:
    ports = asyncio.run(_ports(_server(tmp_path), 4, shared=True))
    assert None not in ports and len(set(ports)) == 1, ports


def test_without_the_kept_client_each_grade_opens_its_own_connection(tmp_path: Path) -> None:
    ports = asyncio.run(_ports(_server(tmp_path), 4, shared=False))
    assert None not in ports and len(set(ports)) == 4, ports


def test_the_harness_drops_an_idle_grader_connection_before_the_server_does() -> None:
    # the server closes an idle connection after HEAD_TIMEOUT_S; a POST on a connection the
    # server is closing at that moment would fail and is not retried
    assert GRADER_KEEPALIVE_S <= HEAD_TIMEOUT_S / 2


def test_the_real_graders_answer_alike_on_a_kept_connection(tmp_path: Path) -> None:
    server = _server(tmp_path)

    async def grade(shared: bool) -> list[dict[str, Any]]:
        base = await server.start()
        token = server.context.grader_token
        http = grader_client() if shared else None
        try:
            return [
                await grade_server_side(
                    base,
                    "/__grade__/expected_answer",
                    {"task_id": task, "answer": "x"},
                    token,
                    http,
                )
                for task in ("no_such_task", "another_unknown_task")
            ]
        finally:
            if http is not None:
                await http.close()
            await server.stop()

    kept, fresh = asyncio.run(grade(True)), asyncio.run(grade(False))
    assert kept == fresh
    # no expected answer is registered for these ids: the grader says so, as infra
    assert all(v["ok"] is False and v["failure"]["class"] == "infra" for v in kept), kept


def test_in_process_grades_equal_the_served_ones_verdict_and_ledger_record() -> None:
    """The corpus's graders asked directly (``grade_in_process``) and over HTTP on a real
    server: the same verdict, the same record in the ledger, for right, wrong and unknown
    answers and the inventory grader."""
    import json

    from browser_fixture_helpers import corpus_or_skip
    from metewand.suites.browser.fixtures.endpoints.harness import INVENTORY_TASK, grade_in_process

    root = corpus_or_skip()
    server = FixtureServer(root, harness_only_graders=True)
    entries = sorted(server.answers.entries.items())[:20]
    payloads = [("/__grade__/expected_answer", {"task_id": "no_such_task", "answer": "x"})]
    for task_id, entry in entries:
        right = entry.expected if isinstance(entry.expected, str) else " ".join(entry.expected)
        for answer in (right, right + " but wrong", None):
            payloads.append(("/__grade__/expected_answer", {"task_id": task_id, "answer": answer}))
    payloads.append((f"/__grade__/{INVENTORY_TASK}", {"seed": "s1", "answer": "3"}))

    async def both() -> tuple[list[Any], list[Any]]:
        base = await server.start()
        ctx, token = server.context, server.context.grader_token
        served, direct = [], []
        try:
            for n, (endpoint, payload) in enumerate(payloads):
                for way, out in (("http", served), ("direct", direct)):
                    session = f"{way}-{n}"
                    ctx.grades.open(session)
                    sent = {**payload, "session": session}
                    if way == "http":
                        verdict = await grade_server_side(base, endpoint, sent, token)
                    else:
                        verdict = grade_in_process(ctx, endpoint, sent)
                    records, dropped = ctx.grades.take(session)
                    out.append((verdict, records, dropped))
        finally:
            await server.stop()
        return served, direct

    served, direct = asyncio.run(both())
    assert len(served) == len(payloads) > 40
    assert json.dumps(served, sort_keys=True) == json.dumps(direct, sort_keys=True)
    assert any(v["ok"] for v, _, _ in served) and not all(v["ok"] for v, _, _ in served)


def test_grader_access_asks_its_own_process_first_and_posts_what_it_cannot_answer(
    tmp_path: Path,
) -> None:
    import functools

    from metewand.suites.browser.fixtures.endpoints.harness import grade_in_process
    from metewand.suites.browser.probes import GraderAccess

    server = _server(tmp_path)

    async def grades() -> tuple[dict[str, Any], dict[str, Any]]:
        base = await server.start()
        ctx = server.context
        access = GraderAccess(ctx.grader_token, None, functools.partial(grade_in_process, ctx))
        try:
            known = await access.grade(base, "/__grade__/expected_answer", {"task_id": "t"})
            other = await access.grade(base, PORT_ENDPOINT, {"n": 1})  # no grader here: POST
        finally:
            await server.stop()
        return known, other

    known, other = asyncio.run(grades())
    assert known["ok"] is False and known["failure"]["class"] == "infra"  # no such answer
    assert isinstance(other["port"], int)  # answered over a connection
