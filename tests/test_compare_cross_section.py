"""Between-run noise of one run per side read across the unchanged groups (compare.cross_section),
held to its error rates on seeded simulations, and checked on real runs of the sorting example.

The simulation is the history tests' (test_history_spread_controls): 15 groups, every group of
NEW moved by the host's drift (sd 0.08) and by its own between-run noise (sd 0.03 a run), 10
units a side. Here there is no history: the group's own noise must be read from the other
groups of the same two runs."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from compare_helpers import metewand, sorting_copy
from metewand.compare import cross_section, hierarchy, speed_sides
from metewand.compare.speed_sides import Unit
from test_history_spread_controls import OWN, RESAMPLES, Key, _judged, _pair

Pair = dict[Key, tuple[list[Unit], list[Unit]]]


def _across(every: Pair) -> dict[Key, hierarchy.BetweenRun]:
    """As ``compare`` reads them: each group judged alone first, then the spreads of the
    groups whose code is the same on both sides."""
    estimates = {}
    for key, sides in every.items():
        figures = speed_sides.figures(sides, None, None, RESAMPLES, 0)
        estimates[key] = (math.log(figures["ratio"]), figures["log_standard_error"])
    unchanged = {key for key, (_, new) in every.items() if new[0][4] == "same"}
    return cross_section.spreads(estimates, unchanged)


def _known(every: Pair) -> dict[Key, hierarchy.BetweenRun]:
    """The spreads the simulation drew from, as if known exactly."""
    own, drift = OWN**2, 0.08**2 / 2
    known = hierarchy.BetweenRun(own, math.inf, "known")
    return {key: hierarchy.BetweenRun(own + drift, math.inf, "known", known) for key in every}


def _trials(seed: int, planted: float, trials: int) -> dict[str, list[dict[str, Any]]]:
    rng = np.random.default_rng(seed)
    out: dict[str, list[dict[str, Any]]] = {"none": [], "across": [], "known": []}
    for _ in range(trials):
        every = _pair(rng, planted, 0.08)
        out["none"] += _judged(every, None, False)
        out["across"] += _judged(every, _across(every), True)
        out["known"] += _judged(every, _known(every), True)
    return out


def _coverage(groups: list[dict[str, Any]]) -> float:
    return statistics.fmean(g["ratio_ci95"][0] <= 1.0 <= g["ratio_ci95"][1] for g in groups)


def _alarmed(groups: list[dict[str, Any]]) -> int:
    chunks = [groups[i : i + 15] for i in range(0, len(groups), 15)]
    return sum(any(g["verdict"] != "no change" for g in chunk) for chunk in chunks)


def test_the_spread_across_groups_covers_where_one_runs_own_scatter_does_not() -> None:
    """A/A, 40 comparisons of 15 groups, no history: the CIs of each group's own processes
    cover far below 95% (seeds 71-74: 66-71%) and 16-22 comparisons raise an alarm. With the
    spread read across the other groups they cover 92.5-93.7% and 1-4 comparisons raise one:
    within a point of the same comparisons given the spread the simulation drew from
    (93.5-93.8%), whose shortfall from 95% is the 10-unit bootstrap's and 200 resamples'
    (2,000 read 91.8% and 93.5% on seeds 71 and 73)."""
    judged = _trials(71, 0.0, 40)
    assert _coverage(judged["none"]) < 0.85, _coverage(judged["none"])
    assert _alarmed(judged["none"]) >= 8, _alarmed(judged["none"])
    across, known = _coverage(judged["across"]), _coverage(judged["known"])
    assert 0.91 <= across <= 0.98, across
    assert across >= known - 0.025, (across, known)
    assert _alarmed(judged["across"]) <= 5, _alarmed(judged["across"])


def test_the_spread_across_groups_keeps_the_planted_change_found() -> None:
    """Implementation 0 20% slower with its code changed, 30 comparisons: its groups take no
    part in the spread, which stays the unchanged groups' own; the change is found in most of
    its groups and the others stay quiet."""
    judged = _trials(72, math.log(1.2), 30)
    planted = [g for g in judged["across"] if g["implementation"] == 0]
    found = statistics.fmean(g["verdict"] == "slower" for g in planted)
    assert found >= 0.65, found
    others = [g for g in judged["across"] if g["implementation"] != 0]
    assert sum(g["verdict"] != "no change" for g in others) <= 3


def test_heterogeneity_reads_the_moves_beyond_sampling_and_never_a_negative() -> None:
    """DerSimonian-Laird over 14 groups, 2,000 seeded draws: the mean estimate is within 10% of
    the true spread, around the weighted mean and around 0; with no spread it is floored at 0
    and stays small."""
    rng = np.random.default_rng(5)
    errors = rng.uniform(0.02, 0.05, 14)
    for tau in (0.0, 0.04):
        centred, raw = [], []
        for _ in range(2000):
            ys = 0.1 + rng.normal(0, np.sqrt(errors**2 + tau**2))
            centred.append(
                cross_section.heterogeneity(list(zip(ys, errors, strict=True)), centred=True)
            )
            raw.append(
                cross_section.heterogeneity(list(zip(ys - 0.1, errors, strict=True)), centred=False)
            )
        assert min(centred) >= 0 and min(raw) >= 0
        if tau:
            assert abs(statistics.fmean(centred) / tau**2 - 1) < 0.1, statistics.fmean(centred)
            assert abs(statistics.fmean(raw) / tau**2 - 1) < 0.1, statistics.fmean(raw)
        else:
            assert statistics.fmean(centred) < 0.2 * 0.035**2, statistics.fmean(centred)


def test_a_group_never_estimates_its_own_spread_and_too_few_others_leave_it_out() -> None:
    moved = {"a": (0.5, 0.01), **{f"g{i}": (0.01 * (-1) ** i, 0.02) for i in range(5)}}
    spreads = cross_section.spreads(moved, set(moved))
    assert spreads["a"].variance == 0.0  # its own 0.5 is not in its spread
    assert spreads["g0"].variance > 0.02  # the others' spread holds the moved group
    assert spreads["g0"].df == 5 and spreads["g0"].controlled is not None
    assert cross_section.spreads(moved, {"a", "g0", "g1", "g2"}) == {}


def test_real_runs_read_between_run_noise_across_groups(tmp_path: Path) -> None:
    """Two real runs of the sorting example, one run per side and no history: every group's
    between-run noise is read across the other unchanged groups, the report says so, and
    ``--no-cross-section`` leaves it not estimable as before."""
    manifest = sorting_copy(tmp_path, repetitions=5)
    runs = tmp_path / "runs"
    for run_id in ("base", "new"):
        metewand(
            "run",
            manifest,
            "--out",
            runs,
            "--cache-dir",
            tmp_path / "cache",
            "--run-id",
            run_id,
            "--quiet",
            "--no-history",
        )
    pair = (runs / "base", runs / "new", "--no-history", "--json")
    result = json.loads(metewand("compare", *pair).stdout)
    assert result["statistics"]["cross_section"]["status"] == "used"
    for group in result["groups"]:
        assert group["between_run"] == "external", group
        assert group["between_run_source"].startswith("across this comparison's 14 other"), group
    assert any("read across the unchanged groups" in w for w in result["warnings"])
    text = metewand("compare", *pair[:3]).stdout
    assert "--no-history: between-run noise of a side with one run read across" in text, text
    plain = json.loads(metewand("compare", *pair, "--no-cross-section").stdout)
    assert plain["statistics"]["cross_section"]["reason"] == "off (--no-cross-section)"
    assert {g["between_run"] for g in plain["groups"]} == {"not estimable"}
