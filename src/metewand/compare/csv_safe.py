"""Spreadsheet-safe CSV cells: every CSV metewand writes goes through :func:`safe_cell`.

Row values come from places a benchmark does not control (a page's answer, an engine's error
text, a worker's message). A spreadsheet opening ``results.csv`` would evaluate a cell starting
with ``=``, ``+``, ``-`` or ``@`` (and some treat a leading tab or carriage return the same way)
as a formula, e.g. ``=HYPERLINK(...)`` or a DDE command. The usual defence of spreadsheet-safe
exporters is applied: such a text cell gets a leading apostrophe, which spreadsheets show as
text and do not evaluate. Raw control characters are written as visible ``\\xNN`` escapes, so a
cell can neither smuggle a formula after a control byte nor break a line-oriented reader.

Numbers stay numbers: a Python ``int``/``float`` is written as its plain decimal form (``-3.5``
stays ``-3.5``), and so is a text cell that is exactly a decimal number literal.
"""

from __future__ import annotations

import re
from typing import Any, Final

FORMULA_TRIGGERS: Final = ("=", "+", "-", "@", "\t", "\r")
# C0 controls, DEL and C1 controls; the escape is visible and never starts a formula.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(value: Any) -> str:
    """The text of one CSV cell: empty for None, ``true``/``false``, numbers as they are."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return safe_text(str(value))


def safe_text(text: str) -> str:
    if _NUMBER.fullmatch(text):
        return text
    if text.startswith(FORMULA_TRIGGERS):
        text = "'" + text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
