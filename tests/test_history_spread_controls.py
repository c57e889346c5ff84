"""The history's between-run spread read against the controls (history.spread_controls), held to
its error rates on seeded simulations and checked on a real DuckDB history.

A history of runs on one host moves every group of a run alike (the host's drift) and each
group a little on its own (its own between-run noise). ``compare`` reads a group of two new
runs against the drift its controls read (compare.controls), so the spread it must add is the
group's own, not the drift's: the plain spread counts the drift a second time and costs power.
Without any history the group's own between-run noise is missing and the CIs cover too
seldom. The controlled spread keeps both: coverage near 95%, no false alarms beyond the
test's level, and the planted change found."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import polygamma

from metewand.compare import controls, hierarchy, speed_sides, verdicts
from metewand.compare.speed_sides import Unit
from metewand.history import spread, spread_controls, spread_moderate, synthetic
from metewand.history.store import reading

IMPLEMENTATIONS, CASES, UNITS, HISTORY_RUNS, RESAMPLES = 3, 5, 10, 20, 200
DRIFT, OWN, WITHIN = 0.08, 0.03, 0.03  # sd (log) of the host's drift, a group's own, a unit's
Key = tuple[int, int]  # case, implementation
# bootstrap resamples of each CI: compare's default is 2000; 200 keep the tests fast and cost
# about 1-2 points of coverage (noisier tails), so the coverage bounds below are on 200


def _history(
    rng: np.random.Generator, drift: float, runs: int
) -> dict[tuple[str, str, str], spread_controls.Levels]:
    """Run means of every group over ``runs`` earlier runs, no probe."""
    series: dict[tuple[str, str, str], spread_controls.Levels] = {}
    drifts = rng.normal(0, drift, runs)
    for impl in range(IMPLEMENTATIONS):
        for case in range(CASES):
            own = rng.normal(0, OWN, runs)
            within = rng.normal(0, WITHIN / math.sqrt(UNITS), runs)
            levels = 3.0 + case + drifts + own + within
            series[("m", str(case), str(impl))] = {
                f"r{r}": (float(levels[r]), None) for r in range(runs)
            }
    return series


def _betweens(
    rng: np.random.Generator, drift: float, runs: int = HISTORY_RUNS
) -> dict[Key, hierarchy.BetweenRun]:
    """Each group's spread, plain with its controlled one inside, as the history gives it
    (``history.spread.spreads_of``: each run's own sampling share taken out, moderated) and
    ``compare_history`` hands it on."""
    series = _history(rng, drift, runs)
    share = (WITHIN**2 / UNITS, 0.0, 0.0)  # a run mean's own sampling variance
    within = {key: {run: share for run in levels} for key, levels in series.items()}
    out = {}
    for key, one in spread.spreads_of(series, within, controls.MIN_CONTROL_GROUPS).items():
        assert one.controlled is not None and one.df is not None
        other = one.controlled
        controlled = hierarchy.BetweenRun(other.variance, other.df or 0.0, "controlled")
        out[(int(key[1]), int(key[2]))] = hierarchy.BetweenRun(
            one.variance, one.df, "plain", controlled=controlled
        )
    return out


def _run(rng: np.random.Generator, run: int, level: float, code: str) -> list[Unit]:
    values = level + rng.normal(0, WITHIN, UNITS)
    return [(run, f"l{i}", math.exp(values[i]), None, code) for i in range(UNITS)]


def _pair(
    rng: np.random.Generator, planted: float, drift_sd: float, fixed: float = 0.0
) -> dict[Key, tuple[list[Unit], list[Unit]]]:
    """BASE and NEW, one run each: NEW's host drifted (sd ``drift_sd``, plus ``fixed``), every
    group moved on its own in each, implementation 0 ``planted`` slower (log) with its code
    changed."""
    drift = rng.normal(0, drift_sd) + fixed
    out = {}
    for impl in range(IMPLEMENTATIONS):
        code = "changed" if impl == 0 and planted else "same"
        for case in range(CASES):
            level = 3.0 + case
            base = _run(rng, 0, level + rng.normal(0, OWN), "same")
            shift = drift + rng.normal(0, OWN) + (planted if impl == 0 else 0.0)
            out[(case, impl)] = (base, _run(rng, 1, level + shift, code))
    return out


def _judged(
    every: dict[Key, tuple[list[Unit], list[Unit]]],
    betweens: dict[Key, hierarchy.BetweenRun] | None,
    controlled: bool,
    choose: bool = False,
) -> list[dict[str, Any]]:
    """As ``compare`` judges two runs: alone with the plain spread, then each group read
    against its controls with the controlled spread (or the plain one, as before this); with
    ``choose``, not the implementations whose history says the controls add noise."""

    def figures(key: Key, drift: float | None = None) -> dict[str, Any]:
        base, new = every[key]
        between = betweens[key] if betweens else None
        if drift is not None:
            new = [(r, u, v / drift, p, c) for r, u, v, p, c in new]
            if controlled and between is not None:
                between = between.controlled
        return speed_sides.figures((base, new), None, between, RESAMPLES, 0)

    first = {key: figures(key) for key in every}
    codes = {
        str(impl): [u[4] for case in range(CASES) for s in every[(case, impl)] for u in s]
        for impl in range(IMPLEMENTATIONS)
    }

    def decline(impl: str, drift: float) -> str | None:
        if not choose or not betweens:
            return None
        spreads = []
        for case in range(CASES):
            b = betweens[(case, int(impl))]
            assert b.controlled is not None
            spreads.append((b.variance, b.controlled.variance))
        return controls.history_against(spreads, drift)

    again, _ = controls.read_against_controls(
        first,
        {key: str(key[1]) for key in every},
        {key for key in every if str(key[1]) in controls.unchanged(codes)},
        figures,
        decline,
    )
    first.update(again)
    groups = [{**f, "implementation": key[1]} for key, f in first.items()]
    verdicts.judge(groups, threshold=0.05, min_units=5, alpha=0.05)
    return groups


def _trials(
    seed: int,
    planted: float,
    trials: int,
    drift: float = DRIFT,
    pair_drift: float | None = None,
    runs: int = HISTORY_RUNS,
) -> dict[str, list[dict[str, Any]]]:
    """``drift``: sd of the host's drift in the history, and between the compared runs unless
    ``pair_drift`` (a fixed drift of NEW, log) is given."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[dict[str, Any]]] = {
        "none": [],
        "plain": [],
        "controlled": [],
        "chosen": [],
    }
    for _ in range(trials):
        betweens = _betweens(rng, drift, runs)
        every = _pair(rng, planted, drift if pair_drift is None else 0.0, pair_drift or 0.0)
        out["none"] += _judged(every, None, False)
        out["plain"] += _judged(every, betweens, False)
        out["controlled"] += _judged(every, betweens, True)
        out["chosen"] += _judged(every, betweens, True, choose=True)
    return out


