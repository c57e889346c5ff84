"""The canonicaliser's fast path gives rfc8785's bytes, and rfc8785's errors, on any value."""

from __future__ import annotations

import enum
import math
import random
import struct
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from metewand import canonical

# every float a row can hold, special ranges included: subnormals, exponents, integer values
floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.0, -0.0, 1e21, 1e-7, 1e-6, 1e16, 1e15, 123.0, 5e-324, 1.7976931348623157e308, 0.1, 1e20]
)
keys = st.text(max_size=6) | st.sampled_from(["a", "\ue000", "\U0001f600", "\U00010000x", "é"])
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=canonical.SAFE_INTEGER_MIN, max_value=canonical.SAFE_INTEGER_MAX)
    | floats
    | st.text()
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(keys, inner, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(values)
def test_fast_path_equals_rfc8785(value: Any) -> None:
    assert canonical.dumps(value) == rfc8785.dumps(value)


def test_random_float_bit_patterns_are_written_as_ecmascript_does() -> None:
    draw = random.Random(8785)
    values = [struct.unpack("<d", draw.getrandbits(64).to_bytes(8, "little"))[0]
              for _ in range(20000)]  # fmt: skip
    values = [v for v in values if not (math.isnan(v) or math.isinf(v))]
    # every exponent is as likely as any other: integers and short decimals get their own share
    values += [draw.randint(-(10**17), 10**17) / 10 ** draw.randint(0, 9) for _ in range(5000)]
    assert canonical.dumps(values) == rfc8785.dumps(values)


def test_the_fast_path_takes_a_typical_record() -> None:
    row = {"cpu_ms": 12.0, "ratio": 1.5e-7, "text": 'a "b" 12.0 1e5\n', "n": [1, 2.5, None, True]}
    assert canonical._fast_dumps(row) == rfc8785.dumps(row)


class _Word(enum.StrEnum):
    A = "a"


@pytest.mark.parametrize(
    "value",
    [
        {1: "int key"},
        {"big": 2**53},
        {"nan": math.nan},
        {"inf": -math.inf},
        {"lone": "\ud800"},
        {"astral \U0001f600": 1, "\ue000": 2},  # UTF-16 and code-point orders differ
        {"enum": _Word.A},
        {"set": {1, 2}},
    ],
)
def test_what_the_fast_path_refuses_takes_rfc8785(value: Any) -> None:
    assert canonical._fast_dumps(value) is None
    try:
        expected: bytes | None = rfc8785.dumps(value)
    except Exception:
        expected = None
    if expected is None:
        with pytest.raises(canonical.CanonicalJSONError):
            canonical.dumps(value)
    else:
        assert canonical.dumps(value) == expected
