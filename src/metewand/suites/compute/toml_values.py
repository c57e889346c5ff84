"""TOML values as canonical JSON values (the Rust metewand's manifest value rule).

TOML dates and times, and non-finite or unsafe numbers, are outside the version-1 JSON domain;
``tomllib`` gives ``datetime``/``date``/``time`` objects and floats, which are checked here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from metewand import canonical

OUTSIDE_DOMAIN = "outside the version-1 Metewand JSON domain"


def domain_problem(value: Any) -> str | None:
    """Why ``value`` (parsed TOML) is not a canonical JSON value, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dt.datetime | dt.date | dt.time):
            return f"TOML date and time values are {OUTSIDE_DOMAIN}"
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    try:
        canonical.dumps(value)
    except canonical.CanonicalJSONError as exc:
        return f"{exc} ({OUTSIDE_DOMAIN})"
    except RecursionError:
        return "nested too deeply"
    return None
