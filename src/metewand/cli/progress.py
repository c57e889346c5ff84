"""Progress of a run: a rich bar on a terminal, plain periodic lines otherwise, or nothing.

    progress = Progress(total=120, mode="auto")
    progress.start()
    progress.attempt_started("task_001 x chrome")
    progress.attempt_finished("pass")
    progress.close()   # prints the summary table (quiet mode prints nothing)

A Dask run labels each attempt ``KEY on HOST/WORKER``: the bar and the plain lines then also
count finished attempts per host, so a user sees which hosts are doing the work.

Modes: rich (bar with counts, ETA and the current attempt), plain (a line at most every
``plain_every_s``), summary (only the final table: ``--no-progress``), quiet (nothing),
auto (rich on a terminal, else plain). Safe to call from several threads (compute jobs);
counts are by status word (pass, fail, accepted, ...).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import IO, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress
from rich.table import Table

from metewand.cli.tables import console, print_table

MODES = ("auto", "rich", "plain", "summary", "quiet")
PLAIN_EVERY_S = 10.0  # plain mode: at most one line per interval, plus the last attempt


class Progress:
    def __init__(
        self,
        total: int,
        mode: str = "auto",
        stream: IO[str] | None = None,
        plain_every_s: float = PLAIN_EVERY_S,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        if mode == "auto":
            mode = "rich" if self.stream.isatty() else "plain"
        self.mode = mode
        self.counts: Counter[str] = Counter()
        self.by_host: Counter[str] = Counter()  # a Dask run: finished attempts per host
        self.current = ""
        self._current_host: str | None = None
        self.plain_every_s = plain_every_s
        self._started = 0.0
        self._last_line = 0.0
        self._bar: RichProgress | None = None
        self._task: Any = None
        self._lock = threading.Lock()

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def start(self) -> None:
        self._started = time.monotonic()
        if self.mode == "rich":
            console = Console(file=self.stream)
            self._bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[counts]}"),
                TimeRemainingColumn(),
                console=console,
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task("starting", total=self.total, counts="")

    def attempt_started(self, label: str) -> None:
        with self._lock:
            self._started_attempt(label)

    def _started_attempt(self, label: str) -> None:
        self.current = label
        self._current_host = host_of_label(label)
        if self._bar is not None:
            self._bar.update(self._task, description=label)

    def attempt_finished(self, status: str) -> None:
        with self._lock:
            self._finished_attempt(status)

    def _finished_attempt(self, status: str) -> None:
        self.counts[status] += 1
        if self._current_host is not None:
            self.by_host[self._current_host] += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, counts=self.counts_text())
        elif self.mode == "plain":
            now = time.monotonic()
            if now - self._last_line >= self.plain_every_s or self.done >= self.total:
                self._last_line = now
                self._write(self.plain_line(now))

    def counts_text(self) -> str:
        text = " ".join(f"{s}={n}" for s, n in sorted(self.counts.items()))
        if self.by_host:
            text += " | per host: " + " ".join(f"{h}={n}" for h, n in sorted(self.by_host.items()))
        return text

    def eta_s(self, now: float | None = None) -> float | None:
        if not self.done:
            return None
        elapsed = (now if now is not None else time.monotonic()) - self._started
        return elapsed / self.done * max(self.total - self.done, 0)

    def plain_line(self, now: float | None = None) -> str:
        eta = self.eta_s(now)
        eta_text = f"{eta:.0f}s" if eta is not None else "unknown"
        return (
            f"[{self.done}/{self.total}] {self.counts_text()} eta {eta_text} "
            f"current {self.current}\n"
        )

    def summary_table(self) -> Table:
        table = Table(title="attempts by status")
        table.add_column("status")
        table.add_column("attempts", justify="right")
        for status, count in sorted(self.counts.items()):
            table.add_row(status, str(count))
        table.add_row("total", f"{self.done}/{self.total}")
        return table

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elapsed = time.monotonic() - self._started if self._started else 0.0
        if self.mode == "quiet":
            return
        # Rich writes no colour codes when the stream is not a terminal or NO_COLOR is set.
        print_table(self.summary_table(), out=console(file=self.stream))
        if self.mode == "plain":  # the last line a log reader sees
            self._write(f"done {self.done}/{self.total} in {elapsed:.1f}s: {self.counts_text()}\n")

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def host_of_label(label: str) -> str | None:
    """``HOST`` of a Dask attempt label ``KEY on HOST/WORKER`` (None for a local attempt)."""
    _, on, where = label.rpartition(" on ")
    host, slash, _worker = where.partition("/")
    return host if on and slash and host and " " not in where else None


def progress_mode(no_progress: bool, quiet: bool) -> str:
    """``--quiet`` shows nothing; ``--no-progress`` keeps only the final summary."""
    if quiet:
        return "quiet"
    return "summary" if no_progress else "auto"


def reporter_factory(mode: str, stream: IO[str] | None = None) -> Callable[[int], Progress]:
    """What a runner takes (``runtime.progress.ReporterFactory``): one Progress per run."""

    def make(total: int) -> Progress:
        return Progress(total, mode=mode, stream=stream)

    return make
