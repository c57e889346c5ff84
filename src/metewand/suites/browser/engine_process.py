"""One running engine: launch, CDP readiness, identity, relaunch, and teardown with no leftovers.

The engine is started with ``measure.process.Process`` (in its own session, so its whole tree
can be signalled as one process group) rather than an asyncio subprocess: an engine is reused
across attempts and may outlive the event loop that launched it (``doctor`` runs its own loop).
The waits (readiness, health, teardown) are async and never block the loop; the engine's exit
wakes them through its pidfd (no looking every few ms), and a watcher thread stamps the moment
it was seen (``exit_seen_ns``).

Readiness: ``GET http://127.0.0.1:P/json/version`` polled every ``READY_POLL_S`` until it returns
a JSON object with ``webSocketDebuggerUrl``. Chrome and lightpanda both serve it; lightpanda's
body names ``Browser: Lightpanda/1.0`` plus ``Lightpanda-Version`` while its CDP
``Browser.getVersion`` product is Chrome-like, so identity records both.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import aiohttp

from metewand.errors import MetewandError
from metewand.measure import gate, watchdog
from metewand.measure.accounting import TreeAccounting
from metewand.measure.process import Process
from metewand.suites.browser import private_dirs, proc_session
from metewand.suites.browser.binary_identity import binary_sha256, version_output
from metewand.suites.browser.cdp import CdpClient, CdpError, CdpTimeout
from metewand.suites.browser.engines import LOOPBACK, ResolvedEngine
from metewand.suites.browser.leftovers import RUN_MARKER_VAR

READY_POLL_S: Final = 0.025
HTTP_PROBE_TIMEOUT_S: Final = 1.0
TERM_GRACE_S: Final = 5.0
KILL_GRACE_S: Final = 5.0
STDERR_TAIL_BYTES: Final = 2000
PORT_RETRIES: Final = 3
# Health: an engine is healthy when its process lives AND its CDP endpoint answers
# /json/version with this generation's WebSocket URL. ``Popen.poll()`` alone is not enough:
# Chromium told ``Browser.close`` stops answering ~70 ms later but exits only ~280 ms later, so
# an attempt handed such an engine fails in a millisecond for a crash it did not cause.
HEALTH_LIMIT_S: Final = 5.0  # no answer for this long: unresponsive
HEALTH_POLL_S: Final = 0.05
# The engine pool hands an engine to the next attempt on the previous attempt's closing health
# verdict when it is this fresh and the process still lives (its pidfd says so); older, it asks
# again. One /json/version question per attempt instead of two: Chromium answers it on its
# browser thread, 5-15 ms of wall on a loaded host.
HEALTH_FRESH_S: Final = 1.0  # see docs/DESIGN.md, "health between attempts"
# A suspect engine (it dropped the attempt's CDP connection) must keep answering this long.
SUSPECT_GRACE_S: Final = 1.0

PreexecFn = Callable[[], None]
OnSpawn = Callable[["EngineProcess"], None]


class EngineLaunchError(MetewandError, RuntimeError):
    """The engine exited or never became ready; ``detail`` holds the stderr tail."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(f"{message}\n{detail}" if detail else message)
        self.detail = detail


@dataclass(frozen=True)
class ExitInfo:
    returncode: int | None
    signal_name: str | None
    # Set when metewand ended the generation itself (e.g. "unresponsive"), not the engine.
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"returncode": self.returncode, "signal": self.signal_name}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass
class TeardownReport:
    """What ``stop`` found: ``leftover_pids`` must be empty (zombies are listed apart: only
    their parent can reap them)."""

    exit: ExitInfo | None
    sigkill_needed: bool
    stragglers_killed: list[int]
    leftover_pids: list[int]
    zombie_pids: list[int]

    @property
    def clean(self) -> bool:
        return not self.leftover_pids


@dataclass
class EngineIdentity:
    """Identity of one engine process (one generation)."""

    engine: str
    binary_path: str
    binary_sha256: str
    version_output: str
    found_by: str
    argv: list[str]
    json_version: dict[str, Any]
    cdp_product: str | None
    cdp_version: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "binary_path": self.binary_path,
            "binary_sha256": self.binary_sha256,
            "version_output": self.version_output,
            "found_by": self.found_by,
            "argv": self.argv,
            "json_version": self.json_version,
            "cdp_product": self.cdp_product,
            "cdp_version": self.cdp_version,
        }


