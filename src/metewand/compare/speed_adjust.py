"""Interleaved A/B pairs adjusted for the speed each worker process happened to run at.

Why: on a VM a fresh process runs at a speed of its own, through all of its phases. In the
sorting example's interleaved runs here, one worker process in ten ran 40-45% slower than its
neighbours on the same work, and with 10 pairs that one process decides a pair's sign, whichever
side it falls on. Pairing cannot cancel it: the two halves of a pair are two processes.

A phase that does the same work in both halves of a pair shows that speed. The compute worker's
``prepare`` (it loads the case's dataset, before the timer's execute) is such a phase: over the
pairs of 10 A/A and 5 planted runs the log ratios of execute CPU and prepare CPU correlated 0.43-0.82 per
implementation. So each pair's log ratio ``d`` (NEW/BASE of the metric) is adjusted by its
probe's log ratio ``z``: ``d - β z``, a regression adjustment on a covariate, as CUPED does with
a pre-experiment metric (Deng et al., WSDM 2013). It removes the part of the scatter that the
process speed explains and leaves the estimate where it was.

- ``β`` per implementation, pooled over its groups: the least-squares slope of ``d`` on ``z``
  inside each group (so a real change of the metric does not bend it), clipped to [0, 1].
- The change under test may move the probe too (a new dataset loader; here, an A/A pair of C
  binaries built in two trees read 5.6% apart in prepare). So a pair's ``z`` is read against
  the probe's own shift over the implementation's pairs (their Hodges–Lehmann ratio): a pair's
  speed is how far its probe ratio lies from the others', and a probe that moved as a whole
  moves nothing. The shift is an estimate and carries noise common to every pair, which costs
  the signed-rank test some of its level (7-8% in place of 5% in the simulations); the
  verdict's other condition, the CI beyond the threshold, absorbs it: 0 group alarms in 200
  simulated A/A comparisons of 15 groups, with the probe unmoved or moved 3% or 10%. Testing
  the probe first and centring only when it moved kept the level under a still probe but
  let a moved one through whenever that test missed it (4-5 alarms in the same simulations),
  so it is not done. A probe moved by different amounts in different groups of one
  implementation is not undone; the probe's shift and p are reported per implementation.
- Too few pairs to fit ``β`` (fewer than ``MIN_PAIRS``), or pairs without the probe: no
  adjustment, said.

Under unchanged code every pair's ``(d, z)`` is as likely negated (the sides are exchangeable);
``β`` and the centre are fitted over many pairs, so the signed-rank test of the adjusted values
keeps its level closely but not exactly: ``tests/test_speed_adjust.py`` holds its false-alarm
rate, its power and its CI coverage to seeded simulations of this VM's process speeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from metewand.compare import hierarchy, significance, verdicts

MIN_PAIRS = 10  # pooled over an implementation's groups, to fit one slope
Z_975 = 1.959963984540054
MOVED_P = 0.05  # the probe's own signed-rank p below which it is reported as moved
# (run, pair, base value, new value, base probe, new probe): probes None where absent
ProbedPair = tuple[Hashable, Hashable, float, float, float | None, float | None]


@dataclass(frozen=True)
class Fit:
    """One implementation's adjustment: applied with ``beta``, or not, and why."""

    probe: str
    units: int  # pairs, or (separate runs) units of both sides, of its groups
    beta: float | None = None
    probe_ratio: float | None = None  # NEW/BASE of the probe itself (Hodges–Lehmann)
    probe_p: float | None = None  # its signed-rank p
    centre_se: float = 0.0  # the standard error of log(probe_ratio), from its Walsh CI
    reason: str | None = None  # why not applied; None: applied
    # separate runs, a changed implementation: the host's drift between the sides (NEW/BASE of
    # the probe) read from the implementations whose code did not change (compare.speed_sides)
    host_drift: float | None = None
    # pairs (units) without a positive probe: left out of the fit and left unadjusted
    unprobed: int = 0

    @property
    def applied(self) -> bool:
        return self.reason is None

    @property
    def moved(self) -> bool:
        return self.probe_p is not None and self.probe_p < MOVED_P

    @property
    def centre(self) -> float:
        """The probe ratio a pair's own is read against: the probe's shift."""
        return self.probe_ratio or 1.0

    def as_json(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "applied": self.applied,
            "units": self.units,
            "beta": self.beta,
            "probe_ratio": self.probe_ratio,
            "probe_p": self.probe_p,
            "probe_moved": self.moved,
            "host_drift": self.host_drift,
            "unprobed": self.unprobed,
            "reason": self.reason,
        }


def probed(pair: ProbedPair) -> bool:
    """Whether a pair has positive values and probes on both sides. A probe can read 0 where
    the pair has one: a prepare shorter than the scheduler's tick may be charged no CPU (the
    kernel charges a running task at a tick or a switch). Such a pair takes no part in the
    fit and is left unadjusted, rather than costing its implementation the adjustment."""
    _, _, base, new, base_probe, new_probe = pair
    if base_probe is None or new_probe is None:
        return False
    return min(base, new, base_probe, new_probe) > 0


