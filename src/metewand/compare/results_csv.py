"""results.csv: one line per attempt row, as ``metewand export --format csv`` and ``metewand report
--format csv`` write it. Nested objects become dotted columns; a measurement form always gets its
status, value and reason columns (and source when it has one); every cell and column name goes
through ``csv_safe.safe_cell``.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from metewand import canonical
from metewand.compare.csv_safe import safe_cell

FORM_STATUSES = frozenset({"complete", "partial", "unavailable"})
FORM_KEYS = ("status", "value", "reason")
LEADING_COLUMNS = ("key", "status", "attempt")


def _is_form(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("status") in FORM_STATUSES
        and set(value) <= {*FORM_KEYS, "source"}
    )


def flatten(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects become dotted columns; measurement forms always get all three columns."""
    flat: dict[str, Any] = {}
    for name, value in row.items():
        column = f"{prefix}{name}"
        if _is_form(value):
            for key in FORM_KEYS:
                flat[f"{column}.{key}"] = value.get(key)
            if "source" in value:
                flat[f"{column}.source"] = value["source"]
        elif isinstance(value, dict) and value:
            flat.update(flatten(value, prefix=f"{column}."))
        elif isinstance(value, (dict, list)):
            flat[column] = canonical.dumps_str(value)
        else:
            flat[column] = value
    return flat


def rows_to_csv(rows: list[dict[str, Any]]) -> str:
    flat_rows = [flatten(row) for row in rows]
    seen = {column for flat in flat_rows for column in flat}
    columns = [c for c in LEADING_COLUMNS if c in seen]
    columns += sorted(seen - set(columns))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    # Column names come from row keys (a page's observations too): neutralised like cells.
    writer.writerow([safe_cell(c) for c in columns])
    for flat in flat_rows:
        writer.writerow([safe_cell(flat.get(c)) for c in columns])
    return buffer.getvalue()
