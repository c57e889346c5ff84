"""The canonicaliser's fast path gives rfc8785's bytes on any value of the canonical domain, and
leaves every other value to the checked path and its errors."""

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


def in_domain(number: float) -> bool:
    """Finite, and not integral beyond ±(2^53-1) (those are unsafe_integer errors)."""
    return math.isfinite(number) and not (
        number.is_integer() and abs(number) > canonical.SAFE_INTEGER_MAX
    )


# every float a row can hold, special ranges included: subnormals, exponents, integer values
floats = st.floats(allow_nan=False, allow_infinity=False).filter(in_domain) | st.sampled_from(
    [0.0, -0.0, 1e-7, 1e-6, 1e15, 9007199254740991.0, 123.0, 5e-324, 0.1, 1.5e15 + 0.5, 2.5e-300]
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


@pytest.fixture(params=["json", "orjson"], autouse=True)
def encoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs on both writers of the fast path: the standard library's encoder (a
    worker's) and orjson (a run's, ``canonical.use_orjson``)."""
    monkeypatch.setattr(canonical, "_orjson", None)
    if request.param == "orjson":
        assert canonical.use_orjson()
    return str(request.param)


@settings(max_examples=300, deadline=None)
@given(values)
def test_fast_path_equals_rfc8785(value: Any) -> None:
    assert canonical.dumps(value) == rfc8785.dumps(value)


def test_a_value_nested_deeper_than_orjson_goes_is_written_all_the_same() -> None:
    value: Any = 1.5e-7
    for _ in range(300):  # orjson refuses more than 254 levels; the standard library's does not
        value = [value]
    assert canonical._fast_dumps(value) == rfc8785.dumps(value)


def random_floats(seed: int) -> list[float]:
    """20,000 random bit patterns (every exponent as likely as any other), then integers and
    short decimals, which get their own share."""
    draw = random.Random(seed)
    values = [
        struct.unpack("<d", draw.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(20000)
    ]
    values += [draw.randint(-(10**17), 10**17) / 10 ** draw.randint(0, 9) for _ in range(5000)]
    return values


def test_random_float_bit_patterns_are_written_as_ecmascript_does() -> None:
    values = random_floats(8785)
    beyond = [v for v in values if math.isfinite(v) and not in_domain(v)]
    values = [v for v in values if in_domain(v)]
    assert len(values) > 10000 and len(beyond) > 1000  # both classes are well drawn
    assert canonical.dumps(values) == rfc8785.dumps(values)
    for number in beyond[:200]:
        assert canonical._fast_dumps([number]) is None
        with pytest.raises(canonical.CanonicalJSONError) as caught:
            canonical.dumps([number])
        assert caught.value.kind == canonical.UNSAFE_INTEGER


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
        {"integral float beyond 2^53": 9007199254740992.0},
        {"largest float": -1.7976931348623157e308},
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
        floats_in_domain = all(in_domain(v) for v in value.values() if type(v) is float)
        expected: bytes | None = rfc8785.dumps(value) if floats_in_domain else None
    except Exception:
        expected = None
    if expected is None:
        with pytest.raises(canonical.CanonicalJSONError):
            canonical.dumps(value)
    else:
        assert canonical.dumps(value) == expected


# what JSON parsing makes: a CDP message (no tuples, no other types)
parsed_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None)
@given(parsed_values)
def test_a_parsed_value_is_written_as_rfc8785_does_without_the_walk(value: Any) -> None:
    assert canonical.dumps_parsed(value) == rfc8785.dumps(value)


def test_parsed_floats_of_every_exponent_are_written_as_ecmascript_does() -> None:
    values = random_floats(8786)
    values += [float(f"1e{e}") for e in range(-330, 310)] + [
        float(f"1.5e{e}") for e in range(-320, 300)
    ]
    inside = [v for v in values if in_domain(v)]
    assert canonical.dumps_parsed(inside) == rfc8785.dumps(inside)
    for number in inside[:3000]:  # one at a time: each float's own form, not a list's
        assert canonical.dumps_parsed({"x": number}) == rfc8785.dumps({"x": number})
    for number in [v for v in values if math.isfinite(v) and not in_domain(v)][:200]:
        with pytest.raises(canonical.CanonicalJSONError) as caught:
            canonical.dumps_parsed([number])
        assert caught.value.kind == canonical.UNSAFE_INTEGER


def test_a_typical_cdp_message_skips_the_walk(
    encoder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = {
        "id": 7,
        "result": {"nodes": [{"nodeId": 1, "x": 12.5, "name": "A é \u2603"}], "t": 1765.25},
        "sessionId": "AB12",
    }
    expected = rfc8785.dumps(message)

    def walked(value: Any) -> bool:
        raise AssertionError("the value was walked")

    monkeypatch.setattr(canonical, "_scan", walked)
    if encoder == "orjson":
        assert canonical.dumps_parsed(message) == expected
    else:  # a process without orjson writes it the checked way
        with pytest.raises(AssertionError, match="walked"):
            canonical.dumps_parsed(message)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ({"big": 2**53}, canonical.UNSAFE_INTEGER),
        ({"lone": "\ud800"}, canonical.INVALID_UNICODE),
        ({"integral": 1e300}, canonical.UNSAFE_INTEGER),
    ],
)
def test_what_a_parsed_value_may_not_hold_still_fails_by_name(value: Any, kind: str) -> None:
    with pytest.raises(canonical.CanonicalJSONError) as caught:
        canonical.dumps_parsed(value)
    assert caught.value.kind == kind


def test_a_key_beyond_the_bmp_is_ordered_as_utf16_orders_it() -> None:
    value = {"\U0001f600": 1, "\ue000": 2, "a": [1.0, {"\U00010000x": None}]}
    assert canonical.dumps_parsed(value) == rfc8785.dumps(value)
