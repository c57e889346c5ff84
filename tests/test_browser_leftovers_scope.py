"""Leftover cleanup kills only its own run's engines: two runs with the same run id in
different output directories (every test calls its run ``r``) never touch each other's."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from metewand.suites.browser.leftovers import kill_leftovers, run_markers, run_processes


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def _engine_like(run_id: str, run_dir: Path, into: list[subprocess.Popen[bytes]]) -> int:
    env = {**os.environ, **run_markers(run_id, run_dir)}
    process = subprocess.Popen(["sleep", "60"], env=env)
    into.append(process)
    return process.pid


def test_same_run_id_in_another_directory_is_never_killed(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    mine, other = tmp_path / "mine" / "r", tmp_path / "other" / "r"
    mine.mkdir(parents=True)
    other.mkdir(parents=True)
    my_engine = _engine_like("r", mine, sleepers)
    their_engine = _engine_like("r", other, sleepers)
    assert run_processes(mine, "r") == [my_engine]
    assert run_processes(other, "r") == [their_engine]
    assert kill_leftovers(mine, "r") == [my_engine]
    assert sleepers[0].wait(timeout=5) == -9
    assert sleepers[1].poll() is None, "another run's engine with the same id was killed"
    assert run_processes(other, "r") == [their_engine]
