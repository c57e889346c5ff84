"""Fixtures every test file may use (helpers live in plain modules beside the tests)."""

from shared_paths import lexbench

__all__ = ["lexbench"]
