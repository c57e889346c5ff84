"""Find and kill every process of a session by walking /proc (teardown verification).

An engine is started as a session leader; Chrome's helpers (zygotes, crashpad handler) may be
re-parented away from it but keep its session id, so the session id — not the parent chain — is
what identifies everything the engine started. (A process that calls ``setsid`` itself escapes
this walk; the cgroup backend of ``measure.accounting`` covers that case when profiling.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

from metewand.measure import procfs
from metewand.measure.procfs import ProcStat

ZOMBIE_GRACE_S = 1.0


def session_members(session: int) -> list[ProcStat]:
    members = []
    for pid in procfs.iter_pids():
        try:
            stat = procfs.read_stat(pid)
        except (procfs.ProcessGone, OSError):
            continue  # exited since the listing, or not ours to read
        if stat.session == session:
            members.append(stat)
    return members


def kill_session(session: int) -> list[int]:
    """SIGKILL every live (non-zombie) member; returns the pids signalled."""
    killed = []
    for member in session_members(session):
        if member.state != "Z":
            with contextlib.suppress(ProcessLookupError):
                os.kill(member.pid, signal.SIGKILL)
                killed.append(member.pid)
    return killed


async def wait_session_empty(session: int, timeout: float) -> tuple[list[int], list[int]]:
    """Wait until no live member is left; returns (live leftovers, zombies).

    Orphaned zombies are reaped by PID 1, sometimes lazily, so they get a short extra wait.
    """
    deadline = time.monotonic() + timeout
    zombie_deadline: float | None = None
    while True:
        members = session_members(session)
        live = [m.pid for m in members if m.state != "Z"]
        zombies = [m.pid for m in members if m.state == "Z"]
        now = time.monotonic()
        if not live and zombie_deadline is None:
            zombie_deadline = min(deadline, now + ZOMBIE_GRACE_S)
        if (not live and not zombies) or now >= deadline:
            return live, zombies
        if zombie_deadline is not None and now >= zombie_deadline:
            return live, zombies
        await asyncio.sleep(0.02)
