"""metewand.markdown: one escaping rule for every Markdown table and every run text in one."""

from __future__ import annotations

from metewand import markdown


def test_a_cell_cannot_end_its_cell_its_row_or_open_a_tag() -> None:
    lines = markdown.table(["a|b", "<i>"], [["x|y\nz", "<script>&amp;"], [1, None]])
    assert lines == [
        "| a\\|b | &lt;i&gt; |",
        "|---|---|",
        "| x\\|y z | &lt;script&gt;&amp;amp; |",
        "| 1 | None |",
    ]
    assert all(line.count(" | ") == 1 for line in lines if not line.startswith("|-"))


def test_text_keeps_line_breaks_and_escapes_html() -> None:
    assert markdown.text("a < b\nc | d") == "a &lt; b\nc | d"
