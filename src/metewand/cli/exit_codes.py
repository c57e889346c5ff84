"""Exit codes shared by every command (documented in README); defined beside the exception base
in ``metewand.errors``."""

from metewand.errors import (
    BENCHMARK_FAILURES,
    ENVIRONMENT_MISSING,
    INTERRUPTED,
    INVALID_INPUT,
    OK,
)

__all__ = ["BENCHMARK_FAILURES", "ENVIRONMENT_MISSING", "INTERRUPTED", "INVALID_INPUT", "OK"]
