"""The speed adjustment of interleaved A/B pairs (compare.speed_adjust) and the Walsh CI of one
run's pairs, held to their error rates on seeded simulations of this VM's process speeds:
false alarms on unchanged code, power on a planted change, CI coverage, and a probe that the
change itself moved. The real-process side (an interleaved run, compare --ab with and without
the adjustment) is in test_compare_verdicts.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metewand.compare import significance, speed_adjust, verdicts
from metewand.compare.speed_adjust import ProbedPair

GROUPS, PAIRS = 5, 10  # the sorting example: one implementation's 5 cases, 10 repetitions
PROBE = "phase.prepare.cpu_ns"


def _process_speeds(rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
    """Log slowness of fresh processes as measured here: most within a few percent, one in
    ten 30-45% slow through all of its phases (benchmarks/README.md, #22)."""
    slow = rng.random(size) < 0.1
    return np.where(slow, rng.uniform(0.30, 0.45, size), rng.normal(0.0, 0.03, size))


def _simulated(
    rng: np.random.Generator, effect: float, probe_shift: float = 0.0
) -> list[list[ProbedPair]]:
    """One implementation's groups of pairs: NEW's metric moved by ``effect`` (log), NEW's
    probe by ``probe_shift``; each process's speed moves both its metric and its probe."""
    groups = []
    for g in range(GROUPS):
        speed = _process_speeds(rng, (PAIRS, 2))
        level, probe_level = 3.0 + g, 1.0 + g / 2
        metric = level + speed + rng.normal(0, 0.03, (PAIRS, 2))
        probe = probe_level + speed + rng.normal(0, 0.06, (PAIRS, 2))
        metric[:, 1] += effect
        probe[:, 1] += probe_shift
        groups.append(
            [
                (0, f"r{i}", *np.exp(metric[i]).tolist(), *np.exp(probe[i]).tolist())
                for i in range(PAIRS)
            ]
        )
    return groups


def _log_ratios(pairs: list[tuple]) -> np.ndarray:
    return np.array([math.log(p[3] / p[2]) for p in pairs])


def _trials(
    effect: float, probe_shift: float = 0.0, trials: int = 300, seed: int = 0
) -> dict[str, list]:
    """Per group of every trial: the raw and adjusted p, and the adjusted Walsh CI (log)."""
    rng = np.random.default_rng(seed)
    out: dict[str, list] = {"raw": [], "adjusted": [], "ci": [], "moved": []}
    for _ in range(trials):
        groups = _simulated(rng, effect, probe_shift)
        fit = speed_adjust.fit(groups, PROBE)
        assert fit.applied, fit.reason
        out["moved"].append(fit.moved)
        for pairs in groups:
            raw = _log_ratios([p[:4] for p in pairs])
            adjusted = _log_ratios(speed_adjust.adjusted(pairs, fit))
            out["raw"].append(significance.signed_rank_test(raw))
            out["adjusted"].append(significance.signed_rank_test(adjusted))
            estimate, low, high = significance.walsh_interval(adjusted)
            ci = speed_adjust.widened(math.exp(estimate), [math.exp(low), math.exp(high)], fit)
            out["ci"].append((estimate, math.log(ci[0]), math.log(ci[1])))
    return out


def _rate(pvalues: list, alpha: float = 0.05) -> float:
    return float(np.mean([p <= alpha for p in pvalues]))


def test_unchanged_code_keeps_the_tests_level_close() -> None:
    found = _trials(effect=0.0, seed=1)
    # 1,500 groups: the exact test's level at 10 pairs is 0.049; the probe's estimated shift
    # costs the adjusted test some of it (speed_adjust's docstring), bounded here
    assert _rate(found["raw"]) <= 0.065
    assert _rate(found["adjusted"]) <= 0.09, _rate(found["adjusted"])


def test_a_planted_change_is_found_far_more_often_once_adjusted() -> None:
    found = _trials(effect=0.12, seed=2)
    raw, adjusted = _rate(found["raw"], 0.01), _rate(found["adjusted"], 0.01)
    assert adjusted >= 0.75, (raw, adjusted)
    assert adjusted >= raw + 0.3, (raw, adjusted)  # the slow processes no longer decide


def test_a_probe_moved_by_the_change_is_read_against_its_shift() -> None:
    """A new dataset loader: NEW's probe 10% slower. Read as the pairs' speed, it would call
    the unchanged metric faster in most groups; read against its shift, it does not, and a
    +12% change keeps its estimate."""
    unchanged = _trials(effect=0.0, probe_shift=0.10, seed=3)
    assert np.mean(unchanged["moved"]) >= 0.95  # reported as moved
    assert _rate(unchanged["adjusted"]) <= 0.09, _rate(unchanged["adjusted"])
    changed = _trials(effect=0.12, probe_shift=0.10, seed=4)
    assert _rate(changed["adjusted"], 0.01) >= 0.75
    centres = [ci[0] for ci in changed["ci"]]
    assert abs(float(np.median(centres)) - 0.12) < 0.01  # the estimate stays where it was


def _comparison(
    rng: np.random.Generator, planted: float, probe_shift: float, adjust: bool
) -> list[dict]:
    """The 15 judged groups of one simulated interleaved comparison: three implementations of
    five cases, the first slowed by ``planted`` (log)."""
    groups = []
    for impl in range(3):
        pairs_of = _simulated(rng, planted if impl == 0 else 0.0, probe_shift)
        fit = speed_adjust.fit(pairs_of, PROBE)
        for pairs in pairs_of:
            figures = speed_adjust.figures(pairs, fit if adjust else None, None, 200, 0)
            groups.append({**figures, "implementation": impl})
    verdicts.judge(groups, threshold=0.05, min_units=5, alpha=0.05)
    return groups


@pytest.mark.parametrize("probe_shift", [0.0, 0.03, 0.10])
def test_the_gate_on_simulated_comparisons(probe_shift: float) -> None:
    """Verdicts as compare gives them (CI beyond 5%, BH over 15 groups), with NEW's probe
    unmoved or moved. Of 100 A/A comparisons at most 2 raise an alarm (BH's 5% bounds the
    chance of any; ~1% seen). On 50 with one implementation +17%, the adjusted pairs find >= 80%
    of its groups (86-92% seen), 20 points more than the raw pairs (~42%), and flag no other."""
    rng = np.random.default_rng(11 + int(probe_shift * 100))
    alarmed = sum(
        any(g["verdict"] != "no change" for g in _comparison(rng, 0.0, probe_shift, True))
        for _ in range(100)
    )
    assert alarmed <= 2
    found, other = {True: 0, False: 0}, {True: 0, False: 0}
    for adjust in (True, False):
        for _ in range(50):
            for g in _comparison(rng, 0.16, probe_shift, adjust):
                if g["implementation"] == 0:
                    found[adjust] += g["verdict"] == "slower"
                else:
                    other[adjust] += g["verdict"] != "no change"
    assert found[True] >= 0.8 * 250, found
    assert found[True] >= found[False] + 50, found
    assert other[True] == 0, other


def test_walsh_ci_of_adjusted_pairs_covers_95_percent() -> None:
    found = _trials(effect=0.12, trials=200, seed=5)  # 1,000 groups
    covered = [low <= 0.12 <= high for _, low, high in found["ci"]]
    assert abs(float(np.mean(covered)) - 0.951) <= 0.02, np.mean(covered)


@pytest.mark.parametrize("n", [6, 10, 23])
def test_walsh_interval_is_the_signed_rank_tests_inversion(n: int) -> None:
    """A shift inside the CI is one the two-sided signed-rank test keeps at 5%; one outside,
    one it rejects (probed just inside and outside both ends)."""
    rng = np.random.default_rng(n)
    for _ in range(20):
        d = rng.standard_t(3, n) * 0.1
        estimate, low, high = significance.walsh_interval(d)
        assert low <= estimate <= high
        for bound, inward in ((low, 1), (high, -1)):
            inside = significance.signed_rank_test(d - (bound + inward * 1e-9))
            outside = significance.signed_rank_test(d - (bound - inward * 1e-9))
            assert inside > 0.05 >= outside, (n, inside, outside)


def test_walsh_interval_needs_six_pairs() -> None:
    assert significance.walsh_interval([0.1, 0.2, 0.15, 0.12, 0.3]) is None


def test_no_adjustment_without_enough_pairs_or_a_probe() -> None:
    rng = np.random.default_rng(7)
    few = [_simulated(rng, 0.0)[0][:9]]
    assert speed_adjust.fit(few, PROBE).reason == "9 pairs < 10 to fit the slope"
    few = [_simulated(rng, 0.0)[0][:10]]
    run, pair, base, new, base_probe, _ = few[0][3]
    few[0][3] = (run, pair, base, new, base_probe, None)
    missing = speed_adjust.fit(few, PROBE)
    assert not missing.applied
    assert missing.reason == f"9 pairs (1 without a {PROBE}) < 10 to fit the slope"


def test_a_pair_whose_probe_read_zero_is_left_unadjusted_and_the_rest_fitted() -> None:
    """A prepare shorter than the scheduler's tick can be charged 0 CPU: that pair takes no part
    in the fit and is left as it was; the others are adjusted as before."""
    rng = np.random.default_rng(8)
    groups = _simulated(rng, 0.0)
    run, pair, base, new, base_probe, _ = groups[0][3]
    groups[0][3] = (run, pair, base, new, base_probe, 0.0)
    fit = speed_adjust.fit(groups, PROBE)
    assert fit.applied and fit.unprobed == 1 and fit.units == GROUPS * PAIRS
    whole = speed_adjust.fit(
        [g for i, g in enumerate(groups) if i != 0] + [groups[0][:3] + groups[0][4:]], PROBE
    )
    assert math.isclose(fit.beta or 0, whole.beta or 1)  # the unprobed pair adds nothing
    out = speed_adjust.adjusted(groups[0], fit)
    assert out[3] == (run, pair, base, new)
    assert out[2][3] != groups[0][2][3]
