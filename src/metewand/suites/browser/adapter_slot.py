"""The adapters one slot keeps: in long-lived mode, one served adapter per driver path × engine
process, opened on the first attempt that needs it and closed when that engine process is
replaced (a relaunch: the adapter's endpoint is gone) and at slot teardown.

Per-attempt isolation is the served adapter's own (``adapter_server.LongLivedAdapter``): each
payload connects, opens its own context and page and closes them, has its own deadline, and its
CPU and memory are read per attempt; an attempt that breaks the adapter is charged alone and the
next one starts a fresh process. A configured (foreign) adapter with no ``serve_argv`` has no
served mode: it runs per attempt, and its rows say so (``adapter_mode``).

In per-attempt mode the slot keeps the next adapter started ahead (``adapter_spares``): its move
into its fresh groups, ~10 ms of kernel wait, is then done while the attempt before runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from metewand.runtime.owned import OwnedJournal
from metewand.suites.browser.adapter_server import AdapterRunner, open_adapter
from metewand.suites.browser.adapter_spares import AdapterSpares
from metewand.suites.browser.driver_registry import FoundDriver

PER_ATTEMPT: Final = "per_attempt"
LONG_LIVED: Final = "long_lived"


@dataclass
class _Held:
    engine_pid: int | None
    generation: int
    runner: AdapterRunner


class SlotAdapters:
    """The slot's adapter runners, keyed by driver path and engine."""

    def __init__(
        self,
        mode: str,
        log_dir: Path,
        journal: OwnedJournal | None = None,
        stage_dir: Path | None = None,
    ) -> None:
        self.mode = mode
        self.log_dir = log_dir  # the served adapters' stderr (each attempt gets its share)
        self.journal = journal  # the run's owned.jsonl: every adapter process and group
        # per-attempt adapters started ahead, their stderr in the run's staging dir (None: none)
        self.spares = AdapterSpares(stage_dir, journal) if stage_dir is not None else None
        self._held: dict[tuple[str, str], _Held] = {}
        self.opened = 0  # long-lived runners opened (a relaunched engine opens another)

    def mode_for(self, found: FoundDriver) -> str:
        """The mode this driver really runs in: long-lived only when asked and it can serve."""
        if self.mode == LONG_LIVED and found.command.serve_argv:
            return LONG_LIVED
        return PER_ATTEMPT

    async def runner(
        self, found: FoundDriver, engine: str, generation: int, engine_pid: int | None
    ) -> tuple[AdapterRunner, str]:
        """The runner for this attempt and the mode it runs in."""
        key = found.path.key
        label = f"adapter-{key}"
        mode = self.mode_for(found)
        if mode == PER_ATTEMPT:
            return open_adapter(
                found.command, PER_ATTEMPT, label, journal=self.journal, spares=self.spares
            ), PER_ATTEMPT
        held = self._held.get((key, engine))
        if held is not None and (held.generation, held.engine_pid) != (generation, engine_pid):
            # the engine was relaunched: the served adapter knew the old one; end it first
            del self._held[(key, engine)]
            await held.runner.close()
            held = None
        if held is None:
            log = self.log_dir / f"adapter-{key}-{engine}-gen{generation}.log"
            runner = open_adapter(found.command, LONG_LIVED, label, log, self.journal)
            held = _Held(engine_pid, generation, runner)
            self._held[(key, engine)] = held
            self.opened += 1
        return held.runner, LONG_LIVED

    async def close_all(self) -> None:
        """End every served adapter (slot teardown); each is swept like a broken one. The
        per-attempt adapter started ahead is discarded."""
        held, self._held = list(self._held.values()), {}
        try:
            for entry in held:
                await entry.runner.close()
        finally:
            if self.spares is not None:
                await self.spares.close()
