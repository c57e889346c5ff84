"""What the engine's health check after an adapter attempt is told: an adapter's ``ok`` result is
evidence the engine answered just now (as the raw-CDP path's closing reply is), so the endpoint
is not asked again; any other ending asks it, and one without a result as a suspect."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from browser_engine_fixtures import running_engine
from metewand.suites.browser.adapter_attempt import _engine_after
from metewand.suites.browser.adapters import AdapterRun, parse_result

ENDINGS = {
    "ok": b'{"ok": true, "observations": {"checks": [{"name": "a", "status": "pass"}]}}\n',
    "ok_with_a_failed_check": (
        b'{"ok": true, "observations": {"checks": [{"name": "a", "status": "fail"}]}}\n'
    ),
    "harness_error": b'{"ok": false, "error": {"class": "cdp_timeout", "message": "m"}}\n',
    "garbage": b"not json\n",
}


def _run(stdout: bytes) -> AdapterRun:
    outcome, result, detail = parse_result(stdout)
    return AdapterRun(outcome, detail, result, 0, None, 1, "", [])


def _asked(run: AdapterRun, ended_ns: int) -> tuple[object, ...]:
    calls: list[tuple[object, ...]] = []

    async def health(*args: object) -> str:
        calls.append(args)
        return "ok"

    assert asyncio.run(_engine_after(health, run, ended_ns)) == "ok"
    assert len(calls) == 1
    return calls[0]


@pytest.mark.parametrize("ending", ["ok", "ok_with_a_failed_check"])
def test_an_ok_result_is_the_evidence_of_a_fresh_answer(ending: str) -> None:
    ended = time.monotonic_ns()
    assert _asked(_run(ENDINGS[ending]), ended) == (False, ended)


@pytest.mark.parametrize("ending", ["harness_error", "garbage"])
def test_any_other_ending_asks_the_endpoint(ending: str) -> None:
    run = _run(ENDINGS[ending])
    # a result that is not ok: not suspect, but asked; no result at all: asked as a suspect
    assert _asked(run, time.monotonic_ns()) == (run.outcome != "result",)


def test_the_evidence_spares_the_question_never_the_liveness_check(tmp_path: Path) -> None:
    """On a real Lightpanda: stopped (alive, its endpoint silent), an ok adapter's evidence makes
    it ``ok`` at once, without the question that would have waited out the health limit; killed,
    the same evidence still finds it ``exited``."""
    for engine in running_engine("lightpanda", tmp_path / "logs"):
        assert engine.pid is not None
        os.kill(engine.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            assert asyncio.run(engine.health(False, time.monotonic_ns())) == "ok"
            assert time.monotonic() - started < 0.5
        finally:
            os.kill(engine.pid, signal.SIGCONT)
        os.kill(engine.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while engine.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert asyncio.run(engine.health(False, time.monotonic_ns())) == "exited"
