"""Small HTML builders. Every piece of text passes through ``html.escape`` here, once.

Callers hand plain strings (task titles, reasons, engine names straight from the rows); only the
builders below produce markup, so a title like ``<script>`` can only ever become text.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from metewand.compare.fmt import unavailable

# No network, no scripts: the policy itself forbids fetches, so a stray URL cannot load.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

CSS = """
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--band:#f6f8fa;--bad:#b42318}
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:1100px;margin:0 auto;padding:12px}
h1{font-size:1.5em;margin:.4em 0}h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid var(--line)}
h3{font-size:1.05em;margin:1em 0 .3em}
.muted{color:var(--muted)}.bad{color:var(--bad)}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;margin:.4em 0;font-size:.92em}
th,td{border:1px solid var(--line);padding:3px 7px;text-align:left;vertical-align:top}
th{background:var(--band)}td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:.6em 0}figure img{max-width:100%;height:auto;border:1px solid var(--line)}
figcaption{font-size:.88em;color:var(--muted)}
code{font-size:.9em;word-break:break-all}
nav a{margin-right:.8em}
details{margin:.3em 0}summary{cursor:pointer;font-weight:600}
.verdict{border:1px solid var(--line);background:var(--band);padding:.3em .9em;margin:.6em 0}
.verdict ul{margin:.2em 0 .4em;padding-left:1.3em}
@media (max-width:600px){body{font-size:14px}main{padding:6px}th,td{padding:2px 4px}}
"""


@dataclass(frozen=True)
class Omitted:
    """A section with nothing to show: left out of the page and its navigation, and said in one
    line at the top (``reason``) so its absence is never a silent one."""

    title: str
    reason: str


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def cell_text(value: Any) -> str:
    """Plain text of a cell; None is shown as unavailable, never as 0 or blank."""
    if value is None:
        return unavailable("not recorded")
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for index, value in enumerate(row):
            cls = ' class="num"' if index in numeric else ""
            cells.append(f"<td{cls}>{esc(cell_text(value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested mappings as dotted key paths, in sorted order (stable tables)."""
    if isinstance(value, Mapping):
        out: list[tuple[str, Any]] = []
        for key in sorted(value, key=str):
            out += flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
        return out
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        out = []
        for index, item in enumerate(value):
            out += flatten(item, f"{prefix}[{index}]")
        return out
    if isinstance(value, list):
        return [(prefix, ", ".join(str(v) for v in value) if value else "(none)")]
    return [(prefix, value)]


def kv_table(value: Mapping[str, Any], empty: str) -> str:
    pairs = flatten(value)
    if not pairs:
        return paragraph(empty, "muted")
    return table(["field", "value"], pairs)


def paragraph(text: str, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<p{attr}>{esc(text)}</p>"


def figure(data_uri: str, alt: str, caption: str, ident: str) -> str:
    return (
        f'<figure><img id="{esc(ident)}" src="{esc(data_uri)}" alt="{esc(alt)}">'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
    )


def details(summary: str, body: str, is_open: bool = False) -> str:
    """A collapsible block (HTML's own, no script)."""
    return f"<details{' open' if is_open else ''}><summary>{esc(summary)}</summary>{body}</details>"


def bullet_list(items: Iterable[str]) -> str:
    return "<ul>" + "".join(f"<li>{esc(item)}</li>" for item in items) + "</ul>"


def section(ident: str, title: str, *parts: str) -> str:
    return f'<section id="{esc(ident)}"><h2>{esc(title)}</h2>{"".join(parts)}</section>'


def page(title: str, nav: Sequence[tuple[str, str]], body: str) -> str:
    links = "".join(f'<a href="#{esc(i)}">{esc(t)}</a>' for i, t in nav)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body><main><h1>{esc(title)}</h1><nav>{links}</nav>{body}</main></body></html>\n"
    )