def test_the_controlled_spread_covers_and_stays_quiet_where_none_and_plain_fail() -> None:
    """A/A, 40 comparisons of 15 groups: without a history the group's own between-run noise
    is missing (coverage far below 95%, false alarms); with the controlled spread the CIs
    cover 93-98% and at most 3 comparisons in 40 raise any alarm (seeds 31, 41, 51 read
    0.948-0.955 and 0-2)."""
    judged = _trials(31, 0.0, 40)

    def coverage(groups: list[dict[str, Any]]) -> float:
        return statistics.fmean(g["ratio_ci95"][0] <= 1.0 <= g["ratio_ci95"][1] for g in groups)

    def alarmed(groups: list[dict[str, Any]]) -> int:
        chunks = [groups[i : i + 15] for i in range(0, len(groups), 15)]
        return sum(any(g["verdict"] != "no change" for g in chunk) for chunk in chunks)

    assert coverage(judged["none"]) < 0.85, coverage(judged["none"])
    assert alarmed(judged["none"]) >= 8, alarmed(judged["none"])
    assert 0.93 <= coverage(judged["controlled"]) <= 0.98, coverage(judged["controlled"])
    assert alarmed(judged["controlled"]) <= 3, alarmed(judged["controlled"])


def test_the_controlled_spread_keeps_the_power_the_plain_one_loses() -> None:
    """Implementation 0 20% slower, 30 comparisons: found in most of its groups with the
    controlled spread (seeds 32 and 42: 84% and 73%; each group's own between-run noise,
    sd 0.03 a run, is real noise that must be paid for), where the plain one (the drift
    counted twice) finds 5-12%; the other implementations stay quiet."""
    judged = _trials(32, math.log(1.2), 30)

    def found(groups: list[dict[str, Any]]) -> float:
        planted = [g for g in groups if g["implementation"] == 0]
        return statistics.fmean(g["verdict"] == "slower" for g in planted)

    assert found(judged["controlled"]) >= 0.65, found(judged["controlled"])
    assert found(judged["plain"]) <= 0.30, found(judged["plain"])
    others = [g for g in judged["controlled"] if g["implementation"] != 0]
    assert sum(g["verdict"] != "no change" for g in others) <= 3


