"""The one JSON canonicaliser (RFC 8785) used for every record metewand writes.

It sits below every layer: it imports nothing from metewand but the error base.
"""

from __future__ import annotations

import json
from typing import Any

import rfc8785

from metewand.errors import InvalidInput

SAFE_INTEGER_MAX = 9_007_199_254_740_991
SAFE_INTEGER_MIN = -SAFE_INTEGER_MAX


class CanonicalJSONError(InvalidInput, ValueError):
    """A value cannot be expressed as canonical JSON."""


def dumps(value: Any) -> bytes:
    """Canonical bytes of ``value`` (no whitespace, sorted keys, no trailing newline)."""
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise CanonicalJSONError(str(exc)) from exc


def dumps_str(value: Any) -> str:
    return dumps(value).decode("utf-8")


def line(value: Any) -> bytes:
    """One JSON-Lines record: canonical bytes plus a newline."""
    return dumps(value) + b"\n"


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, val in pairs:
        if key in out:
            raise CanonicalJSONError(f"duplicate key {key!r}")
        out[key] = val
    return out


def _reject_constant(name: str) -> Any:
    raise CanonicalJSONError(f"non-finite number {name} is not JSON")


def loads(data: str | bytes) -> Any:
    """Parse JSON strictly: duplicate keys and NaN/Infinity are errors."""
    return json.loads(data, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)


def sha256_hex(value: Any) -> str:
    import hashlib  # here: measure's start-up need not load it

    return hashlib.sha256(dumps(value)).hexdigest()


def identity(kind: str, value: Any) -> str:
    """``mw1-<kind>-<sha256(kind || 0x00 || canonical JSON)>``."""
    import hashlib

    digest = hashlib.sha256(kind.encode("utf-8") + b"\x00" + dumps(value)).hexdigest()
    return f"mw1-{kind}-{digest}"
