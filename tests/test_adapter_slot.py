"""A slot's adapters in long-lived mode (``adapter_slot.SlotAdapters``): one served adapter per
driver path × engine process, kept across attempts, ended when its engine is relaunched and at
slot teardown; an adapter with no serve mode runs per attempt. Real served processes (the small
Python adapter of test_adapter_long_lived)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from metewand.suites.browser.adapter_server import LongLivedAdapter, PerAttemptAdapter
from metewand.suites.browser.adapter_slot import SlotAdapters
from metewand.suites.browser.driver_registry import DRIVER_PATHS, FoundDriver
from test_adapter_long_lived import alive, served_adapter


def _found(tmp_path: Path, serve: bool = True) -> FoundDriver:
    command = served_adapter(tmp_path)
    if not serve:
        command = dataclasses.replace(command, serve_argv=())
    return FoundDriver(DRIVER_PATHS["cdp_use"], command, "configured", "test")


async def _served_pid(runner: object, tmp_path: Path, n: int) -> int:
    assert isinstance(runner, LongLivedAdapter)
    run = await runner.run({"task_id": "ok"}, 20.0, tmp_path / f"stderr-{n}.txt")
    assert run.outcome == "result", run.detail
    return int(run.checks[0]["evidence"])


def test_one_served_adapter_per_engine_process_ended_on_relaunch_and_teardown(
    tmp_path: Path,
) -> None:
    found = _found(tmp_path)
    slot = SlotAdapters("long_lived", tmp_path / "logs")

    async def scenario() -> tuple[int, int, int]:
        first, mode = await slot.runner(found, "chrome", 1, 1000)
        assert mode == "long_lived"
        pid_a = await _served_pid(first, tmp_path, 1)
        again, _ = await slot.runner(found, "chrome", 1, 1000)
        assert again is first and await _served_pid(again, tmp_path, 2) == pid_a
        other_engine, _ = await slot.runner(found, "lightpanda", 1, 2000)
        assert other_engine is not first  # one per driver path x engine
        await other_engine.close()
        relaunched, _ = await slot.runner(found, "chrome", 2, 1001)  # the engine's next generation
        assert relaunched is not first
        assert not alive(pid_a)  # the adapter that knew the old engine is gone
        pid_b = await _served_pid(relaunched, tmp_path, 3)
        await slot.close_all()
        return pid_a, pid_b, slot.opened

    pid_a, pid_b, opened = asyncio.run(scenario())
    assert pid_a != pid_b and not alive(pid_b) and opened == 3
    assert (tmp_path / "logs" / "adapter-cdp_use-chrome-gen2.log").is_file()


def test_per_attempt_mode_and_adapters_without_a_serve_mode_run_per_attempt(
    tmp_path: Path,
) -> None:
    async def modes() -> list[tuple[type, str]]:
        out = []
        for mode, serve in (("per_attempt", True), ("long_lived", False)):
            runner, used = await SlotAdapters(mode, tmp_path).runner(
                _found(tmp_path, serve), "chrome", 1, 1000
            )
            out.append((type(runner), used))
        return out

    assert asyncio.run(modes()) == [(PerAttemptAdapter, "per_attempt")] * 2