def test_a_run_short_of_controls_is_left_out_and_the_probe_is_read_alike() -> None:
    series: dict[tuple[str, str, str], spread_controls.Levels] = {
        ("m", "c", "a"): {"r1": (1.0, 2.0), "r2": (2.0, 3.0), "r3": (3.0, 7.0)},
        ("m", "c", "b"): {"r1": (0.0, 0.0), "r2": (1.0, 0.5), "r3": (2.0, 1.0)},
        ("m", "d", "b"): {"r1": (5.0, 1.0), "r2": (6.0, 1.5)},
        ("x", "c", "b"): {"r3": (9.0, None)},  # another metric: never a control
    }
    centred = spread_controls.centred(series)
    left = spread_controls.residuals(("m", "c", "a"), centred, 2)
    # r3 had one control group of metric m, r1 and r2 two: their medians -0.75 and +0.25
    # (levels), -0.375 and +0.125 (probes, centred on 0.5 and 1.25)
    assert set(left) == {"r1", "r2"}
    assert left["r1"] == (-1.0 + 0.75, -2.0 + 0.375)
    assert left["r2"] == (0.0 - 0.25, -1.0 - 0.125)
    variance, probe_variance, covariance = spread_controls.moments(list(left.values()))
    assert (variance, probe_variance, covariance) == (0.0, 0.125, 0.0)
    assert spread_controls.moments([(1.0, None), (2.0, 0.5)])[1:] == (None, None)


def test_the_history_gives_each_group_its_spread_less_the_runs_drift(tmp_path: Path) -> None:
    """A real DuckDB history of 30 runs x 15 groups (5 implementations): every run moves all
    groups by a shared drift (sd 0.10), each attempt by its own noise (sd 0.03, 3 a run). The
    plain spread holds the drift; the controlled one, each run's own sampling taken out, next
    to nothing."""
    path = tmp_path / "history.duckdb"
    synthetic.build(path, 30, 15, sigma=0.03, drift=0.10, seed=0.25)
    base = spread.RunIdentity("later", "compute", None, None)
    with reading(path) as con:
        found = spread.group_spreads(con, base, [], ["cpu_time_ns"], None, 3)
    assert len(found) == 15
    own = 0.03**2 / 3
    for key, spread_of in found.items():
        assert spread_of.runs == 30 and spread_of.controlled is not None, key
        assert spread_of.variance > 10 * own, (key, spread_of)
        assert spread_of.controlled.runs == 30
    ratios = [s.controlled.variance / own for s in found.values() if s.controlled]
    # no group moves on its own between runs here: with each run's own sampling share (the
    # run mean's variance, ``own``) taken out, little is left but the drift estimate's noise
    assert statistics.median(ratios) < 0.5, ratios
    assert min(ratios) > 0  # floored, never a spread of zero
    with reading(path) as con:
        plain = spread.group_spreads(con, base, [], ["cpu_time_ns"])
        clean = spread.group_spreads(con, base, [], ["cpu_time_ns"], clean_only=["cpu_time_ns"])
    assert all(s.controlled is None for s in plain.values())
    # the synthetic runs 3, 10, 17 and 24 failed their host pollution gate
    assert {s.runs for s in clean.values()} == {26}


def _found(groups: list[dict[str, Any]]) -> float:
    return statistics.fmean(g["verdict"] == "slower" for g in groups if g["implementation"] == 0)


def test_where_the_host_does_not_drift_the_history_declines_the_controls() -> None:
    """No shared drift, each group's own between-run noise only: reading against the controls
    adds their noise and removes nothing. The history sees it (each implementation moves
    less alone than against its controls' drift in most trials), and the comparison that
    follows it finds the planted +20% more often than one forced to the controls (seeds 33
    and 43: 81% and 77% against 76% and 73%); with the drift of the other tests, or a still
    history and compared runs 10% apart, the controls are kept and nothing is lost."""
    still = _trials(33, math.log(1.2), 30, drift=0.0)
    assert _found(still["chosen"]) >= _found(still["controlled"]) + 0.02, (
        _found(still["chosen"]),
        _found(still["controlled"]),
    )
    drifting = _trials(34, math.log(1.2), 20)
    assert abs(_found(drifting["chosen"]) - _found(drifting["controlled"])) <= 0.03
    # a still history, but the compared runs 10% apart: a move the history never saw, which
    # only the controls remove; judged alone the planted change would read +8% and be missed
    moved = _trials(36, math.log(1.2), 20, drift=0.0, pair_drift=math.log(0.9))
    assert abs(_found(moved["chosen"]) - _found(moved["controlled"])) <= 0.03
    for judged, most in ((still, 3), (drifting, 3), (moved, 5)):
        # of 300 or 200 unchanged groups judged (seeds 33, 34, 36: 2, 1 and 4)
        others = [g for g in judged["chosen"] if g["implementation"] != 0]
        assert sum(g["verdict"] != "no change" for g in others) <= most


