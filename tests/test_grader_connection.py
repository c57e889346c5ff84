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
