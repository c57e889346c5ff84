"""Wait for a process tree to go quiet: the same members on consecutive looks, none of them
running, exiting or waiting to be reaped.

Why: a browser keeps working after its page is closed. Chromium's renderer exits, the zygote
reaps it and forks a spare renderer (a median 270 ms of work after each page here). Without a wait
that work lands in whatever runs next (the other engine's attempt on a 2-core host, or this
engine's next baseline scan, which then races the exit and retries) and its CPU is charged to
the wrong attempt. The looks read only /proc; the state is the main thread's, so a look can miss
a busy helper thread, which is why quiet also needs the member set to hold still and, when the
caller can read the tree's CPU (an accounting group), the tree to have used at most
``max_cpu_share`` of one core since the last look.

A member that has exited but is not reaped (a zombie) is busy, with one exception. Chromium's
zygote reaps an exited renderer about 1.1 s later, from a polling reaper: each page a driver
closes leaves one zombie that outlasts a 1 s settle limit while nothing runs. So when the tree's
CPU can be read, zombies alone do not keep the tree busy once they, the member set and the flat
CPU have held for ``ZOMBIE_CALM_LOOKS`` looks: a reap is bookkeeping, not work. The outcome
names them (``unreaped``). Without a CPU reading a zombie stays busy, since then nothing shows
whether its parent is working.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metewand.measure import procfs

# R running or runnable, D uninterruptible (e.g. tearing down memory), Z/X exited, not reaped
BUSY_STATES = frozenset("RDZX")
# An idle Chromium wakes its threads briefly every few tens of ms; work is more than this.
MAX_CPU_SHARE = 0.1
# Looks that zombies, the members and a flat CPU must hold still before zombies stop counting as
# busy (100 ms at the default 20 ms look): a prompt reap is still waited for.
ZOMBIE_CALM_LOOKS = 5

CpuNs = Callable[[], int | None]  # the tree's CPU time so far in ns, None when unreadable


@dataclass(frozen=True, slots=True)
class Look:
    members: frozenset[int]
    busy: tuple[int, ...]  # members running, exiting, unreaped, or gone while looked at
    zombies: tuple[int, ...] = ()  # the busy members that only wait to be reaped (state Z)

    @property
    def only_zombies(self) -> bool:
        return bool(self.busy) and len(self.zombies) == len(self.busy)


@dataclass(frozen=True, slots=True)
class QuietOutcome:
    quiet: bool
    waited_ms: float
    looks: int
    # members busy when the limit ended the wait; empty: the set kept changing or the CPU ran
    busy_at_limit: tuple[int, ...]
    cpu_checked: bool = False  # the tree's CPU was part of the test
    unreaped: tuple[int, ...] = ()  # zombies left to their parent's reaper when judged quiet

    def to_json(self) -> dict[str, Any]:
        return {
            "quiet": self.quiet,
            "waited_ms": round(self.waited_ms, 3),
            "looks": self.looks,
            "busy_at_limit": list(self.busy_at_limit),
            "cpu_checked": self.cpu_checked,
            "unreaped": list(self.unreaped),
        }


def look(root_pid: int) -> Look:
    members = procfs.descendants(root_pid)
    busy, zombies = [], []
    for pid in members:
        try:
            stat = procfs.read_stat(pid)
        except (procfs.ProcessGone, PermissionError):
            busy.append(pid)  # left while we looked: the tree is still changing
            continue
        if stat.state in BUSY_STATES or stat.exiting:
            busy.append(pid)
            if stat.state == "Z":
                zombies.append(pid)
    return Look(frozenset(members), tuple(busy), tuple(zombies))


class _CpuGauge:
    """Whether the tree used more than ``share`` of one core between two looks."""

    def __init__(self, cpu_ns: CpuNs | None, share: float) -> None:
        self.cpu_ns = cpu_ns
        self.share = share
        self.last: tuple[float, int] | None = None
        self.found_flat = False  # the last look compared two readings and the CPU was flat

    def busy(self) -> bool:
        self.found_flat = False
        if self.cpu_ns is None:
            return False
        now, used = time.monotonic(), self.cpu_ns()
        if used is None:
            self.cpu_ns = None  # unreadable: fall back to states and members alone
            return False
        last, self.last = self.last, (now, used)
        if last is None:
            return False
        over = used - last[1] > self.share * (now - last[0]) * 1e9
        self.found_flat = not over
        return over


async def wait_quiet(
    root_pid: int,
    limit_s: float,
    poll_s: float = 0.02,
    stable_looks: int = 2,
    cpu_ns: CpuNs | None = None,
    max_cpu_share: float = MAX_CPU_SHARE,
) -> QuietOutcome:
    """Look every ``poll_s`` until ``stable_looks`` consecutive looks find the same members, none
    busy and (with ``cpu_ns``) the tree's CPU flat, or ``limit_s`` passed. A tree that is gone
    (the root exited) is quiet; so is one whose only busy members are zombies, when the CPU is
    read and stayed flat for ``ZOMBIE_CALM_LOOKS`` looks (see the module docstring)."""
    started = time.monotonic()
    gauge = _CpuGauge(cpu_ns, max_cpu_share)
    previous: frozenset[int] | None = None
    calm = reaping = looks = 0
    unreaped: tuple[int, ...] = ()
    while True:
        current = look(root_pid)
        cpu_busy = gauge.busy()
        looks += 1
        if not current.members:
            break
        steady = previous is None or current.members == previous
        idle = not current.busy and not cpu_busy
        calm = calm + 1 if idle and steady else 0  # CPU is judged from the second look on
        # zombies only, the CPU read and flat (so from the second look on), nothing changing
        waits_for_reap = current.only_zombies and gauge.found_flat and steady
        reaping = reaping + 1 if waits_for_reap else 0
        if calm >= stable_looks:
            break
        if reaping >= max(stable_looks, ZOMBIE_CALM_LOOKS):
            unreaped = current.zombies
            break
        previous = current.members
        if time.monotonic() - started + poll_s > limit_s:
            waited = (time.monotonic() - started) * 1000
            return QuietOutcome(False, waited, looks, current.busy, gauge.cpu_ns is not None)
        await asyncio.sleep(poll_s)
    waited = (time.monotonic() - started) * 1000
    return QuietOutcome(True, waited, looks, (), gauge.cpu_ns is not None, unreaped)
