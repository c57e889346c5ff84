"""Shared by the measure tests: tear down a real process tree a test started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Any

from metewand.measure import procfs


def kill_tree(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL ``proc`` and every descendant (deepest first), then reap ``proc``."""
    for pid in reversed(procfs.descendants(proc.pid)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
