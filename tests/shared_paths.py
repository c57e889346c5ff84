"""Where ``../shared`` is: beside the repository root (worktrees are siblings of it), found
from this file, never by one machine's absolute path.

Tests that need the peer corpus call ``lexbench_or_skip()``: without the corpus they skip,
except under ``CI=true``, where a missing corpus fails the run (CI must not pass by skipping).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"
LEXBENCH = SHARED / "corpus" / "lexbench"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def lexbench_present() -> bool:
    return (LEXBENCH / "manifest.json").is_file()


def lexbench_or_skip() -> Path:
    if not lexbench_present():
        message = f"peer corpus not present at {LEXBENCH} (../shared beside {REPO_ROOT})"
        if in_ci():
            pytest.fail(f"CI=true: {message}", pytrace=False)
        pytest.skip(message)
    return LEXBENCH


@pytest.fixture
def lexbench() -> Path:
    return lexbench_or_skip()
