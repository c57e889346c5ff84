"""The browser harness's event loop: uvloop by default, asyncio on request, a bad choice refused
before a run exists; and the loop carries what the harness puts on it (a pidfd wait, pipes)."""

from __future__ import annotations

import asyncio
import contextlib
import io
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
        reader = asyncio.StreamReader()
        transport, _ = await event_loop.connect_read_pipe(
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


class _ProbeReader(io.FileIO):
    """A pipe end that, when closed, first takes two fresh descriptors (the lowest free
    numbers: one its loop may just have freed) and checks after its own close that they are
    still open (MagicStack/uvloop#763's probe)."""

    stolen: bool | None = None

    def close(self) -> None:
        if self.closed:
            return
        fresh = os.pipe()
        # EBADF: the number was closed before; what matters is whose it is now
        with contextlib.suppress(OSError):
            super().close()
        try:
            for fd in fresh:
                os.fstat(fd)
            _ProbeReader.stolen = False
        except OSError:
            _ProbeReader.stolen = True
        finally:
            for fd in fresh:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("loop_name", event_loop.CHOICES)
def test_a_pipe_on_the_loop_is_closed_once_and_never_closes_another_descriptor(
    loop_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvloop closes a pipe's descriptor through libuv and then the file object's: a second
    close of a number another thread may hold by then (it closed the store's directory
    descriptor under the flusher's fsync in a CI run). Through ``event_loop``'s helpers the
    numbers handed out after the close stay open, data still flows both ways, and no
    descriptor is left open."""
    monkeypatch.setenv(event_loop.ENV_VARIABLE, loop_name)
    event_loop._choice.cache_clear()  # the choice is read once per process: read it again

    async def round_trip() -> bytes:
        read_fd, write_fd = os.pipe()
        reader = asyncio.StreamReader()
        read_end = _ProbeReader(read_fd, "rb")
        into, _ = await event_loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(write_fd, "wb", buffering=0)
        )
        out, _ = await event_loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), read_end
        )
        into.write(b"line\n")
        line = await asyncio.wait_for(reader.readline(), 10)
        into.close()
        out.close()
        await asyncio.sleep(0.05)  # the transports' close callbacks
        return line

    try:
        before = _open_fds()
        for _ in range(20):
            _ProbeReader.stolen = None
            assert event_loop.run(round_trip()) == b"line\n"
            assert _ProbeReader.stolen is False
        assert _open_fds() == before
    finally:
        event_loop._choice.cache_clear()
