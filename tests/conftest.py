"""Fixtures every test file may use (helpers live in plain modules beside the tests)."""

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from compare_helpers import sorting_copy
from metewand.measure.spawner import Spawner
from shared_paths import lexbench

__all__ = ["lexbench", "short_sorting"]

HISTORY_ENV = "METEWAND_HISTORY"

# Tests that kill a runner and its watchdog on purpose leave orphan groups for `clean` or
# `--resume` to find; any other test's metewand starting meanwhile would sweep them first (CI lost
# two such tests to it). Set here, at import, so module-level copies of the environment have it
# too; the tests of the start-up sweep turn it back on for their own subprocesses.
os.environ["METEWAND_ORPHAN_SWEEP"] = "off"

# A suite started in the background by a shell without job control (`nohup make test &`, a CI
# launcher) inherits SIGINT ignored, and every process it starts inherits that too: the tests that
# stop a run with Ctrl-C then wait out their timeouts (8 failures, one test 241 s, seen here).
# A handler is reset to the default at exec, an ignored signal is not, so one handler here is
# enough for every metewand process the tests start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def _session_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``run`` and ``browser run`` add themselves to a history at their end, by default beside
    their ``--out``: with ``--out tmp_path`` that is the shared pytest base directory. Runs made
    by module and session fixtures go to one file of the session's own instead."""
    with pytest.MonkeyPatch.context() as patch:
        path = tmp_path_factory.mktemp("session-history") / "history.duckdb"
        patch.setenv(HISTORY_ENV, str(path))
        yield


@pytest.fixture(autouse=True)
def _test_history(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test's runs add themselves to a history in a directory of that test's own (a small
    file, removed with pytest's temporary directories, never in the repository). Tests of the
    default location remove the variable from their subprocesses' environment."""
    path: Path = tmp_path_factory.mktemp("history") / "history.duckdb"
    monkeypatch.setenv(HISTORY_ENV, str(path))


@pytest.fixture
def spawner() -> Iterator[Spawner]:
    """A spawn server (measure.spawner) for one test; modules using it skip where none works
    (``measure_helpers.NO_SPAWNER``)."""
    with Spawner() as server:
        yield server


@pytest.fixture(scope="session")
def short_sorting(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sorting example's manifest in a copy with 2 repetitions per experiment (30 attempts)."""
    return sorting_copy(tmp_path_factory.mktemp("short_sorting"), repetitions=2)