def free_loopback_port() -> int:
    """An ephemeral port free right now on 127.0.0.1 (the engine may still lose a race for it;
    ``start`` retries on a new port when the engine exits before ready)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


class EngineProcess:
    """A relaunchable engine. ``await start()``, then ``ws_url``; ``await stop()`` at the end."""

    def __init__(
        self,
        engine: ResolvedEngine,
        log_dir: Path,
        preexec_fn: PreexecFn | None = None,
        ready_timeout_s: float | None = None,
        on_spawn: OnSpawn | None = None,
        accounting: TreeAccounting | None = None,
    ) -> None:
        self.engine = engine
        self.log_dir = Path(log_dir)
        self.preexec_fn = preexec_fn
        # ``accounting``: the groups every launch joins before exec, through ``measure.gate``
        # where it has cgroups (a preexec_fn forks all of metewand, inside ``ready_ms``)
        self.accounting = accounting
        # Called right after the process exists, before the readiness wait: a runner killed
        # while an engine starts up must already have recorded it (see ``leftovers``).
        self.on_spawn = on_spawn
        self.ready_timeout_s = ready_timeout_s or engine.spec.ready_timeout_s
        self.generation = 0
        # One id per launched generation, unique across runs and resumed sessions (where
        # generations count from 1 again and a pid can come back): which process ran a row.
        self.launch_id: str | None = None
        self.port: int | None = None
        self.ws_url: str | None = None
        self.json_version: dict[str, Any] = {}
        self.ready_ms: float | None = None
        self.argv: list[str] = []
        self.deaths: list[ExitInfo] = []
        self._process: Process | None = None
        self._private_root: Path | None = None
        self._user_data_dir: Path | None = None
        self._logs: list[IO[bytes]] = []
        self._cdp_version: dict[str, Any] | None = None
        self._answered_ns: int | None = None  # when health last found this generation answering

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def exit_seen_ns(self) -> int | None:
        """When this generation's exit was seen (monotonic ns), None while it runs."""
        return self._process.exit_seen_ns if self._process is not None else None

    @property
    def stderr_path(self) -> Path:
        return self.log_dir / f"{self.engine.name}-{self.generation}.stderr.log"

    @property
    def stdout_path(self) -> Path:
        return self.log_dir / f"{self.engine.name}-{self.generation}.stdout.log"

    @property
    def private_dirs(self) -> list[str]:
        """This generation's private root (user-data dir and TMPDIR inside), for the pid record."""
        return [str(self._private_root)] if self._private_root is not None else []

    def is_alive(self) -> bool:
        return self._process is not None and not self._process.has_exited()

    def answered_within(self, seconds: float) -> bool:
        """Alive, and ``health`` found it answering with this generation's URL that recently
        (the engine pool's pre-attempt check takes the previous attempt's closing verdict)."""
        answered = self._answered_ns
        return (
            answered is not None
            and time.monotonic_ns() - answered <= seconds * 1e9
            and self.is_alive()
        )

    def exit_info(self) -> ExitInfo | None:
        if self._process is None:
            return None
        code = self._process.returncode
        return None if code is None else _exit_info(code)

    async def wait_exited(self, timeout: float | None) -> bool:
        """Wait until this generation exits (True) or ``timeout`` passes; woken by the kernel."""
        if self._process is None:
            return True
        return await self._process.wait_exited_async(timeout)

    async def start(self) -> None:
        """Launch a new generation and wait until its CDP endpoint is ready."""
        if self.is_alive():
            raise RuntimeError(f"{self.engine.name} is already running (pid {self.pid})")
        last_error: EngineLaunchError | None = None
        for _ in range(PORT_RETRIES):
            try:
                await self._launch_once()
                return
            except EngineLaunchError as exc:
                last_error = exc
                await self.stop()
                if not _lost_port_race(exc):
                    raise
        assert last_error is not None
        raise last_error

    async def ensure_running(self) -> bool:
        """Relaunch after death; returns True when a new generation was started."""
        if self.is_alive():
            return False
        info = self.exit_info()
        if info is not None:
            self.deaths.append(info)
        await self.stop()
        await self.start()
        return True

    async def relaunch(self, health: str) -> None:
        """End this generation, recording why (``exited`` or ``unresponsive``), start the next."""
        info = self.exit_info()
        if info is None:  # alive but not answering: metewand ends it
            info = ExitInfo(None, None, health)
        self.deaths.append(info)
        await self.stop()
        await self.start()

    async def health(self, suspect: bool = False, answered_ns: int | None = None) -> str:
        """``ok``, ``exited`` or ``unresponsive`` (alive, CDP endpoint silent for
        ``HEALTH_LIMIT_S``). A ``suspect`` engine must also stay alive and answering for
        ``SUSPECT_GRACE_S``: one shutting down still answers for a few tens of ms.
        ``answered_ns``: when this generation's CDP endpoint last answered the caller (an
        attempt's closing command); within ``HEALTH_FRESH_S`` and with the process alive, a
        non-suspect engine is ``ok`` on that evidence, without asking /json/version again."""
        if self.port is None or self.ws_url is None:
            return "exited" if self.generation else "ok"
        fresh = (
            answered_ns is not None and time.monotonic_ns() - answered_ns <= HEALTH_FRESH_S * 1e9
        )
        if not suspect and fresh and self.is_alive():
            assert answered_ns is not None
            self._answered_ns = max(answered_ns, self._answered_ns or 0)
            return "ok"
        started = time.monotonic()
        while True:
            if not self.is_alive():
                return "exited"
            body = await _quick_json_version(self.port, HTTP_PROBE_TIMEOUT_S)
            answered = body is not None and body.get("webSocketDebuggerUrl") == self.ws_url
            waited = time.monotonic() - started
            if answered and (not suspect or waited >= SUSPECT_GRACE_S):
                if not self.is_alive():
                    return "exited"
                self._answered_ns = time.monotonic_ns()
                return "ok"
            if not answered and waited >= HEALTH_LIMIT_S:
                return "unresponsive"
            await self.wait_exited(HEALTH_POLL_S)  # a death ends the pause at once

    async def _launch_once(self) -> None:
        self._answered_ns = None
        self.generation += 1
        self.launch_id = uuid.uuid4().hex
        self.port = free_loopback_port()
        self.ws_url = None
        self._cdp_version = None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        owner = self.engine.spec.env.get(RUN_MARKER_VAR, "")
        self._private_root = root = private_dirs.make_root(self.engine.name, owner)
        watchdog.guard_dir(str(root))  # a kill -9 of this process leaves no profile behind
        if self.engine.spec.uses_user_data_dir:
            self._user_data_dir = root / private_dirs.PROFILE_DIR
            self._user_data_dir.mkdir()
        self.argv = self.engine.argv(self.port, self._user_data_dir)
        stdout = open(self.stdout_path, "wb")  # noqa: SIM115 - closed in stop()
        stderr = open(self.stderr_path, "wb")  # noqa: SIM115
        self._logs = [stdout, stderr]
        env = self.engine.environment(tmp_dir=root / private_dirs.TMP_DIR)
        started = time.perf_counter()
        self._process = self._spawn(env, root, stdout, stderr)
        if self.on_spawn is not None:
            self.on_spawn(self)
        self.json_version = await self._wait_ready(started)
        self.ws_url = str(self.json_version["webSocketDebuggerUrl"])
        self.ready_ms = (time.perf_counter() - started) * 1000.0

    def _spawn(
        self, env: dict[str, str], root: Path, stdout: IO[bytes], stderr: IO[bytes]
    ) -> Process:
        accounting = self.accounting
        streams: dict[str, Any] = {"stdout": stdout, "stderr": stderr, "watch": True}
        if accounting is not None and gate.can_join(accounting):
            return gate.start_joined(self.argv, accounting, env=env, cwd=root, **streams)
        join = self.preexec_fn
        if join is None and accounting is not None:
            join = accounting.preexec_join()
        return Process.start(self.argv, env=env, cwd=root, join=join, **streams)

    async def _wait_ready(self, started: float) -> dict[str, Any]:
        url = f"http://{LOOPBACK}:{self.port}/json/version"
        deadline = started + self.ready_timeout_s
        probe_timeout = aiohttp.ClientTimeout(total=HTTP_PROBE_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=probe_timeout) as http:
            while time.perf_counter() < deadline:
                if not self.is_alive():
                    raise EngineLaunchError(
                        f"{self.engine.name} exited before ready ({self.exit_info()})",
                        self.stderr_tail(),
                    )
                body = await _probe_json_version(http, url)
                if body is not None:
                    return body
                await self.wait_exited(READY_POLL_S)  # an exit ends the pause at once
        raise EngineLaunchError(
            f"{self.engine.name}: no webSocketDebuggerUrl at {url} within "
            f"{self.ready_timeout_s:g} s",
            self.stderr_tail(),
        )

    def stderr_tail(self) -> str:
        try:
            data = self.stderr_path.read_bytes()
        except OSError:
            return ""
        return data[-STDERR_TAIL_BYTES:].decode("utf-8", errors="replace")

    async def cdp_version(self, timeout: float = 10.0) -> dict[str, Any]:
        """``Browser.getVersion`` over CDP, once per generation (it can differ from the HTTP
        identity: lightpanda answers with a Chrome-like product)."""
        if self._cdp_version is None:
            if self.ws_url is None:
                raise RuntimeError(f"{self.engine.name} is not running")
            async with await CdpClient.connect(self.ws_url, timeout=timeout) as client:
                try:
                    self._cdp_version = await client.send("Browser.getVersion", timeout=timeout)
                except (CdpError, CdpTimeout):
                    self._cdp_version = {}
        return self._cdp_version

    async def identity(self) -> EngineIdentity:
        version = await self.cdp_version()
        product = version.get("product")
        return EngineIdentity(
            engine=self.engine.name,
            binary_path=str(self.engine.binary),
            binary_sha256=await asyncio.to_thread(binary_sha256, self.engine.binary),
            version_output=await asyncio.to_thread(
                version_output, self.engine.binary, self.engine.spec.version_argv
            ),
            found_by=self.engine.found_by,
            argv=list(self.argv),
            json_version=dict(self.json_version),
            cdp_product=str(product) if product is not None else None,
            cdp_version=dict(version),
        )

    async def stop(self) -> TeardownReport:
        """Terminate the whole session (TERM, grace, KILL), kill stragglers found by a /proc
        walk, verify nothing is left, remove the private root (user-data dir, TMPDIR) and close
        the logs."""
        report = TeardownReport(None, False, [], [], [])
        if self._process is not None:
            report = await _terminate_session(self._process)
        self._process = None
        self.ws_url = None
        for log in self._logs:
            log.close()
        self._logs = []
        if self._private_root is not None:
            shutil.rmtree(self._private_root, ignore_errors=True)
            watchdog.release_dir(str(self._private_root))
            self._private_root = self._user_data_dir = None
        return report


