"""Shared helpers for browser engine tests: real engines, started once per module."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from metewand.suites.browser.engine_process import EngineProcess
from metewand.suites.browser.engines import Missing, ResolvedEngine, resolve

REAL_ENGINES = ("chrome", "lightpanda")


def resolved_or_skip(name: str) -> ResolvedEngine:
    found = resolve(name)
    if isinstance(found, Missing):
        pytest.skip(f"{name} not installed: {found.reason}: {found.detail}")
    return found


def running_engine(name: str, log_dir: Path) -> Iterator[EngineProcess]:
    process = EngineProcess(resolved_or_skip(name), log_dir)
    asyncio.run(process.start())
    try:
        yield process
    finally:
        report = asyncio.run(process.stop())
        assert report.clean, report
