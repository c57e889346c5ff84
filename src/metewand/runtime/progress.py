"""What a runner tells about its progress, and nothing about how it is shown.

Runners (``suites.*``) take a ``ReporterFactory`` from the caller; the CLI hands in
``metewand.cli.progress.Progress`` (a rich bar, plain lines or nothing), tests and library users
hand in ``null_reporter``. Keeping the protocol here keeps suites from importing the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class RunReporter(Protocol):
    def start(self) -> None: ...

    def attempt_started(self, label: str) -> None: ...

    def attempt_finished(self, status: str) -> None: ...

    def close(self) -> None: ...


# Called once with the number of attempts the run will execute.
ReporterFactory = Callable[[int], RunReporter]


class NullReporter:
    """Shows nothing (library use, tests)."""

    def start(self) -> None:
        pass

    def attempt_started(self, label: str) -> None:
        pass

    def attempt_finished(self, status: str) -> None:
        pass

    def close(self) -> None:
        pass


def null_reporter(total: int) -> RunReporter:
    return NullReporter()
