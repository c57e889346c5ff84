"""Pure matcher for CDP event payloads (used by ``CdpClient.wait_for_event`` and the checks).

Rules (decided here, tested in tests/test_browser_cdp.py):

- ``None`` as the whole pattern matches anything (no filter). Inside a pattern, ``None`` is a
  JSON ``null`` and matches only ``null``.
- A dict whose only key is ``"$one_of"`` (value: a list) matches when any alternative matches.
- Any other dict matches a dict holding at least its keys, each value matching recursively
  (extra keys in the value are ignored: subset match).
- A list matches a list of the SAME length element by element (index-wise). This is the task
  corpus's semantics; an unordered "contains" list match would accept events the corpus authors'
  harness rejects, so results would not be comparable.
- Scalars compare by JSON equality: numbers by value (``1 == 1.0``), but booleans never equal
  numbers (Python's ``True == 1`` is not JSON's).
"""

from __future__ import annotations

from typing import Any

from metewand.errors import InvalidInput

ONE_OF = "$one_of"


class PatternError(InvalidInput, ValueError):
    """A pattern is malformed (e.g. ``$one_of`` mixed with other keys or not a list)."""


def is_one_of(pattern: Any) -> bool:
    return isinstance(pattern, dict) and ONE_OF in pattern


def matches(pattern: Any, value: Any) -> bool:
    """True when ``value`` satisfies ``pattern`` (see the module docstring)."""
    if pattern is None:
        return True
    return _match(pattern, value)


def _match(pattern: Any, value: Any) -> bool:
    if is_one_of(pattern):
        return any(_match(alt, value) for alt in _alternatives(pattern))
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            return False
        return all(key in value and _match(sub, value[key]) for key, sub in pattern.items())
    if isinstance(pattern, list):
        if not isinstance(value, list) or len(pattern) != len(value):
            return False
        return all(_match(p, v) for p, v in zip(pattern, value, strict=True))
    return _scalar_equal(pattern, value)


def _alternatives(pattern: dict[str, Any]) -> list[Any]:
    if len(pattern) != 1:
        raise PatternError(f"{ONE_OF} must be the only key, got {sorted(pattern)}")
    alternatives = pattern[ONE_OF]
    if not isinstance(alternatives, list):
        raise PatternError(f"{ONE_OF} takes a list, got {type(alternatives).__name__}")
    return alternatives


def _scalar_equal(pattern: Any, value: Any) -> bool:
    if isinstance(pattern, bool) or isinstance(value, bool):
        return isinstance(pattern, bool) and isinstance(value, bool) and pattern == value
    if isinstance(value, dict | list):
        return False
    return bool(pattern == value)
