"""Property: the weighted-median bootstrap equals np.median over explicitly gathered resamples."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metewand.compare import stats

# small integers give many ties; the + 0.0 below turns -0.0 into 0.0, whose sign np.median
# (a partition) and a sort may pick differently although the two compare equal
finite = st.one_of(
    st.integers(-5, 5).map(float),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
)
clusters = st.lists(st.lists(finite, min_size=1, max_size=6), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(groups=clusters, resamples=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_fast_bootstrap_equals_gathered_medians(
    groups: list[list[float]], resamples: int, seed: int
) -> None:
    arrays = [np.asarray(g, dtype=float) + 0.0 for g in groups]
    chosen = stats._draw(len(arrays), resamples, seed)
    gathered = np.array([np.median(np.concatenate([arrays[c] for c in row])) for row in chosen])
    fast = stats._resampled_medians(arrays, chosen)
    assert fast.tobytes() == gathered.tobytes()  # bit-identical, even and odd totals alike


@pytest.mark.parametrize("cells", [1, 2, 7])
@settings(max_examples=40, deadline=None)
@given(groups=clusters, seed=st.integers(0, 1000))
def test_any_grid_and_chunk_size_gives_the_same_medians(
    cells: int, groups: list[list[float]], seed: int
) -> None:
    arrays = [np.asarray(g, dtype=float) + 0.0 for g in groups]
    chosen = stats._draw(len(arrays), 30, seed)
    expected = stats._looped_resampled_medians(arrays, chosen)
    saved = stats.BOOTSTRAP_GRID_CELLS, stats.BOOTSTRAP_CHUNK_VALUES
    stats.BOOTSTRAP_GRID_CELLS, stats.BOOTSTRAP_CHUNK_VALUES = cells, 7
    try:
        fast = stats._resampled_medians(arrays, chosen)
    finally:
        stats.BOOTSTRAP_GRID_CELLS, stats.BOOTSTRAP_CHUNK_VALUES = saved
    assert fast.tobytes() == expected.tobytes()
