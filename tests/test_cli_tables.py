"""Every terminal table goes through ``metewand.cli.tables``: off a terminal it is as wide as its
content (whatever COLUMNS says), on a narrow terminal a long cell folds instead of being cut."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table

from metewand.cli import tables

NAME = "scaling: distribution=reversed, size=20000 / c-mergesort-with-a-long-suffix"


def _table() -> Table:
    table = Table(title="per case")
    table.add_column("case")
    table.add_column("median")
    table.add_row(NAME, "19.1 ms (7.3-30.9)")
    return table


def test_off_a_terminal_the_table_keeps_its_natural_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    buffer = io.StringIO()
    tables.print_table(_table(), out=tables.console(file=buffer))
    lines = buffer.getvalue().splitlines()
    assert any(NAME in line for line in lines), buffer.getvalue()
    assert "…" not in buffer.getvalue()
    # natural width, not padded out to the console's ceiling
    assert max(len(line) for line in lines) < len(NAME) + 40


def test_on_a_narrow_terminal_a_long_cell_folds(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.StringIO()
    terminal = Console(file=buffer, force_terminal=True, width=40, color_system=None)
    tables.print_table(_table(), out=terminal)
    text = buffer.getvalue()
    assert "…" not in text
    first_cells = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    assert "".join(first_cells).replace(" ", "") == NAME.replace(" ", "")
