"""metewand's exception base and the process exit codes (README "Exit codes").

It sits below every layer, like ``canonical``: ``measure``, ``runtime``, the suites, ``compare``
and the CLI all raise a ``MetewandError``, and each error class says which exit code it means
when it reaches a command, so a command exits with ``exc.exit_code`` instead of keeping its own
table of which error is which code. A class may also set the code per instance
(``measure.subject.SubjectStartError``: 127 not found, 126 not executable, as a shell does).
"""

from __future__ import annotations

OK = 0
BENCHMARK_FAILURES = 1  # a run finished but some attempts failed, where the user asked to know
INVALID_INPUT = 2  # bad manifest, task file, flag or argument; nothing was run
ENVIRONMENT_MISSING = 3  # something a run needs (engine, backend) is missing
INTERRUPTED = 130  # Ctrl-C: the run is marked interrupted and can be resumed


class MetewandError(Exception):
    """Base of every error metewand raises; ``exit_code``: what it means for a command."""

    exit_code: int = BENCHMARK_FAILURES  # the harness failed, unless the class says otherwise


class InvalidInput(MetewandError):
    """A file, flag or argument the user gave is wrong (exit 2); the message names it."""

    exit_code = INVALID_INPUT


class EnvironmentMissing(MetewandError):
    """Something a run needs is not there on this machine (exit 3)."""

    exit_code = ENVIRONMENT_MISSING
