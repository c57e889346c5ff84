"""Shared helpers for driver-path tests: a real Chromium (engine registry flags), the real
fixture server on the peer corpus, and one corpus driver task run through a real adapter."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from browser_engine_fixtures import resolved_or_skip
from metewand.suites.browser.adapter_grade import graded_view
from metewand.suites.browser.adapter_payload import AttemptIds, EngineEndpoint, build_payload
from metewand.suites.browser.adapter_server import AdapterRunner
from metewand.suites.browser.adapters import AdapterCommand, AdapterRun, run_adapter
from metewand.suites.browser.driver_registry import (
    DriverMissing,
    FoundDriver,
    load_binding,
    resolve_driver,
)
from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.fixtures import FixtureServer, ServerThread
from shared_paths import LEXBENCH, lexbench_or_skip

REPO = Path(__file__).resolve().parents[1]
CORPUS = LEXBENCH
CATALOG = CORPUS / "config" / "browser_driver_bindings.json"


def corpus_or_skip() -> Path:
    return lexbench_or_skip()  # under CI=true a missing corpus fails instead of skipping


def load_task(subset_dir: str, task_id: str) -> dict[str, Any]:
    return dict(
        json.loads((corpus_or_skip() / "tasks" / subset_dir / f"{task_id}.json").read_text())
    )


@dataclass
class Bench:
    """A running engine and fixture server, with the endpoint facts the binding gate needs."""

    engine: EngineProcess
    server: ServerThread
    endpoint: EngineEndpoint

    @property
    def base_url(self) -> str:
        assert self.server.server.base_url is not None
        return self.server.server.base_url


def chrome_bench(log_dir: Path) -> Iterator[Bench]:
    return engine_bench("chrome", log_dir)


def engine_bench(name: str, log_dir: Path, fixtures: Path | None = None) -> Iterator[Bench]:
    """A running engine and a fixture server on ``fixtures`` (default: the peer corpus's)."""
    engine = EngineProcess(resolved_or_skip(name), log_dir)
    server = ServerThread(FixtureServer(fixtures or corpus_or_skip() / "fixtures"))
    asyncio.run(engine.start())
    server.start()
    try:
        version = asyncio.run(engine.cdp_version())
        assert engine.ws_url is not None and engine.port is not None
        endpoint = EngineEndpoint(
            name,
            engine.ws_url,
            engine.port,
            str(engine.json_version["Browser"]),
            str(engine.json_version.get("User-Agent", "")),
            str(version.get("product", "")),
        )
        yield Bench(engine, server, endpoint)
    finally:
        server.stop()
        report = asyncio.run(engine.stop())
        assert report.clean, report


def found_or_skip(key: str) -> FoundDriver:
    found = resolve_driver(key)
    if isinstance(found, DriverMissing):
        pytest.skip(f"{key}: {found.reason}: {found.detail}")
    return found


def run_task(
    bench: Bench,
    command: AdapterCommand,
    key: str,
    task: dict[str, Any],
    work: Path,
    attempt: int = 1,
    isolation: str = "context",
) -> AdapterRun:
    artifact_dir = work / f"{task['task_id']}-{attempt}"
    artifact_dir.mkdir(parents=True, exist_ok=True)
    ids = AttemptIds("test-run", attempt, "seed0", str(artifact_dir), isolation)
    engine = bench.endpoint.name
    binding = load_binding(CATALOG, engine, key) if CATALOG.is_file() else None
    payload = build_payload(task, key, bench.endpoint, bench.base_url, ids, binding)
    deadline = payload["task_timeout_ms"] / 1000 + 5.0
    run = asyncio.run(run_adapter(command, payload, deadline, artifact_dir / "stderr.txt"))
    # graded as the attempt runner grades it: a server-graded task's value checks, whose
    # expected values the adapter never got, are graded here from what it saved
    return graded_view(task, run)[0]


async def run_served_task(
    runner: AdapterRunner,
    bench: Bench,
    key: str,
    subset_dir: str,
    task_id: str,
    work: Path,
    attempt: int,
    deadline_s: float,
) -> tuple[AdapterRun, str]:
    """One attempt of ``task_id`` through an open (e.g. served) adapter: the run as it came and
    its status graded as a row's (the withheld expected values checked by the runner)."""
    artifact_dir = work / f"{attempt}-{task_id}"
    ids = AttemptIds("served", attempt, "seed0", str(artifact_dir))
    binding = load_binding(CATALOG, bench.endpoint.name, key)
    task = load_task(subset_dir, task_id)
    payload = build_payload(task, key, bench.endpoint, bench.base_url, ids, binding)
    run = await runner.run(payload, deadline_s, artifact_dir / "stderr.txt")
    return run, graded_view(task, run)[0].classification().status


def fixture_pages_after(bench: Bench, before: set[str], limit_s: float = 3.0) -> set[str]:
    """The fixture pages once every page not in ``before`` is gone, or at ``limit_s``: an engine
    finishes closing a page 8-16 ms after Target.closeTarget answers (Chrome, measured)."""
    end = time.monotonic() + limit_s
    while (pages := fixture_pages(bench)) - before and time.monotonic() < end:
        time.sleep(0.02)
    return pages


def fixture_pages(bench: Bench) -> set[str]:
    """The engine's page targets (every browser context's) on the fixture server, by id, from
    its /json/list: the pages a task's attempts opened, never another test's blank one."""
    url = f"http://127.0.0.1:{bench.endpoint.cdp_port}/json/list"
    with urllib.request.urlopen(url, timeout=5) as reply:
        targets = json.load(reply)
    return {
        t["id"]
        for t in targets
        if t.get("type") == "page" and str(t.get("url", "")).startswith(bench.base_url)
    }


def failed_checks(run: AdapterRun) -> list[dict[str, Any]]:
    return [c for c in run.checks if c.get("status") != "pass"]
