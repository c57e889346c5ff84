"""Exit codes shared by every command (documented in README); defined in ``runtime``."""

from metewand.runtime.exit_codes import (
    BENCHMARK_FAILURES,
    ENVIRONMENT_MISSING,
    INTERRUPTED,
    INVALID_INPUT,
    OK,
)

__all__ = ["BENCHMARK_FAILURES", "ENVIRONMENT_MISSING", "INTERRUPTED", "INVALID_INPUT", "OK"]
