"""The one JSON canonicaliser (RFC 8785) used for every record metewand writes.

It sits below every layer: it imports nothing from metewand but the error base.

Two paths give the same bytes. The fast one (``_fast_dumps``) walks the value once to check it
holds only what the standard library's C encoder writes exactly as RFC 8785 does: plain dicts
with string keys inside the Basic Multilingual Plane (UTF-16 and code-point key order agree
there), lists and tuples, strings (both escape exactly ``"``, ``\\`` and control characters, in
the same short and ``\\u00xx`` forms), integers within the safe range, booleans, null and
finite floats; then ``json.dumps`` writes it with sorted keys and no whitespace. A float whose
Python repr differs from ECMAScript's number form (an exponent, or a trailing ``.0``) is
rewritten in the text, outside strings, by ``_es_number``. Anything else (a subclass, a key that
is not a string or holds a character beyond U+FFFF, a big integer, NaN, a lone surrogate) takes
the reference implementation, rfc8785, which also raises its errors. rfc8785 writes a row of a
browser attempt ~4x slower than this (``tests/test_canonical_fast.py`` holds the two to the
same bytes on random values).
"""

from __future__ import annotations

import json
import re
from typing import Any

import rfc8785

from metewand.errors import InvalidInput

SAFE_INTEGER_MAX = 9_007_199_254_740_991
SAFE_INTEGER_MIN = -SAFE_INTEGER_MAX


class CanonicalJSONError(InvalidInput, ValueError):
    """A value cannot be expressed as canonical JSON."""


def dumps(value: Any) -> bytes:
    """Canonical bytes of ``value`` (no whitespace, sorted keys, no trailing newline)."""
    fast = _fast_dumps(value)
    if fast is not None:
        return fast
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise CanonicalJSONError(str(exc)) from exc


class _Slow(Exception):
    """The value needs the reference implementation."""


_ENCODE = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
).encode
_STRING = re.compile(r'("(?:[^"\\]|\\.)*")')
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _fast_dumps(value: Any) -> bytes | None:
    try:
        odd = _scan(value)
        text = _ENCODE(value)
        return (_rewrite_numbers(text) if odd else text).encode("utf-8")
    except (_Slow, UnicodeEncodeError, ValueError, TypeError, RecursionError):
        return None


def _scan(value: Any) -> bool:
    """Check ``value`` for the fast path (raise ``_Slow`` when it cannot take it); True when a
    float's repr is not its ECMAScript form."""
    kind = type(value)
    if kind is dict:
        odd = False
        for key, item in value.items():
            if type(key) is not str or (not key.isascii() and _ASTRAL.search(key)):
                raise _Slow
            odd = _scan(item) or odd
        return odd
    if kind is list or kind is tuple:
        odd = False
        for item in value:
            odd = _scan(item) or odd
        return odd
    if kind is str:
        return False
    if kind is int:
        if not SAFE_INTEGER_MIN <= value <= SAFE_INTEGER_MAX:
            raise _Slow
        return False
    if kind is float:
        if value != value or value in (_INF, -_INF):
            raise _Slow
        text = float.__repr__(value)
        return "e" in text or text.endswith(".0")
    if value is None or kind is bool:
        return False
    raise _Slow


_INF = float("inf")


def _rewrite_numbers(text: str) -> str:
    """Every float outside strings in its ECMAScript form (integers stay as they are)."""
    parts = _STRING.split(text)
    for i in range(0, len(parts), 2):  # even parts lie between strings
        if "." in parts[i] or "e" in parts[i]:
            parts[i] = _NUMBER.sub(_es_token, parts[i])
    return "".join(parts)


def _es_token(match: re.Match[str]) -> str:
    token = match.group(0)
    return _es_number(float(token)) if "." in token or "e" in token else token


def _es_number(value: float) -> str:
    """ECMAScript's Number::toString of a finite float (RFC 8785 section 3.2.2.3), from
    Python's shortest round-trip repr: the same digits, placed by ECMAScript's rules."""
    if value == 0:
        return "0"
    text = float.__repr__(value)
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + int(exponent or 0)  # value = 0.<digits> x 10^point
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        body = f"0.{'0' * -n}{digits}"
    else:
        e = n - 1
        head = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        body = f"{head}e{'+' if e > 0 else '-'}{abs(e)}"
    return sign + body


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