def test_the_history_says_why_it_declines_and_keeps_the_controls_against_a_drift() -> None:
    assert controls.history_against([], 0.0) is None
    assert controls.history_against([(0.004, 0.001), (0.002, 0.003)], 0.0) is None
    noisier = [(0.0009, 0.0016), (0.0009, 0.0016)]
    reason = controls.history_against(noisier, math.log(0.99))
    assert reason is not None and "(log sd 0.030)" in reason and "(0.040)" in reason
    assert "x0.990" in reason
    # the controls add 2 x 0.0007 to a difference of two runs; a drift whose square is
    # larger (|log| > 0.037) biases the group judged alone more than that
    assert controls.history_against(noisier, math.log(0.96)) is None
    assert controls.history_against(noisier, math.log(1.04)) is None
    assert controls.history_against(noisier, math.log(1.035)) is not None


def test_short_histories_cover_as_well_once_moderated() -> None:
    """6 earlier runs (5 df a group; moderated by the other 14 groups): A/A CIs cover 95.3-96.0%
    at 200 resamples (seeds 61, 62). With 4 runs, 93.8-95.3% (seeds 71-73; no history at all:
    66%). Before the spreads were moderated ahead of taking out the runs' own share, 4 runs
    covered 90.7-92.0% here (92.7-92.8% at 2000 resamples)."""
    judged = _trials(61, 0.0, 40, runs=6)
    inside = statistics.fmean(
        g["ratio_ci95"][0] <= 1.0 <= g["ratio_ci95"][1] for g in judged["chosen"]
    )
    assert inside >= 0.93, inside
    short = _trials(71, 0.0, 40, runs=4)
    inside = statistics.fmean(
        g["ratio_ci95"][0] <= 1.0 <= g["ratio_ci95"][1] for g in short["chosen"]
    )
    assert inside >= 0.93, inside


def test_a_short_historys_moderated_spread_is_not_pulled_below_the_truth() -> None:
    """Over 100 seeded histories of 4 runs, the moderated controlled spread averages what the
    raw one does less the runs' own share (it read 7% below that when the differences were
    moderated: a shifted chi-square is not what the prior models)."""
    rng = np.random.default_rng(1)
    moderated, expected = [], []
    share = (WITHIN**2 / UNITS, 0.0, 0.0)
    for _ in range(100):
        series = _history(rng, DRIFT, 4)
        within = {key: {run: share for run in levels} for key, levels in series.items()}
        centred = spread_controls.centred(series)
        for key, one in spread.spreads_of(series, within, controls.MIN_CONTROL_GROUPS).items():
            assert one.controlled is not None and not one.shares
            moderated.append(one.controlled.variance)
            left = spread_controls.residuals(key, centred, controls.MIN_CONTROL_GROUPS)
            expected.append(spread_controls.moments(list(left.values()))[0] - share[0])
    ratio = statistics.fmean(moderated) / statistics.fmean(expected)
    assert 0.97 <= ratio <= 1.06, ratio


def test_a_runs_own_sampling_share_is_taken_out_and_floored() -> None:
    shares = [(0.0004, 0.0001, 0.00005), (0.0002, 0.0001, 0.00005)]
    variance, probe, covariance = spread_controls.between((0.001, 0.0005, 0.0002), shares)
    assert math.isclose(variance, 0.0007) and math.isclose(probe, 0.0004)  # type: ignore[arg-type]
    assert math.isclose(covariance, 0.00015)  # type: ignore[arg-type]
    floored = spread_controls.between((0.0002, None, None), shares)
    assert floored == (spread_controls.FLOOR * 0.0002, None, None)


def test_the_prior_is_fitted_to_how_alike_the_groups_spreads_are() -> None:
    """Sample variances drawn around one true variance give a large prior df and its value;
    drawn around true variances that differ tenfold, a small one: each group keeps its own."""
    rng = np.random.default_rng(5)
    for y in (0.05, 1.0, 30.0):
        x = spread_moderate._trigamma_inverse(y)
        assert math.isclose(float(polygamma(1, x)), y, rel_tol=1e-6)
    df = 4.0
    alike = [0.001 * rng.chisquare(df) / df for _ in range(200)]
    fitted = spread_moderate.prior(alike, [df] * 200)
    assert fitted is not None and fitted.df > 50 and abs(fitted.variance / 0.001 - 1) < 0.1
    truths = rng.choice([0.0003, 0.003], 200)
    apart = [t * rng.chisquare(df) / df for t in truths]
    fitted = spread_moderate.prior(apart, [df] * 200)
    assert fitted is not None and fitted.df < 10, fitted
    value, total = spread_moderate.moderated(0.004, df, fitted.variance, fitted)
    assert total == fitted.df + df and fitted.variance < value < 0.004
    assert spread_moderate.prior([0.001, 0.002, 0.003], [3.0] * 3) is None  # too few groups
