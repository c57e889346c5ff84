"""Engine registry, resolution, and EngineProcess against the real chromium and lightpanda."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import time
from pathlib import Path

import pytest
from aiohttp import web

from browser_engine_fixtures import REAL_ENGINES, resolved_or_skip
from metewand.suites.browser import proc_session
from metewand.suites.browser.cdp import CdpClient, new_page_target
from metewand.suites.browser.doctor import engine_report, observer_line
from metewand.suites.browser.engine_process import EngineLaunchError, EngineProcess
from metewand.suites.browser.engines import (
    ENGINES,
    Missing,
    ResolvedEngine,
    UnknownEngine,
    resolve,
)

pytestmark = pytest.mark.engines


def test_unknown_engine_names_the_registry() -> None:
    with pytest.raises(UnknownEngine) as caught:
        resolve("netscape")
    for name in ENGINES:
        assert name in str(caught.value)


@pytest.mark.parametrize("name", ["moli", "obscura"])
def test_unconfigured_engines_are_missing_with_reason(name: str) -> None:
    found = resolve(name, environ={})
    assert isinstance(found, Missing)
    assert found.reason == "engine_binary_missing"
    assert f"METEWAND_{name.upper()}_BIN" in found.detail


def test_configured_path_that_does_not_exist_is_missing_not_replaced(tmp_path: Path) -> None:
    found = resolve("chrome", configured_path=tmp_path / "no-such-chrome")
    assert isinstance(found, Missing) and found.reason == "engine_binary_missing"


def test_env_variable_configures_a_path(tmp_path: Path) -> None:
    binary = tmp_path / "obscura"
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    found = resolve("obscura", environ={"METEWAND_OBSCURA_BIN": str(binary)})
    assert isinstance(found, ResolvedEngine) and found.binary == binary
    argv = found.argv(4321)
    assert argv == [
        str(binary),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "4321",
        "--allow-private-network",
    ]


def test_lightpanda_resolves_to_the_real_binary_not_the_shim() -> None:
    found = resolved_or_skip("lightpanda")
    assert found.binary.read_bytes()[:4] == b"\x7fELF"
    assert found.binary.parent.name == "lightpanda"
    assert found.environment({"https_proxy": "http://x"}) == {
        "LIGHTPANDA_DISABLE_TELEMETRY": "true"
    }


def test_chrome_argv_is_hermetic_and_loopback_only(tmp_path: Path) -> None:
    found = resolved_or_skip("chrome")
    argv = found.argv(9999, tmp_path)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--remote-debugging-port=9999",
        "--remote-debugging-address=127.0.0.1",
        f"--user-data-dir={tmp_path}",
    ):
        assert flag in argv
    assert any(arg.startswith("--host-resolver-rules=MAP * ~NOTFOUND") for arg in argv)


@pytest.mark.parametrize("name", REAL_ENGINES)
def test_launch_ready_identity_and_teardown_leave_nothing(name: str, tmp_path: Path) -> None:
    process = EngineProcess(resolved_or_skip(name), tmp_path)

    async def scenario() -> None:
        await process.start()
        assert process.ready_ms is not None and 0 < process.ready_ms < 20_000
        assert process.ws_url is not None
        assert process.ws_url.startswith(f"ws://127.0.0.1:{process.port}/")
        identity = await process.identity()
        expected = hashlib.sha256(process.engine.binary.read_bytes()).hexdigest()
        assert identity.binary_sha256 == expected
        assert identity.version_output and not identity.version_output.startswith("<")
        assert identity.cdp_product and identity.json_version["webSocketDebuggerUrl"]
        session = process.pid
        assert session is not None and proc_session.session_members(session)
        user_data = process._user_data_dir
        report = await process.stop()
        assert report.clean and report.leftover_pids == []
        live = [m for m in proc_session.session_members(session) if m.state != "Z"]
        assert live == []
        if user_data is not None:
            assert not user_data.exists()

    asyncio.run(scenario())
    assert process.stderr_path.exists() and process.stdout_path.exists()


@pytest.mark.parametrize("name", REAL_ENGINES)
def test_relaunch_after_sigkill_of_the_engine(name: str, tmp_path: Path) -> None:
    process = EngineProcess(resolved_or_skip(name), tmp_path)

    async def scenario() -> None:
        await process.start()
        first_session, first_url = process.pid, process.ws_url
        assert first_session is not None
        os.kill(first_session, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while process.is_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert not process.is_alive()
        assert await process.ensure_running() is True
        assert process.generation == 2 and process.ws_url != first_url
        assert process.deaths[-1].signal_name == "SIGKILL"
        # helpers of the dead generation were killed too
        assert [m for m in proc_session.session_members(first_session) if m.state != "Z"] == []
        assert await process.ensure_running() is False
        async with await CdpClient.connect(str(process.ws_url)) as client:
            assert (await client.send("Browser.getVersion"))["product"]
        assert (await process.stop()).clean

    asyncio.run(scenario())


def test_preexec_hook_runs_in_the_child_before_exec(tmp_path: Path) -> None:
    process = EngineProcess(
        resolved_or_skip("lightpanda"), tmp_path, preexec_fn=lambda: os.nice(7) and None
    )

    async def scenario() -> None:
        await process.start()
        try:
            stat = Path(f"/proc/{process.pid}/stat").read_text()
            nice = int(stat[stat.rindex(")") + 2 :].split()[16])
            assert nice == min(19, os.nice(0) + 7)  # niceness is capped at 19
        finally:
            assert (await process.stop()).clean

    asyncio.run(scenario())


def test_engine_that_exits_early_reports_its_stderr(tmp_path: Path) -> None:
    script = tmp_path / "broken-engine"
    script.write_text("#!/bin/sh\necho 'cannot start: no GPU today' >&2\nexit 3\n")
    script.chmod(0o755)
    engine = resolve("moli", configured_path=script)
    assert isinstance(engine, ResolvedEngine)
    process = EngineProcess(engine, tmp_path / "logs")
    with pytest.raises(EngineLaunchError) as caught:
        asyncio.run(process.start())
    assert "no GPU today" in caught.value.detail
    assert "returncode=3" in str(caught.value)


def test_doctor_reports_found_and_missing_engines() -> None:
    resolved_or_skip("lightpanda")
    report = engine_report("lightpanda")
    assert report["found"] and report["ready"] and report["teardown_clean"]
    assert report["ready_ms"] > 0 and report["product"] and report["reason"] is None
    observer = report["observer"]  # timed scans of the live tree: a real, positive cost
    assert observer["processes"] >= 1 and observer["pss_scan_wall_ms_median"] > 0
    gates = observer["min_task_ms_for_gate"]
    assert gates["5%"] == pytest.approx(2 * gates["10%"], abs=1)
    assert observer_line(observer) is not None and observer_line(None) is None
    missing = engine_report("moli", configured_path="/nonexistent/moli")
    assert missing["found"] is False and missing["reason"] == "engine_binary_missing"


async def _serve_hello() -> tuple[web.AppRunner, int]:
    async def hello(_: web.Request) -> web.Response:
        return web.Response(text="hello", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port


def test_chrome_resolves_loopback_names_only(tmp_path: Path) -> None:
    process = EngineProcess(resolved_or_skip("chrome"), tmp_path)

    async def navigate(client: CdpClient, session: str, url: str) -> dict[str, object]:
        return await client.send("Page.navigate", {"url": url}, session_id=session)

    async def scenario() -> None:
        runner, port = await _serve_hello()
        await process.start()
        try:
            async with await CdpClient.connect(str(process.ws_url)) as client:
                page = await new_page_target(client)
                for host in ("127.0.0.1", "localhost"):
                    reply = await navigate(client, page.session_id, f"http://{host}:{port}/")
                    assert "errorText" not in reply, (host, reply)
                reply = await navigate(client, page.session_id, "http://example.com/")
                assert reply.get("errorText") == "net::ERR_NAME_NOT_RESOLVED"
        finally:
            await process.stop()
            await runner.cleanup()

    asyncio.run(scenario())


def test_chrome_windows_start_no_invisible_omnibox_webui(tmp_path: Path) -> None:
    # Chromium 156 renders its omnibox popup as a WebUI page in a renderer of its own per window
    # (the first one and one per browser context), ~1 s of CPU each that no headless user sees.
    process = EngineProcess(resolved_or_skip("chrome"), tmp_path)

    def webui_renderers(session: int) -> list[int]:
        found = []
        for member in proc_session.session_members(session):
            try:  # Chromium rewrites a child's argv into one space-joined string
                argv = Path(f"/proc/{member.pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b" --top-chrome-webui " in argv.replace(b"\0", b" "):
                found.append(member.pid)
        return found

    async def scenario() -> None:
        await process.start()
        try:
            async with await CdpClient.connect(str(process.ws_url)) as client:
                context = await client.send("Target.createBrowserContext")
                await client.send(
                    "Target.createTarget",
                    {"url": "about:blank", "browserContextId": context["browserContextId"]},
                )
                await asyncio.sleep(1.0)  # the popup WebUI appears within ~0.3 s when on
                targets = (await client.send("Target.getTargets"))["targetInfos"]
                session = process.pid
                assert session is not None
                assert webui_renderers(session) == []
        finally:
            await process.stop()
        ui = [t["url"] for t in targets if t["type"] != "page"]
        assert not [url for url in ui if url.startswith("chrome://omnibox-popup")], ui
        assert sum(t["type"] == "page" for t in targets) == 2, targets

    asyncio.run(scenario())
