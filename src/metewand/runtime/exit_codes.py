"""Process exit codes (README "Exit codes"), defined beside the exception base in
``metewand.errors``; here for the runners and ``metewand.cli.exit_codes``, which re-export them."""

from metewand.errors import (
    BENCHMARK_FAILURES,
    ENVIRONMENT_MISSING,
    INTERRUPTED,
    INVALID_INPUT,
    OK,
)

__all__ = ["BENCHMARK_FAILURES", "ENVIRONMENT_MISSING", "INTERRUPTED", "INVALID_INPUT", "OK"]
