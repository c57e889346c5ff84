"""What the driver-path benchmarks share (adapter_startup.py, driver_subsets.py): one real engine
with the registry's flags and the fixture server on the peer corpus, the endpoint facts the
binding gate needs, and one corpus task run through an adapter runner (either mode)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metewand.suites.browser.adapter_payload import AttemptIds, EngineEndpoint, build_payload
from metewand.suites.browser.adapter_server import AdapterRunner
from metewand.suites.browser.adapters import AdapterRun
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.engines import Missing, resolve
from metewand.suites.browser.fixtures import FixtureServer

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus" / "lexbench"


async def endpoint_of(name: str, engine: EngineProcess) -> EngineEndpoint:
    version = await engine.cdp_version()
    assert engine.ws_url is not None and engine.port is not None
    return EngineEndpoint(
        name,
        engine.ws_url,
        engine.port,
        str(engine.json_version["Browser"]),
        str(engine.json_version.get("User-Agent", "")),
        str(version.get("product", "")),
    )


@dataclass
class Bench:
    name: str
    engine: EngineProcess
    endpoint: EngineEndpoint
    base_url: str
    corpus: Path

    async def revive(self) -> None:
        """Restart an engine an attempt took down (the next attempt gets a live one)."""
        if not self.engine.is_alive():
            await self.engine.ensure_running()
            self.endpoint = await endpoint_of(self.name, self.engine)

    def binding(self, key: str) -> dict[str, object] | None:
        from metewand.suites.browser.driver_registry import load_binding

        return load_binding(self.corpus / "config" / "browser_driver_bindings.json", self.name, key)


@asynccontextmanager
async def bench(engine_name: str, corpus: Path, work: Path) -> AsyncIterator[Bench]:
    found = resolve(engine_name)
    if isinstance(found, Missing):
        raise SystemExit(f"{engine_name} not installed: {found.detail}")
    engine = EngineProcess(found, work / "engine")
    server = FixtureServer(corpus / "fixtures")
    await engine.start()
    try:
        base = await server.start()
        try:
            yield Bench(engine_name, engine, await endpoint_of(engine_name, engine), base, corpus)
        finally:
            await server.stop()
    finally:
        await engine.stop()


def load_task(corpus: Path, subset: str, task_id: str) -> dict[str, Any]:
    return dict(json.loads((corpus / "tasks" / subset / f"{task_id}.json").read_text()))


async def run_task(
    runner: AdapterRunner, bench_: Bench, key: str, task: dict[str, Any], work: Path, n: int = 1
) -> AdapterRun:
    """One attempt of ``task`` through ``runner``, with the task's own deadline (+5 s)."""
    artifact_dir = work / key / f"{task['task_id']}-{n}"
    ids = AttemptIds("driver-bench", n, "seed0", str(artifact_dir))
    payload = build_payload(task, key, bench_.endpoint, bench_.base_url, ids, bench_.binding(key))
    deadline = payload["task_timeout_ms"] / 1000 + 5.0
    run = await runner.run(payload, deadline, artifact_dir / "stderr.txt")
    await bench_.revive()
    return run
