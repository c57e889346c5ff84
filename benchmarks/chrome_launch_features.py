"""What Chrome's launch line costs the engine under test: the registry's argv against the same argv
without its ``--disable-features`` (the invisible WebUI omnibox popups), launches alternating.

    .venv/bin/python benchmarks/chrome_launch_features.py [--rounds 8] [--settle-s 2.5]

Per launch: time until ``/json/version`` answers, the CPU of the engine's whole session
``--settle-s`` after it was started (its launch, nothing asked of it), then the CPU a new browser
context with one about:blank page adds in the 1.5 s after it (what a driver path's attempt opens).
CPU is read from /proc/PID/stat of every process of the engine's session, so it includes
renderers that start and stay. Prints medians and ranges per variant and the ratios
registry/without, measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from metewand.measure import procfs
from metewand.suites.browser import proc_session
from metewand.suites.browser.cdp import CdpClient
from metewand.suites.browser.engine_process import free_loopback_port
from metewand.suites.browser.engines import Missing, ResolvedEngine, resolve

CONTEXT_WINDOW_S = 1.5


def session_cpu_ms(session: int) -> float:
    members = proc_session.session_members(session)
    return procfs.ticks_to_ns(sum(m.utime_ticks + m.stime_ticks for m in members)) / 1e6


async def _json_version(port: int) -> dict:
    async with aiohttp.ClientSession() as http:
        while True:
            try:
                reply = await http.get(f"http://127.0.0.1:{port}/json/version")
                return dict(await reply.json())
            except (aiohttp.ClientError, OSError):
                await asyncio.sleep(0.02)


async def one_launch(
    engine: ResolvedEngine, registry_flags: bool, settle_s: float
) -> tuple[float, float, float]:
    folder = tempfile.mkdtemp(prefix="mw-chrome-features-")
    port = free_loopback_port()
    argv = engine.argv(port, Path(folder))
    if not registry_flags:
        argv = [arg for arg in argv if not arg.startswith("--disable-features=")]
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
        env=engine.environment(),
    )
    started = time.monotonic()
    try:
        version = await asyncio.wait_for(_json_version(port), 30)
        ready_ms = (time.monotonic() - started) * 1000
        await asyncio.sleep(max(0.0, settle_s - (time.monotonic() - started)))
        launch_ms = session_cpu_ms(process.pid)
        async with await CdpClient.connect(version["webSocketDebuggerUrl"]) as client:
            context = await client.send("Target.createBrowserContext")
            params = {"url": "about:blank", "browserContextId": context["browserContextId"]}
            await client.send("Target.createTarget", params)
            await asyncio.sleep(CONTEXT_WINDOW_S)
            context_ms = session_cpu_ms(process.pid) - launch_ms
    finally:
        os.killpg(process.pid, 9)
        await process.wait()
        shutil.rmtree(folder, ignore_errors=True)
    return ready_ms, launch_ms, context_ms


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ms [{min(values):.0f}-{max(values):.0f}]"


async def main(rounds: int, settle_s: float) -> None:
    engine = resolve("chrome")
    if isinstance(engine, Missing):
        raise SystemExit(f"chrome is not installed: {engine.detail}")
    flags = [arg for arg in engine.argv(0) if arg.startswith("--disable-features=")]
    print(f"chrome {engine.binary}; the registry's {flags or 'argv has no --disable-features'}")
    results: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    for index in range(rounds):
        for registry in (True, False) if index % 2 else (False, True):
            results[registry].append(await one_launch(engine, registry, settle_s))
    medians = {}
    for registry, rows in results.items():
        ready, launch, context = (list(column) for column in zip(*rows, strict=True))
        name = "registry argv" if registry else "without it   "
        print(
            f"{name}: ready {_summary(ready)}; session CPU {settle_s:g} s after launch "
            f"{_summary(launch)}; a new context + page adds {_summary(context)} in "
            f"{CONTEXT_WINDOW_S:g} s (n={len(rows)})"
        )
        medians[registry] = [statistics.median(ready), statistics.median(launch)]
        medians[registry].append(statistics.median(context))
    ratios = [a / b for a, b in zip(medians[True], medians[False], strict=True)]
    print(
        "ratio registry/without (medians): ready {:.2f}, launch CPU {:.2f}, context CPU {:.2f}".format(
            *ratios
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--settle-s", type=float, default=2.5)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.settle_s))
