"""How a browser task-attempt ended: the one list of statuses, in the order reports show them.

The driver and grader decide among them (``classify``); scores, the scorecard, report.html and
``browser run --fail-on`` read this list. ``crash`` and ``infra`` mean the harness or an engine
process broke, so a run holding one exits 1 whatever ``--fail-on`` says. It imports nothing:
compare reads it without loading the suite.
"""

from __future__ import annotations

from typing import Final

STATUSES: Final = ("pass", "fail", "unsupported", "timeout", "crash", "infra")
BROKEN: Final = frozenset({"crash", "infra"})
