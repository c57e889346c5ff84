"""Adapter start-up per driver path on Chrome, and attempts per minute on one real task.

    .venv/bin/python benchmarks/adapter_startup.py [--tasks DIR] [--reps N] [--drivers a,b]

One real Chromium (engine registry flags) and the fixture server on the peer corpus serve every
measurement, taken in the same run:

- baseline = in-process raw CDP: metewand's own ``CdpClient`` connects to the browser websocket,
  sends ``Browser.getVersion`` and closes (the engine work every adapter's start-up contains);
- start-to-ready = the wall time of an *empty* attempt through ``run_adapter`` (payload with no
  steps or checks): process start, interpreter and client-library load, the ``/json/version``
  gate, the driver's connect, the live ``Browser.getVersion`` gate, disconnect, exit. It is an
  upper bound on readiness (it includes the disconnect and exit);
- task attempt = the wall time of ``sc_app_full_flow_aggregate`` (login, add, checkout: present in
  every shipped driver's subset); attempts/min = 60 / its median;
- start-up share = start-to-ready / task attempt (the issue's threshold for a long-lived adapter
  is 0.5).

Medians over ``--reps`` (default 7) interleaved rounds, so host drift hits every driver alike.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from metewand.suites.browser.adapter_payload import AttemptIds, EngineEndpoint, build_payload
from metewand.suites.browser.adapters import run_adapter
from metewand.suites.browser.cdp import CdpClient
from metewand.suites.browser.driver_registry import DriverMissing, FoundDriver, resolve_driver
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.engines import Missing, resolve
from metewand.suites.browser.fixtures import FixtureServer

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus" / "lexbench"
SCENARIO = "sc_app_full_flow_aggregate"
SUBSETS = {
    "playwright": ("L1/playwright", "pw"),
    "puppeteer": ("L1/puppeteer", "pp"),
    "chrome_remote_interface": ("L1/chrome_remote_interface", "cri"),
    "chrome_devtools_mcp": ("L1/chrome_devtools_mcp", "mcp"),
    "cdp_use": ("L1/cdp_use", "cdpu"),
    "pydoll": ("L1/pydoll", "pyd"),
    "selenium": ("L1/selenium", "se"),
}


def load_task(corpus: Path, key: str) -> dict[str, Any]:
    import json

    subset, suffix = SUBSETS[key]
    return dict(json.loads((corpus / "tasks" / subset / f"{SCENARIO}__{suffix}.json").read_text()))


async def baseline_ms(ws_url: str) -> float:
    started = time.perf_counter()
    async with await CdpClient.connect(ws_url, timeout=10) as client:
        await client.send("Browser.getVersion", timeout=10)
    return (time.perf_counter() - started) * 1000


async def attempt_ms(
    found: FoundDriver,
    task: dict[str, Any],
    endpoint: EngineEndpoint,
    base: str,
    work: Path,
    n: int,
) -> tuple[float, bool]:
    artifact_dir = work / f"{found.path.key}-{task['task_id']}-{n}"
    ids = AttemptIds("bench", n, "bench", str(artifact_dir))
    payload = build_payload(task, found.path.key, endpoint, base, ids)
    run = await run_adapter(found.command, payload, 40.0, artifact_dir / "stderr.txt")
    passed = run.classification().status == "pass"
    return run.wall_ns / 1e6, passed


async def measure(corpus: Path, keys: list[str], reps: int, work: Path) -> None:
    engine_found = resolve("chrome")
    if isinstance(engine_found, Missing):
        raise SystemExit(f"chrome not installed: {engine_found.detail}")
    engine = EngineProcess(engine_found, work / "engine")
    server = FixtureServer(corpus / "fixtures")
    await engine.start()
    base = await server.start()
    try:
        assert engine.ws_url is not None and engine.port is not None
        version = await engine.cdp_version()
        endpoint = EngineEndpoint(
            "chrome", engine.ws_url, engine.port, str(engine.json_version["Browser"]),
            str(engine.json_version.get("User-Agent", "")), str(version.get("product", "")),
        )  # fmt: skip
        drivers: dict[str, FoundDriver] = {}
        for key in keys:
            found = resolve_driver(key)
            if isinstance(found, DriverMissing):
                print(f"{key}: skipped ({found.reason}: {found.detail})")
            else:
                drivers[key] = found
        empty = {"task_id": "empty", "driver": {"kind": "none", "steps": [], "checks": []},
                 "scene": {"kind": "self_hosted_fixture", "url": "/l1/core"}}  # fmt: skip
        tasks = {key: load_task(corpus, key) for key in drivers}
        base_runs: list[float] = []
        ready: dict[str, list[float]] = {k: [] for k in drivers}
        full: dict[str, list[float]] = {k: [] for k in drivers}
        failures: dict[str, int] = {k: 0 for k in drivers}
        for n in range(reps):
            base_runs.append(await baseline_ms(endpoint.browser_ws))
            for key, found in drivers.items():
                ready[key].append((await attempt_ms(found, empty, endpoint, base, work, n))[0])
                wall, passed = await attempt_ms(found, tasks[key], endpoint, base, work, n)
                full[key].append(wall)
                failures[key] += 0 if passed else 1
        report(base_runs, ready, full, failures, drivers)
    finally:
        await server.stop()
        await engine.stop()


def report(
    base_runs: list[float],
    ready: dict[str, list[float]],
    full: dict[str, list[float]],
    failures: dict[str, int],
    drivers: dict[str, FoundDriver],
) -> None:
    baseline = statistics.median(base_runs)
    print(f"baseline (in-process raw CDP connect + Browser.getVersion): median {baseline:.1f} ms")
    header = (f"{'driver':<24} {'version':<9} {'ready ms':>9} {'x base':>7} {'task ms':>8} "
              f"{'att/min':>8} {'share':>6} {'fails':>5}")  # fmt: skip
    print(header)
    for key, found in drivers.items():
        r, t = statistics.median(ready[key]), statistics.median(full[key])
        print(f"{key:<24} {found.version:<9} {r:>9.0f} {r / baseline:>7.1f} {t:>8.0f} "
              f"{60000 / t:>8.1f} {r / t:>6.2f} {failures[key]:>5}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--drivers", default=",".join(SUBSETS))
    args = parser.parse_args()
    keys = [k for k in args.drivers.split(",") if k]
    unknown = [k for k in keys if k not in SUBSETS]
    if unknown:
        raise SystemExit(
            f"unknown driver path(s): {', '.join(unknown)}; choose from {', '.join(SUBSETS)}"
        )
    with tempfile.TemporaryDirectory(prefix="mw-adapter-startup-") as work:
        asyncio.run(measure(args.tasks, keys, args.reps, Path(work)))


if __name__ == "__main__":
    main()
