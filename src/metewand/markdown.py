"""Markdown as every report and command writes it: text from a run shown literally, and tables.

One escaping rule. Text that came from a run (an adapter's error, a worker's failure code, a task
title, a host name) is HTML-escaped as report.html escapes it, so a ``<script>`` in a row stays
text in any viewer that renders the Markdown's HTML. In a table cell, a ``|`` (it would end the
cell) is escaped as ``\\|`` and a line break (it would end the row) becomes a space. ``table``
puts every cell, the header's included, through that rule.

It sits below every layer (it imports nothing), so a suite's own documents (the driver-ops
matrix, the conformance summary) and the reports share it.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any


def text(value: Any) -> str:
    """Text from a run as Markdown shows it literally."""
    return html.escape(str(value), quote=False)


def cell(value: Any) -> str:
    """``text`` for one table cell."""
    return text(value).replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[Any], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A GitHub-flavoured Markdown table, one line per row, every cell escaped by ``cell``."""
    lines = [_row(header), "|" + "---|" * len(header)]
    return lines + [_row(row) for row in rows]


def _row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(cell(c) for c in cells) + " |"
