"""Temporary directories in the shared dataset cache, named after the process filling them.

``<kind>-<pid>-<start time>-…`` (kind ``staging`` for a materialization, ``acquire`` for an
acquisition): a later run can tell a dir whose builder died (``kill -9``) from one a live run —
possibly another metewand on the same cache — is filling, and removes only the former.
"""

from __future__ import annotations

import contextlib
import os
import shutil

from metewand.measure import procfs

KINDS = ("staging", "acquire")


def prefix(kind: str, pid: int | None = None) -> str:
    """The name prefix of a temp dir this process (or ``pid``) fills."""
    pid = os.getpid() if pid is None else pid
    return f"{kind}-{pid}-{procfs.read_stat(pid).starttime_ticks}-"


def remove_stale(root: str) -> list[str]:
    """Remove the temp dirs under ``root`` whose builder is gone; returns their names."""
    removed = []
    for name in os.listdir(root):
        kind, _, rest = name.partition("-")
        if kind not in KINDS:
            continue
        with contextlib.suppress(ValueError, IndexError, procfs.ProcessGone, OSError):
            if name.startswith(prefix(kind, int(rest.split("-")[0]))):
                continue  # its builder is alive (same pid, same start time)
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        removed.append(name)
    return removed
