"""The one way a command prints a terminal table (rich), so every table survives a CI log.

Rich sizes its output to the terminal; when output is not a terminal (a pipe, a file, a CI log,
``| less``) it falls back to ``COLUMNS`` or 80 columns and cuts cells to fit
(``c-merges…``). Here, off a terminal, the console is as wide as the widest table needs (the
table keeps its natural width: nothing is padded out to the console), so no name is ever cut. On
a terminal the width is the terminal's, and a cell too long for its column folds onto the next
line instead of ending in an ellipsis. ``COLUMNS`` still sets the width on a terminal (rich's
own rule); off a terminal it can widen the console, never narrow a table below its content.
"""

from __future__ import annotations

from typing import IO

from rich.console import Console
from rich.table import Table

# Wide enough for any table a command prints; a table is never padded out to it (rich tables do
# not expand unless asked), so this is a ceiling, not a width anything is printed at.
OFF_TERMINAL_WIDTH = 10_000


def console(*, stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A rich console for tables: the terminal's width, or no practical limit off a terminal."""
    out = Console(stderr=stderr, file=file)
    if not out.is_terminal:
        out.width = max(out.width, OFF_TERMINAL_WIDTH)
    return out


def unbreakable(table: Table) -> Table:
    """Every column folds a cell too long for it rather than cutting it with an ellipsis."""
    for column in table.columns:
        if column.overflow == "ellipsis":
            column.overflow = "fold"
    return table


def print_table(table: Table, *, out: Console | None = None, stderr: bool = False) -> None:
    """Print ``table`` whole: on ``out`` if given, else on a fresh console (stdout or stderr)."""
    (out or console(stderr=stderr)).print(unbreakable(table))
