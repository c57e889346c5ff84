"""Wait for a process tree to go quiet: the same members on consecutive looks, none of them
running, exiting or waiting to be reaped.

Why: a browser keeps working after its page is closed. Chromium's renderer exits, the zygote
reaps it and forks a spare renderer that initialises for tens of milliseconds. Without a wait
that work lands in whatever runs next (the other engine's attempt on a 2-core host, or this
engine's next baseline scan, which then races the exit and retries) and its CPU is charged to
the wrong attempt. The looks read only /proc; the state is the main thread's, so a look can miss
a busy helper thread, which is why quiet also needs the member set to hold still.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from metewand.measure import procfs

# R running or runnable, D uninterruptible (e.g. tearing down memory), Z/X exited, not reaped
BUSY_STATES = frozenset("RDZX")


@dataclass(frozen=True, slots=True)
class Look:
    members: frozenset[int]
    busy: tuple[int, ...]  # members running, exiting, unreaped, or gone while looked at


@dataclass(frozen=True, slots=True)
class QuietOutcome:
    quiet: bool
    waited_ms: float
    looks: int
    busy_at_limit: tuple[int, ...]  # busy when the limit ended the wait (empty: members changing)

    def to_json(self) -> dict[str, Any]:
        return {
            "quiet": self.quiet,
            "waited_ms": round(self.waited_ms, 3),
            "looks": self.looks,
            "busy_at_limit": list(self.busy_at_limit),
        }


def look(root_pid: int) -> Look:
    members = procfs.descendants(root_pid)
    busy = []
    for pid in members:
        try:
            stat = procfs.read_stat(pid)
        except (procfs.ProcessGone, PermissionError):
            busy.append(pid)  # left while we looked: the tree is still changing
            continue
        if stat.state in BUSY_STATES or stat.exiting:
            busy.append(pid)
    return Look(frozenset(members), tuple(busy))


async def wait_quiet(
    root_pid: int, limit_s: float, poll_s: float = 0.02, stable_looks: int = 2
) -> QuietOutcome:
    """Look every ``poll_s`` until ``stable_looks`` consecutive looks find the same members and
    none busy, or ``limit_s`` passed. A tree that is gone (the root exited) is quiet."""
    started = time.monotonic()
    previous: frozenset[int] | None = None
    calm = looks = 0
    current = Look(frozenset(), ())
    while True:
        current = look(root_pid)
        looks += 1
        if not current.members:
            break
        steady = not current.busy and current.members == previous
        calm = calm + 1 if steady or (not current.busy and previous is None) else 0
        if calm >= stable_looks:
            break
        previous = current.members
        if time.monotonic() - started + poll_s > limit_s:
            waited = (time.monotonic() - started) * 1000
            return QuietOutcome(False, waited, looks, current.busy)
        await asyncio.sleep(poll_s)
    return QuietOutcome(True, (time.monotonic() - started) * 1000, looks, ())
