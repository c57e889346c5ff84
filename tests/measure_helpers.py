"""Shared by the measure tests: tear down a real process tree a test started; skip where a
backend or the spawn server is not available here."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Any

import pytest

from metewand.measure import procfs
from metewand.measure.accounting import AccountingUnavailable, open_accounting
from metewand.measure.spawner import spawner_unavailable_reason

# for a module whose tests all start commands through the spawn server (measure.spawner)
NO_SPAWNER = pytest.mark.skipif(
    spawner_unavailable_reason() is not None, reason=f"no spawner: {spawner_unavailable_reason()}"
)


def require_backend(backend: str) -> None:
    """Skip the test where the accounting ``backend`` cannot be opened here."""
    try:
        open_accounting(backend, label="probe").close()
    except AccountingUnavailable as exc:
        pytest.skip(f"backend {backend} unavailable here: {exc.reason}")


def kill_tree(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL ``proc`` and every descendant (deepest first), then reap ``proc``."""
    for pid in reversed(procfs.descendants(proc.pid)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
