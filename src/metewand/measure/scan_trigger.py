"""When the sampler takes a PSS scan: on change (default) or on a fixed tick count.

A PSS scan costs a kernel page walk per process (~1.6 ms for a Chromium process); the cheap
counters read every tick (cgroup memory, the member list) cost microseconds. Under the
``changes`` policy a tick scans only when something moved since the last scan:

- ``members``: the member set changed (a fork or an exit changes who shares what);
- ``memory_rise``: the tree's memory counter rose by at least ``rise_bytes`` (this is what makes a
  PSS peak visible within one tick; the kernel high-water itself is read from the cgroup exactly);
- ``interval``: ``max_interval_ns`` passed without a scan (slow drifts, and falls, still show).

The ``fixed`` policy scans every ``every_ticks`` ticks, as before. Baseline and end scans are
always taken by the sampler itself and named ``baseline`` and ``end``.
"""

from __future__ import annotations

POLICIES = ("changes", "fixed")


class ScanTrigger:
    """(A plain class, not a dataclass: this module is on measure's start-up path, see
    measure.accounting.)"""

    __slots__ = (
        "_last_memory",
        "_last_members",
        "_last_ns",
        "counts",
        "every_ticks",
        "max_interval_ns",
        "policy",
        "rise_bytes",
    )

    def __init__(
        self, policy: str, every_ticks: int, max_interval_ns: int, rise_bytes: int
    ) -> None:
        self.policy = policy
        self.every_ticks = every_ticks
        self.max_interval_ns = max_interval_ns
        self.rise_bytes = rise_bytes
        self.counts: dict[str, int] = {}
        self._last_ns = 0
        self._last_members: frozenset[int] | None = None
        self._last_memory: int | None = None
        if self.policy not in POLICIES:
            raise ValueError(f"unknown PSS policy {self.policy!r}; choose one of {POLICIES}")
        if self.every_ticks <= 0 or self.max_interval_ns <= 0 or self.rise_bytes <= 0:
            raise ValueError("every_ticks, max_interval_ns and rise_bytes must be positive")

    def due(
        self, tick: int, now_ns: int, members: frozenset[int], memory: int | None
    ) -> str | None:
        """The reason to scan at this tick, or None to skip it."""
        if self.policy == "fixed":
            return "tick" if tick % self.every_ticks == 0 else None
        if members != self._last_members:
            return "members"
        if (
            memory is not None
            and self._last_memory is not None
            and memory - self._last_memory >= self.rise_bytes
        ):
            return "memory_rise"
        if now_ns - self._last_ns >= self.max_interval_ns:
            return "interval"
        return None

    def scanned(
        self, trigger: str, now_ns: int, members: frozenset[int], memory: int | None
    ) -> None:
        """Record a scan taken for ``trigger`` with the counters it was decided on."""
        self.counts[trigger] = self.counts.get(trigger, 0) + 1
        self._last_ns = now_ns
        self._last_members = members
        self._last_memory = memory