def _logs(pairs: Iterable[ProbedPair]) -> tuple[np.ndarray, np.ndarray]:
    """(d, z) of the pairs that have a probe."""
    d, z = [], []
    for _, _, base, new, base_probe, new_probe in filter(probed, pairs):
        assert base_probe is not None and new_probe is not None
        d.append(math.log(new / base))
        z.append(math.log(new_probe / base_probe))
    return np.asarray(d), np.asarray(z)


def fit(groups: Sequence[Sequence[ProbedPair]], probe: str) -> Fit:
    """The adjustment of one implementation from the pairs of its groups."""
    present = [entry for entry in (_logs(pairs) for pairs in groups) if len(entry[0])]
    total = sum(len(pairs) for pairs in groups)
    count = sum(len(d) for d, _ in present)
    unprobed = total - count
    if count < MIN_PAIRS:
        without = f" ({unprobed} without a {probe})" if unprobed else ""
        return Fit(
            probe,
            total,
            reason=f"{count} pairs{without} < {MIN_PAIRS} to fit the slope",
            unprobed=unprobed,
        )
    z_all = np.concatenate([z for _, z in present])
    shift = significance.walsh_interval(z_all)
    assert shift is not None  # MIN_PAIRS >= WALSH_MIN_PAIRS
    centre, low, high = shift
    known: dict[str, Any] = {
        "probe_ratio": math.exp(centre),
        "probe_p": significance.signed_rank_test(z_all),
        "centre_se": (high - low) / (2 * Z_975),
        "unprobed": unprobed,
    }
    across = sum(float(((z - z.mean()) ** 2).sum()) for _, z in present)
    if across <= 0:
        return Fit(probe, total, reason=f"its {probe} did not vary", **known)
    along = sum(float(((d - d.mean()) * (z - z.mean())).sum()) for d, z in present)
    return Fit(probe, total, beta=min(max(along / across, 0.0), 1.0), **known)


def widened(ratio: float, ci: Sequence[float], fit: Fit) -> list[float]:
    """The CI of an adjusted ratio widened by the probe shift's own uncertainty, which moves
    every pair of the implementation alike and so is not in the pairs' spread: each half-width
    (log scale) combined in quadrature with 1.96 β se(centre)."""
    assert fit.beta is not None
    return widened_by(ratio, ci, fit.beta * fit.centre_se)


def widened_by(ratio: float, ci: Sequence[float], se: float) -> list[float]:
    """``ci`` around ``ratio`` with each half-width (log scale) combined in quadrature with
    1.96 ``se``: a noise common to every unit of the group, so not in their spread."""
    extra = (Z_975 * se) ** 2
    estimate = math.log(ratio)
    low = estimate - math.sqrt((estimate - math.log(ci[0])) ** 2 + extra)
    high = estimate + math.sqrt((math.log(ci[1]) - estimate) ** 2 + extra)
    return [math.exp(low), math.exp(high)]


def adjusted(
    pairs: Sequence[ProbedPair], fit: Fit
) -> list[tuple[Hashable, Hashable, float, float]]:
    """The pairs with NEW rescaled by the pair's speed (its probe ratio against the probe's
    shift) to the power ``-beta``."""
    assert fit.beta is not None
    out = []
    for one in pairs:
        run, pair, base, new, base_probe, new_probe = one
        if not probed(one):  # no speed to read: left as it was
            out.append((run, pair, base, new))
            continue
        assert base_probe is not None and new_probe is not None
        speed = new_probe / base_probe / fit.centre
        out.append((run, pair, base, new * speed**-fit.beta))
    return out


def pooled(groups: Mapping[Any, Any], pool_of: Callable[[Any], str]) -> dict[str, list[Any]]:
    """The groups' data by pool (an implementation: ``pool_of(group)``), in name order."""
    pools: dict[str, list[Any]] = {}
    for key, data in groups.items():
        pools.setdefault(pool_of(key), []).append(data)
    return dict(sorted(pools.items()))


def fits_by(
    groups: Mapping[Any, Sequence[ProbedPair]], pool_of: Callable[[Any], str], probe: str
) -> dict[str, Fit]:
    """One fit per pool (an implementation) over the groups that ``pool_of(group)`` names."""
    return {name: fit(members, probe) for name, members in pooled(groups, pool_of).items()}


def with_unadjusted(adjusted: dict[str, Any], raw: Mapping[str, Any], fit: Fit) -> dict[str, Any]:
    """``adjusted``'s figures, with the adjustment and the unadjusted ratio, CI and p beside."""
    adjusted["speed_adjustment"] = {
        "probe": fit.probe,
        "beta": fit.beta,
        "unadjusted": {k: raw.get(k) for k in ("ratio", "ratio_ci95", "p_value")},
    }
    return adjusted


def figures(
    probed: Sequence[ProbedPair],
    fit: Fit | None,
    between: hierarchy.BetweenRun | None,
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """A group's paired figures, adjusted when ``fit`` applies (its CI ``widened``), with the
    unadjusted ratio, CI and p beside."""
    plain = [(run, pair, base, new) for run, pair, base, new, _, _ in probed]
    raw = verdicts.paired_figures(plain, between, resamples, seed)
    if fit is None or fit.beta is None or not probed:
        return raw
    out = verdicts.paired_figures(adjusted(probed, fit), between, resamples, seed)
    if out.get("ratio_ci95"):
        out["ratio_ci95"] = widened(out["ratio"], out["ratio_ci95"], fit)
    return with_unadjusted(out, raw, fit)
