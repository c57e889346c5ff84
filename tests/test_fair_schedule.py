"""Balanced rotation (property tests); the executor is tested in test_executor.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metewand.runtime.schedule import (
    Rotation,
    max_imbalance,
    position_counts,
    schedule,
    seed_offset,
)

ENGINE_NAMES = ["chrome", "lightpanda", "moli", "obscura", "servo"]


@settings(max_examples=300, deadline=None)
@given(
    n_engines=st.integers(min_value=1, max_value=5),
    seed=st.text(max_size=20),
    start=st.integers(min_value=0, max_value=500),
    window=st.integers(min_value=1, max_value=60),
)
def test_any_window_is_balanced(n_engines: int, seed: str, start: int, window: int) -> None:
    engines = ENGINE_NAMES[:n_engines]
    rotation = Rotation(tuple(engines), seed)
    orders = [rotation.order(i) for i in range(start, start + window)]
    counts = position_counts(orders)
    for engine in engines:
        for position in range(n_engines):
            assert counts[(engine, position)] in (window // n_engines, -(-window // n_engines))
    assert max_imbalance(orders, engines) <= 1


@settings(max_examples=100, deadline=None)
@given(n_engines=st.integers(min_value=1, max_value=5), seed=st.text(max_size=20))
def test_every_order_is_a_permutation_and_seed_sets_only_the_offset(
    n_engines: int, seed: str
) -> None:
    engines = tuple(ENGINE_NAMES[:n_engines])
    rotation = Rotation(engines, seed)
    first = rotation.order(0)
    assert sorted(first) == sorted(engines)
    # after the first round every order follows by one more left rotation
    for i in range(1, 12):
        prev, cur = rotation.order(i - 1), rotation.order(i)
        assert cur == prev[1:] + prev[:1]
    assert first.index(engines[0]) == (-seed_offset(seed)) % n_engines


def test_seed_offset_is_sha256_prefix_and_stable() -> None:
    # sha256("resource-calibration-v1") first 4 bytes, computed independently
    import hashlib

    digest = hashlib.sha256(b"resource-calibration-v1").digest()
    assert seed_offset("resource-calibration-v1") == int.from_bytes(digest[:4], "big")
    assert Rotation(("a", "b", "c"), "x").order(5) == Rotation(("a", "b", "c"), "x").order(5)
    offsets = {seed_offset(s) % 3 for s in ("s1", "s2", "s3", "s4", "s5", "s6", "s7")}
    assert len(offsets) > 1, "different seeds should not all give the same first round"


def test_imbalance_detects_an_unbalanced_order() -> None:
    orders = [("a", "b")] * 4
    assert max_imbalance(orders, ["a", "b"]) == 4


def test_schedule_slots_carry_round_and_position() -> None:
    rotation = Rotation(("chrome", "lightpanda"), "seed")
    slots = list(schedule(rotation, [("t1", 0), ("t1", 1), ("t2", 0)]))
    assert len(slots) == 6
    assert [s.round for s in slots] == [0, 0, 1, 1, 2, 2]
    assert slots[0].engine != slots[2].engine  # the second round swaps the order
    assert slots[1].order_field() == {"round": 0, "position": 1}


def test_rotation_rejects_bad_engine_lists() -> None:
    with pytest.raises(ValueError):
        Rotation((), "s")
    with pytest.raises(ValueError):
        Rotation(("a", "a"), "s")
