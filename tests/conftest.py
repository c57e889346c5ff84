"""Fixtures every test file may use (helpers live in plain modules beside the tests)."""

from pathlib import Path

import pytest

from compare_helpers import sorting_copy
from shared_paths import lexbench

__all__ = ["lexbench", "short_sorting"]


@pytest.fixture(scope="session")
def short_sorting(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sorting example's manifest in a copy with 2 repetitions per experiment (30 attempts)."""
    return sorting_copy(tmp_path_factory.mktemp("short_sorting"), repetitions=2)
