"""Find and kill every process of an engine's session (teardown verification).

An engine is started as a session leader; Chrome's helpers (zygotes, crashpad handler) may be
re-parented away from it but keep its session id, so the session id — not the parent chain — is
what identifies everything the engine started. (A process that calls ``setsid`` itself escapes
this walk; the cgroup backend of ``measure.accounting`` covers that case when profiling.) The
walk, the kill and the wait are ``measure.process_sweep``'s.
"""

from __future__ import annotations

import asyncio
import time

from metewand.measure import process_sweep, subreaper
from metewand.measure.procfs import ProcStat

# A killed member's zombie is reaped by its parent (PID 1 for re-parented helpers, sometimes
# lazily; this process, for those it adopted as a subreaper). Reaping by another process has no
# notification, so zombies get a short bounded look.
ZOMBIE_GRACE_S = 1.0
ZOMBIE_LOOK_S = 0.02


def session_members(session: int) -> list[ProcStat]:
    return process_sweep.members(session=session)


def _live(session: int) -> list[int]:
    return [m.pid for m in session_members(session) if m.state != "Z"]


async def sweep_session(session: int, timeout: float) -> tuple[list[int], list[int], list[int]]:
    """SIGKILL every live member until none is left; returns (killed, live leftovers, zombies)."""
    killed, leftover = await asyncio.to_thread(
        process_sweep.kill_until_gone, lambda: _live(session), timeout
    )
    deadline = time.monotonic() + (ZOMBIE_GRACE_S if not leftover else 0.0)
    while True:
        subreaper.reap_adopted()  # a zombie this process adopted waits for no one else
        zombies = [m.pid for m in session_members(session) if m.state == "Z"]
        if not zombies or time.monotonic() >= deadline:
            return killed, leftover, zombies
        await asyncio.sleep(ZOMBIE_LOOK_S)
