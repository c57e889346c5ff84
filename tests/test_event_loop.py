"""The browser harness's event loop: uvloop by default, asyncio on request, a bad choice refused
before a run exists; and the loop carries what the harness puts on it (a pidfd wait, pipes)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metewand.measure.process import Process
from metewand.suites.browser import event_loop

REPO = Path(__file__).resolve().parents[1]


def _describe(value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != event_loop.ENV_VARIABLE}
    if value is not None:
        env[event_loop.ENV_VARIABLE] = value
    code = (
        "import asyncio, json; from metewand.suites.browser import event_loop as e\n"
        "loop = e.new_event_loop()\n"
        "print(json.dumps([e.describe(), type(loop).__module__])); loop.close()"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("value", "described", "module"),
    [
        (None, "uvloop ", "uvloop"),
        ("", "uvloop ", "uvloop"),
        ("asyncio", "asyncio (chosen by METEWAND_EVENT_LOOP)", "asyncio.unix_events"),
    ],
)
def test_the_loop_is_chosen_and_named(value: str | None, described: str, module: str) -> None:
    done = _describe(value)
    assert done.returncode == 0, done.stderr
    said, made = json.loads(done.stdout)
    assert said.startswith(described) and made == module


def test_an_unknown_loop_is_refused_before_the_run_exists(tmp_path: Path) -> None:
    env = {**os.environ, event_loop.ENV_VARIABLE: "trio"}
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "browser", "run", "--engines", "lightpanda"]
        + ["--task", "own_slow_page", "--out", str(tmp_path / "runs"), "--no-progress"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "METEWAND_EVENT_LOOP='trio': expected one of uvloop, asyncio" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_the_default_loop_waits_on_a_pidfd_and_reads_a_pipe() -> None:
    """What the slots put on the loop: a process's exit heard through its pidfd, and a pipe
    read as a stream (a served adapter's result line)."""

    async def child_line() -> tuple[bytes, bool, int | None]:
        process = Process.start(
            ["sh", "-c", "echo result; sleep 0.2"], stdout=subprocess.PIPE, stdin=None
        )
        assert process.popen.stdout is not None
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), process.popen.stdout
        )
        line = await asyncio.wait_for(reader.readline(), 10)
        exited = await process.wait_exited_async(10.0)
        transport.close()
        code = process.popen.wait(5)  # exited: reaping does not block
        process.close()
        return line, exited, code

    assert event_loop.describe().startswith("uvloop ")
    assert event_loop.run(child_line()) == (b"result\n", True, 0)
