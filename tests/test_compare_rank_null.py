"""compare.rank_null against scipy.stats on seeded random data: the exact rank-sum and
signed-rank p-values, mid-ranks and Benjamini–Hochberg must be scipy's own answers (scipy stays
the reference here; compare leaves it out only for its ~2 s import), and ``metewand compare``
must not import scipy.stats."""

from __future__ import annotations

import subprocess
import sys
from math import comb

import numpy as np
import pytest
from scipy import stats

from metewand.compare import rank_null, significance

TRIALS = 600


def test_the_rank_sum_counts_cover_every_split_once() -> None:
    for m in range(0, 8):
        for n in range(m, 10):
            counts = rank_null._rank_sum_counts(m, n)
            assert sum(counts) == comb(m + n, m) and min(counts) >= 0, (m, n)
            assert list(counts) == list(reversed(counts))  # U is symmetric about m*n/2


def test_exact_p_values_are_scipys() -> None:
    rng = np.random.default_rng(20261202)
    for _ in range(TRIALS):
        m, n = (int(v) for v in rng.integers(1, 16, 2))
        shift = rng.normal() * 0.7
        x, y = rng.normal(size=m) + shift, rng.normal(size=n)
        expected = stats.mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue
        assert rank_null.rank_sum_p(x, y) == pytest.approx(expected, abs=1e-12), (x, y)
        d = rng.normal(size=int(rng.integers(1, 30))) + shift
        expected = stats.wilcoxon(d, alternative="two-sided", method="exact").pvalue
        assert rank_null.signed_rank_p(d) == pytest.approx(expected, abs=1e-12), d


def test_mid_ranks_and_benjamini_hochberg_are_scipys() -> None:
    rng = np.random.default_rng(7)
    for _ in range(TRIALS):
        tied = rng.integers(0, 6, size=int(rng.integers(1, 15))).astype(float)
        assert rank_null.average_ranks(tied).tolist() == pytest.approx(stats.rankdata(tied))
        p = rng.uniform(size=int(rng.integers(1, 25))) ** 3
        expected = stats.false_discovery_control(p, method="bh")
        assert rank_null.benjamini_hochberg(p) == pytest.approx(expected.tolist(), abs=1e-15)
    assert rank_null.benjamini_hochberg([]) == []


def test_large_samples_use_the_permutation_test_and_agree_with_the_exact_one() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=150) + 0.3, rng.normal(size=150)
    assert x.size * y.size > significance.EXACT_TABLE_LIMIT
    sampled = significance.rank_sum_test(y, x, seed=1)
    exact = stats.mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue
    assert sampled is not None and abs(sampled - exact) < 0.01  # 9,999 seeded splits


def test_compare_does_not_import_scipy_stats() -> None:
    probe = (
        "import sys\nfrom metewand.compare import significance\n"
        "significance.rank_sum_test([1, 2, 3], [4, 5, 6])\n"
        "significance.signed_rank_test([0.1, 0.2, -0.05])\n"
        "significance.adjusted([0.01, None, 0.2])\n"
        "print('scipy.stats' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