async def _probe_json_version(http: aiohttp.ClientSession, url: str) -> dict[str, Any] | None:
    try:
        async with http.get(url, proxy=None) as response:
            if response.status != 200:
                return None
            body = await response.json(content_type=None)
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
        return None
    if isinstance(body, dict) and body.get("webSocketDebuggerUrl"):
        return body
    return None


async def _quick_json_version(port: int, timeout_s: float) -> dict[str, Any] | None:
    """``GET /json/version`` on one plain loopback connection: what the health check asks twice
    an attempt. An aiohttp session per question cost ~2 ms of harness CPU each (a connector, a
    session, their teardown); this costs a connect, a write and a read. A body not framed by
    Content-Length (chunked) is asked again through aiohttp."""
    head_end = b"\r\n\r\n"
    request = (
        f"GET /json/version HTTP/1.1\r\nHost: {LOOPBACK}:{port}\r\n"
        "Connection: close\r\nAccept: application/json\r\n\r\n"
    ).encode()
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(LOOPBACK, port)
            try:
                writer.write(request)
                head = (await reader.readuntil(head_end)).decode("latin-1").lower().split("\r\n")
                length = next(
                    (int(h.split(":", 1)[1]) for h in head if h.startswith("content-length:")), None
                )
                if length is None:
                    return await _slow_json_version(port, timeout_s)
                if head[0].split()[1:2] != ["200"]:
                    return None
                body = json.loads(await reader.readexactly(length))
            finally:
                writer.close()
    except (
        OSError,
        TimeoutError,
        ValueError,
        IndexError,
        asyncio.IncompleteReadError,
        asyncio.LimitOverrunError,
    ):
        return None
    return body if isinstance(body, dict) and body.get("webSocketDebuggerUrl") else None


async def _slow_json_version(port: int, timeout_s: float) -> dict[str, Any] | None:
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        return await _probe_json_version(http, f"http://{LOOPBACK}:{port}/json/version")


async def _terminate_session(process: Process) -> TeardownReport:
    """The one stop escalation (TERM, grace, KILL to the group; the reap KILLs what is left in
    it), then the session sweep: helpers re-parented away keep the session id."""
    session = process.pid  # the engine leads its own session and group
    ending = await process.terminate_async(TERM_GRACE_S, KILL_GRACE_S)
    stragglers, leftover, zombies = await proc_session.sweep_session(session, KILL_GRACE_S)
    process.close()
    exit_info = _exit_info(ending.returncode) if ending.returncode is not None else None
    return TeardownReport(exit_info, ending.kill_needed, stragglers, leftover, zombies)


def _exit_info(returncode: int) -> ExitInfo:
    if returncode < 0:
        return ExitInfo(returncode, signal.Signals(-returncode).name)
    return ExitInfo(returncode, None)


def _lost_port_race(exc: EngineLaunchError) -> bool:
    text = exc.detail.lower()
    return "address already in use" in text or "addressinuse" in text or "eaddrinuse" in text
