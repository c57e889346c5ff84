"""The one JSON canonicaliser (RFC 8785) used for every record metewand writes.

The value domain is the Rust metewand's version-1 canonical domain (its
``docs/canonical-json.md``): null, booleans, strings of Unicode scalar values, arrays, objects
with unique keys, integers within ±(2⁵³−1), and other finite binary64 numbers. A number whose
value is integral counts as an integer wherever it is spelled (``1e3``, ``9.0``), so an integral
binary64 outside the safe range (``9007199254740992.0``, ``1.7976931348623157e308``) is an
``unsafe_integer`` both when parsed and when written. Every error carries a ``kind`` from
``ERROR_KINDS``, the Rust fixtures' spelling.

It sits below every layer: it imports nothing from metewand but the error base.

Two paths give the same bytes. The fast one (``_fast_dumps``) walks the value once to check it
holds only what the standard library's C encoder writes exactly as RFC 8785 does: plain dicts
with string keys inside the Basic Multilingual Plane (UTF-16 and code-point key order agree
there), lists and tuples, strings (both escape exactly ``"``, ``\\`` and control characters, in
the same short and ``\\u00xx`` forms), integers within the safe range, booleans, null and
finite floats that are not integral beyond it; then ``json.dumps`` writes it with sorted keys
and no whitespace. A float whose Python repr differs from ECMAScript's number form (an
exponent, or a trailing ``.0``) is rewritten in the text, outside strings, by ``_es_number``.
In a process that asked for it (``use_orjson``), orjson writes instead: byte for byte what
``json.dumps`` writes on those values, with the floats to rewrite put in as fragments of their
ECMAScript form.
A value as JSON parsing makes it (``dumps_parsed``: a CDP frame) skips the walk where orjson
is in use: orjson writes it with strict integers, and a search of its bytes for what may be a
float to rewrite or a key beyond U+FFFF sends it down the path above instead.
Anything else (a subclass, a key that is not a string or holds a character beyond U+FFFF, a big
integer, a float outside the domain, a lone surrogate) takes the reference implementation,
rfc8785, after the domain checks that name its errors. rfc8785 writes a row of a browser
attempt ~4x slower than this (``tests/test_canonical_fast.py`` holds the two to the same bytes
on random values).
"""

from __future__ import annotations

import json
import math
import re

from metewand.errors import InvalidInput

# Every Python worker imports this module (through metewand.worker), so its import time is
# charged to each worker's start-up: typing (~10 ms with what it pulls in) is for the type
# checker only, and rfc8785 (~4 ms) is loaded on the slow path that needs it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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
    fast = _fast_dumps(value)
    if fast is not None:
        return fast
    _check_floats(value)
    import rfc8785

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


class _Slow(Exception):
    """The value needs the reference implementation."""


_ENCODE = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
).encode
_STRING = re.compile(r'("(?:[^"\\]|\\.)*")')
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


# orjson, once a long-lived process asked for it (``use_orjson``); None: the standard library's
_orjson: Any = None


def use_orjson() -> bool:
    """Write with orjson from now on in this process: the same bytes (what the fast path takes
    is still decided by ``_scan``, and orjson writes such a value as the standard library's
    encoder does), ~10x faster on a browser attempt's phases record (11 against 124 µs). Its
    import takes ~20 ms (it loads uuid, dataclasses and inspect), which is why a short-lived
    process (a worker, ``metewand measure``) keeps the standard library's encoder and only a
    harness that writes records for a whole run asks for this. False when orjson is missing."""
    global _orjson
    try:
        import orjson
    except ImportError:
        return False
    _orjson = orjson
    return True


def _fast_dumps(value: Any) -> bytes | None:
    try:
        odd = _scan(value)
        if _orjson is not None:
            data = _orjson_dumps(_with_es_floats(value) if odd else value)
            if data is not None:
                return data
        text = _ENCODE(value)
        return (_rewrite_numbers(text) if odd else text).encode("utf-8")
    except (_Slow, UnicodeEncodeError, ValueError, TypeError, RecursionError):
        return None


def _with_es_floats(value: Any) -> Any:
    """``value`` with each float whose repr is not its ECMAScript form in that form, as an orjson
    fragment (written as it is): cheaper than rewriting the text, which must step around every
    string (~1.2 ms on a CDP log record of ~100 KB, against a walk of its few nodes)."""
    kind = type(value)
    if kind is dict:
        return {key: _with_es_floats(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [_with_es_floats(item) for item in value]
    if kind is float:
        text = float.__repr__(value)
        if "e" in text or text.endswith(".0"):
            return _orjson.Fragment(_es_number(value).encode("ascii"))
    return value


def _orjson_dumps(value: Any) -> bytes | None:
    try:
        return _orjson.dumps(value, option=_orjson.OPT_SORT_KEYS)  # type: ignore[no-any-return]
    except _orjson.JSONEncodeError:  # nested deeper than orjson's limit (254): the stdlib's
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
        if not math.isfinite(value) or (value.is_integer() and abs(value) > SAFE_INTEGER_MAX):
            raise _Slow  # the reference path names the error
        text = float.__repr__(value)
        return "e" in text or text.endswith(".0")
    if value is None or kind is bool:
        return False
    raise _Slow


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


# In orjson's bytes, what may be a float not in ECMAScript's form (an exponent; an integral
# float's ".0", last or before a delimiter) or a key whose order UTF-16 and code points disagree
# on (a character beyond U+FFFF: a 4-byte UTF-8 sequence). A match inside a string is harmless:
# the checked path is only taken, not needed.
_MAYBE_NOT_CANONICAL = re.compile(rb"[0-9]e|\.0(?:[,\]}]|$)|[\xf0-\xf4]")


def dumps_parsed(value: Any) -> bytes:
    """``dumps`` of a value as JSON parsing makes it (dicts with string keys, lists, strings,
    integers, finite floats, booleans, null: a CDP message), without ``_scan``'s walk, which is
    most of the cost of a large one. orjson writes it with strict integers; its bytes are
    canonical unless they hold a float to rewrite or a key beyond the Basic Multilingual Plane,
    which a search of the bytes finds (or something that only looks like one, in a string);
    then, or without orjson, or for what orjson refuses, ``dumps``. Other types are not
    checked here (orjson would write a UUID or an enum member): give those to ``dumps``."""
    if _orjson is not None:
        try:
            data: bytes = _orjson.dumps(
                value, option=_orjson.OPT_SORT_KEYS | _orjson.OPT_STRICT_INTEGER
            )
        except _orjson.JSONEncodeError:  # a big integer, a surrogate, nested too deep
            return dumps(value)
        if not _MAYBE_NOT_CANONICAL.search(data):
            return data
    return dumps(value)


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
