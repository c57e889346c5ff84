"""The one JSON canonicaliser (RFC 8785) used for every record metewand writes.

The value domain is the Rust metewand's version-1 canonical domain (its
``docs/canonical-json.md``): null, booleans, strings of Unicode scalar values, arrays, objects
with unique keys, integers within ±(2⁵³−1), and other finite binary64 numbers. A number whose
value is integral counts as an integer wherever it is spelled (``1e3``, ``9.0``), so an integral
binary64 outside the safe range (``9007199254740992.0``, ``1.7976931348623157e308``) is an
``unsafe_integer`` both when parsed and when written. Every error carries a ``kind`` from
``ERROR_KINDS``, the Rust fixtures' spelling.

It sits below every layer: it imports nothing from metewand but the error base.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import rfc8785

from metewand.errors import InvalidInput

SAFE_INTEGER_MAX = 9_007_199_254_740_991
SAFE_INTEGER_MIN = -SAFE_INTEGER_MAX

DUPLICATE_KEY = "duplicate_key"
UNSAFE_INTEGER = "unsafe_integer"
INVALID_NUMBER = "invalid_number"  # NaN, ±Infinity, binary64 overflow, a leading zero
INVALID_UNICODE = "invalid_unicode"  # a lone surrogate, bytes that are not UTF-8
INVALID_JSON = "invalid_json"  # any other syntax error, trailing values included
UNSUPPORTED_VALUE = "unsupported_value"  # writing a Python value JSON has no form for
ERROR_KINDS = (
    DUPLICATE_KEY,
    UNSAFE_INTEGER,
    INVALID_NUMBER,
    INVALID_UNICODE,
    INVALID_JSON,
    UNSUPPORTED_VALUE,
)

# A \uD800-\uDFFF escape: only then can a parsed string hold a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class CanonicalJSONError(InvalidInput, ValueError):
    """A value cannot be expressed as canonical JSON; ``kind`` says why (``ERROR_KINDS``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


class CanonicalSyntaxError(json.JSONDecodeError, CanonicalJSONError):
    """Not JSON at all (``invalid_json``, or ``invalid_number`` for a leading zero): still a
    ``json.JSONDecodeError`` with its line and column, for callers that report those."""

    def __init__(self, kind: str, msg: str, doc: str, pos: int) -> None:
        json.JSONDecodeError.__init__(self, msg, doc, pos)
        self.kind = kind


def dumps(value: Any) -> bytes:
    """Canonical bytes of ``value`` (no whitespace, sorted keys, no trailing newline)."""
    _check_floats(value)
    try:
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError as exc:
        raise CanonicalJSONError(UNSAFE_INTEGER, str(exc)) from exc
    except rfc8785.FloatDomainError as exc:
        raise CanonicalJSONError(INVALID_NUMBER, str(exc)) from exc
    except rfc8785.CanonicalizationError as exc:
        kind = INVALID_UNICODE if "UTF-8" in str(exc) else UNSUPPORTED_VALUE
        raise CanonicalJSONError(kind, str(exc)) from exc
    except (TypeError, ValueError) as exc:
        raise CanonicalJSONError(UNSUPPORTED_VALUE, str(exc)) from exc


def dumps_str(value: Any) -> str:
    return dumps(value).decode("utf-8")


def line(value: Any) -> bytes:
    """One JSON-Lines record: canonical bytes plus a newline."""
    return dumps(value) + b"\n"


def _check_floats(value: Any) -> None:
    """Integral binary64 values beyond the safe range have no canonical integer spelling."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            _check_float(item, repr(item))
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _check_float(number: float, spelling: str) -> None:
    if not math.isfinite(number):
        raise CanonicalJSONError(INVALID_NUMBER, f"{spelling} is not a finite binary64 number")
    if number.is_integer() and abs(number) > SAFE_INTEGER_MAX:
        raise CanonicalJSONError(
            UNSAFE_INTEGER, f"{spelling} is integral and outside ±{SAFE_INTEGER_MAX}"
        )


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, val in pairs:
        if key in out:
            raise CanonicalJSONError(DUPLICATE_KEY, f"duplicate key {key!r}")
        out[key] = val
    return out


def _reject_constant(name: str) -> Any:
    raise CanonicalJSONError(INVALID_NUMBER, f"non-finite number {name} is not JSON")


def _parse_int(spelling: str) -> int:
    number = int(spelling)
    if not SAFE_INTEGER_MIN <= number <= SAFE_INTEGER_MAX:
        raise CanonicalJSONError(UNSAFE_INTEGER, f"{spelling} is outside ±{SAFE_INTEGER_MAX}")
    return number


def _parse_float(spelling: str) -> float:
    number = float(spelling)
    _check_float(number, spelling)
    return number


def loads(data: str | bytes) -> Any:
    """Parse JSON strictly into the canonical domain (see the module's docstring)."""
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CanonicalJSONError(INVALID_UNICODE, f"not UTF-8 at byte {exc.start}") from exc
    else:
        text = data
    try:
        value = json.loads(
            text,
            object_pairs_hook=_reject_duplicates,
            parse_constant=_reject_constant,
            parse_int=_parse_int,
            parse_float=_parse_float,
        )
    except json.JSONDecodeError as exc:
        raise CanonicalSyntaxError(_syntax_kind(text, exc.pos), exc.msg, exc.doc, exc.pos) from exc
    if _SURROGATE_ESCAPE.search(text):
        _check_scalar_values(value)
    return value


def _syntax_kind(text: str, pos: int) -> str:
    """A digit right after a lone leading ``0`` is a malformed number, not a second value."""
    if 0 < pos < len(text) and text[pos].isdigit() and text[pos - 1] == "0":
        before = text[pos - 2] if pos >= 2 else " "
        if not (before.isdigit() or before in ".eE+"):
            return INVALID_NUMBER
    return INVALID_JSON


def _check_scalar_values(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            _check_string(item)
        elif isinstance(item, dict):
            for key, val in item.items():
                _check_string(key)
                stack.append(val)
        elif isinstance(item, list):
            stack.extend(item)


def _check_string(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalJSONError(
            INVALID_UNICODE, f"lone surrogate U+{ord(text[exc.start]):04X} is not a scalar value"
        ) from exc


def sha256_hex(value: Any) -> str:
    import hashlib  # here: measure's start-up need not load it

    return hashlib.sha256(dumps(value)).hexdigest()


def identity(kind: str, value: Any) -> str:
    """``mw1-<kind>-<sha256(kind || 0x00 || canonical JSON)>``."""
    import hashlib

    digest = hashlib.sha256(kind.encode("utf-8") + b"\x00" + dumps(value)).hexdigest()
    return f"mw1-{kind}-{digest}"
