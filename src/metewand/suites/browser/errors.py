"""Exceptions raised by the browser drivers and graders; ``classify`` maps each to a status.

CDP-level errors come from ``cdp`` (``CdpError``, ``CdpTimeout``, ``CdpDisconnected``); these
are the harness-level ones, each carrying what the result row needs to explain itself.
"""

from __future__ import annotations

from metewand.errors import MetewandError
from metewand.suites.browser.cdp import CdpError


class DriverError(MetewandError):
    """Base class: something in a driver stopped the attempt."""


class CommandRejected(DriverError):
    """A required command step got a protocol error."""

    def __init__(self, step_index: int, error: CdpError) -> None:
        super().__init__(
            f"step {step_index} {error.method}: CDP error {error.code}: {error.message}"
        )
        self.step_index = step_index
        self.error = error


class EventNotObserved(DriverError):
    """A required ``wait_for_event`` step timed out: the engine never sent the event."""

    def __init__(self, step_index: int, method: str, timeout_s: float) -> None:
        super().__init__(f"step {step_index}: event {method} not observed within {timeout_s:g} s")
        self.step_index = step_index
        self.method = method


class ProbeScriptError(DriverError):
    """A probe's page script threw, or the probe could not read what it needs."""


class ProbeEngineUnsupported(DriverError):
    """A probe met an engine gap (unknown method, missing API) rather than a wrong answer."""


class DriverUnavailable(DriverError):
    """The task's driver kind or probe script has no metewand implementation."""


class GraderUnavailable(DriverError):
    """The server-side grader could not be reached or gave no verdict (harness trouble)."""
