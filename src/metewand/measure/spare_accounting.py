"""The next run's accounting groups, made while this run's command is being spawned.

A repeated run (``metewand measure --runs N``) makes fresh groups for every run: a directory in
each hierarchy it uses, announced to the watchdog first. Here that is ~0.12 ms a run (two
``mkdir`` and two watchdog messages), on the critical path between one run's exit and the next
run's spawn, where hyperfine, which keeps no groups, pays nothing. Meanwhile the spawn itself
(``measure.spawner``: the server's ``vfork`` + exec, ~0.25 ms for ``true``) leaves this process
waiting for the server's reply. So the groups of run i+1 are made in that wait, and run i+1
takes them ready.

What it does not change:
- every run still has groups of its own, fresh: a spare is empty (no member has ever been in
  it, so no CPU, no memory charge, no process), and one run's groups are removed when it ends,
  members killed first, as before (a removal left for later would let a daemon the command left
  behind run beside the next run);
- the command's wall time: with a spawn server it starts at the server's own stamp and ends at
  the kernel's exit event (or the exit seen after the reply). The spare is made between the
  request and the reply, so a short command may already run, on the other core, while it is
  made: on ``true`` (0.6 ms) no effect on the measured wall could be told apart from the scatter
  between invocations (benchmarks/README.md, 2026-12-06);
- a spare that is never used (the last run, an interrupt, a command of another name next) is
  removed by ``close``, or by the watchdog if this process dies first.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from metewand.measure.accounting import TreeAccounting, open_accounting

if TYPE_CHECKING:
    from metewand.measure.cgroups import CgroupLayout


class SpareAccounting:
    """At most one accounting opened ahead, for the next run of a command labelled ``label``."""

    def __init__(self, backend: str, layout: CgroupLayout) -> None:
        self.backend = backend
        self.layout = layout
        self._spare: tuple[str, TreeAccounting] | None = None

    def take(self, label: str) -> TreeAccounting:
        """The spare made for ``label``, else a new accounting (raising as ``open_accounting``
        does: an error of the spare's making is met again here, where the run can report it)."""
        spare, self._spare = self._spare, None
        if spare is not None:
            if spare[0] == label:
                return spare[1]
            spare[1].close()
        return open_accounting(self.backend, label=label, layout=self.layout)

    def refill(self, label: str) -> None:
        """Make the next run's accounting now; nothing when it cannot be made (``take`` then
        tries again and says why)."""
        if self._spare is not None:
            return
        with contextlib.suppress(Exception):
            self._spare = (label, open_accounting(self.backend, label=label, layout=self.layout))

    def close(self) -> None:
        """Remove the spare's groups, if one was made and not taken."""
        spare, self._spare = self._spare, None
        if spare is not None:
            spare[1].close()
