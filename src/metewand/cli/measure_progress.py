"""The progress line of ``metewand measure`` on a terminal: command, run, last wall, time left.

Shown on stderr only when stderr is a terminal, redrawn at most ``REDRAW_S`` apart (a
thousand runs of ``true`` must not become a thousand writes) and erased before the report.
The time left is estimated from the runs so far: with ``--runs`` from the runs still to do at
the mean pace; without, from whichever ends the measurement later, the time budget
(``--max-time`` per command) or ``--min-runs`` at the mean pace (``--max-runs`` caps it).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metewand.measure.series import Command, SeriesOptions

REDRAW_S = 0.1


def clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    def __init__(self, commands: Sequence[Command], options: SeriesOptions) -> None:
        self.commands = commands
        self.options = options
        self.started = time.monotonic()
        self.done = 0
        self._drawn = 0.0

    @classmethod
    def on_terminal(cls, commands: Sequence[Command], options: SeriesOptions) -> Progress | None:
        return cls(commands, options) if sys.stderr.isatty() else None

    def total_runs(self, elapsed: float) -> float:
        """How many measured runs the whole measurement will have, as far as one can tell."""
        options, count = self.options, len(self.commands)
        if options.runs is not None:
            return options.runs * count
        pace = elapsed / max(self.done, 1)  # seconds per run so far
        by_time = options.max_time_s * count / pace if pace > 0 else 0
        runs = max(options.min_runs * count, by_time)
        if options.max_runs is not None:
            runs = min(runs, options.max_runs * count)
        return max(runs, self.done)

    def line(self, index: int, command: Command, done: int, run: dict[str, Any]) -> str:
        elapsed = time.monotonic() - self.started
        total = self.total_runs(elapsed)
        left = elapsed / max(self.done, 1) * max(total - self.done, 0)
        wall = run.get("wall_time_ns")
        shown = f"{wall / 1e6:.2f} ms" if isinstance(wall, int) else "unavailable"
        of = f"/{self.options.runs}" if self.options.runs is not None else ""
        return (
            f"  [{index + 1}/{len(self.commands)}] {command.label}: run {done}{of} ({shown}), "
            f"{self.done}/{round(total)} runs, about {clock(left)} left"
        )

    def on_run(self, index: int, command: Command, done: int, run: dict[str, Any]) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self._drawn < REDRAW_S:
            return
        self._drawn = now
        sys.stderr.write(f"\r{self.line(index, command, done, run)}\033[K")
        sys.stderr.flush()

    def clear(self) -> None:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
