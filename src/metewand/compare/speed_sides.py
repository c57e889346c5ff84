"""Separate runs adjusted for the speed each worker process ran at, read from its prepare phase
(``SuiteKind.speed_probe_of``; compute: prepare's wall for a wall metric, its CPU for a CPU one).

Two runs of unchanged code differ by more than the scatter of their processes: the host ran
slower during one of them (a neighbour VM, a burner beside it), and every process of that run
slowed alike, its prepare phase with it. Within a run, one fresh process in ten runs 40-45% slow.
The probe reads both. So each unit's value ``v`` (one worker process's) is rescaled by its probe
``p``: ``v (p / p_ref)^-β``, ``β`` the least-squares slope of log v on log p inside each
(group, side, run) cell, pooled over the implementation's groups and clipped to [0, 1]; ``p_ref``
is a constant (the group's median probe), which the ratio does not see. Not centred on the
probe's shift between the sides, unlike the pairs of ``speed_adjust``: that shift is the drift
this removes.

That is right only when the probe's shift can come from the host alone: an implementation whose
code is the same on both sides, every row of its groups carrying one implementation identity
(``SuiteKind.code_of``; compute: the implementation configuration, which pins its sources,
build and environment). A changed implementation may have changed its prepare: each of its
sides is read against its own median probe (what the code did to the probe stays out), and
NEW is then moved by the host's drift that the unchanged implementations' probes read (the
median of their groups' probe shifts; ``Fit.host_drift``). With no unchanged implementation
in the comparison it is judged unadjusted, with the reason.

The history's between-run spread (``cli.compare_history``), when it comes with the probe's
run-level moments, is taken for the adjusted metric too (``adjusted_between``).

Measured on two kept work dirs of ``benchmarks/compare_false_alarms.py`` (10 A/A pairs and 5
planted runs each), without / with the run history, before -> after:
- A/A group false alarms (of 150): 4 -> 0 and 3 -> 0 / 3 -> 0 and 0 -> 0;
- unchanged implementations' groups flagged in the planted runs, wall: 4 -> 0 and 3 -> 0 /
  0 -> 0 and 2 -> 0; CPU: 0 -> 0 and 3 -> 0 / 0 -> 0 and 1 -> 0;
- the planted implementation's 25 groups found, wall: 19 -> 21 and 21 -> 22 / 16 -> 19 and
  18 -> 19; CPU: 24 -> 25 and 22 -> 22 / 17 -> 19 and 19 -> 20.
The method (the probes, the borrowed drift) was chosen on these two work dirs. On a third, out of
sample, the runs drifted more than prepare saw: 11 and 4 unchanged groups (wall, CPU) were still
flagged in its planted runs, against 13 and 6 unadjusted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from metewand.compare import hierarchy, verdicts
from metewand.compare.speed_adjust import MIN_PAIRS, Fit, pooled, with_unadjusted

# (run, launch, value, probe, code): one unit of a side; probe and code None where absent
Unit = tuple[Hashable, Hashable, float, float | None, str | None]
Sides = tuple[Sequence[Unit], Sequence[Unit]]  # (BASE, NEW) of one group


def _cells(sides: Sides) -> list[tuple[np.ndarray, np.ndarray]]:
    """(log v, log p) of each run of each side: the cells a slope is fitted inside."""
    out = []
    for units in sides:
        runs: dict[Hashable, list[tuple[float, float]]] = {}
        for run, _, value, probe, _ in _probed(units):
            assert probe is not None
            runs.setdefault(run, []).append((math.log(value), math.log(probe)))
        out += [
            (np.array([v for v, _ in cell]), np.array([p for _, p in cell]))
            for cell in runs.values()
        ]
    return out


CODE_DIFFERS = "its code differs between the sides (or is unknown): its probe may have moved"


def _probed(units: Sequence[Unit]) -> list[Unit]:
    """The units with a positive value and probe. A probe can read 0 where the unit has one: a
    prepare shorter than the scheduler's tick may be charged no CPU (the kernel charges a
    running task at a tick or a switch), and one such unit of 36 used to cost its whole
    implementation the adjustment. Such a unit takes no part in the fit and is left as it was
    (``rescaled`` reads it at the reference probe)."""
    return [unit for unit in units if unit[3] is not None and unit[3] > 0 and unit[2] > 0]


def _refusal(groups: Sequence[Sides], probe: str, same_code: bool) -> str | None:
    units = [unit for sides in groups for side in sides for unit in side]
    codes = {unit[4] for unit in units}
    if same_code and (None in codes or len(codes) != 1):
        return CODE_DIFFERS
    probed = [unit for sides in groups for side in sides for unit in _probed(side)]
    if len(probed) < 2 * MIN_PAIRS:
        short = len(units) - len(probed)
        without = f" ({short} without a {probe})" if short else ""
        return f"{len(probed)} units{without} < {2 * MIN_PAIRS} to fit the slope"
    return None


def fit(groups: Sequence[Sides], probe: str, host_drift: float | None = None) -> Fit:
    """One implementation's adjustment from the units of its groups' two sides. With
    ``host_drift`` (a changed implementation): the drift to apply in place of its own probe's
    shift, which its changed code may have moved."""
    count = sum(len(side) for sides in groups for side in sides)
    unprobed = count - sum(len(_probed(side)) for sides in groups for side in sides)
    why = _refusal(groups, probe, same_code=host_drift is None)
    if why:
        return Fit(probe, count, reason=why, unprobed=unprobed)
    cells = [cell for sides in groups for cell in _cells(sides)]
    across = sum(float(((p - p.mean()) ** 2).sum()) for _, p in cells)
    if across <= 0:
        return Fit(probe, count, reason=f"its {probe} did not vary", unprobed=unprobed)
    along = sum(float(((v - v.mean()) * (p - p.mean())).sum()) for v, p in cells)
    shifts = _probe_shifts(groups)
    return Fit(
        probe,
        count,
        beta=min(max(along / across, 0.0), 1.0),
        probe_ratio=math.exp(float(np.median(shifts))) if shifts else None,
        host_drift=host_drift,
        unprobed=unprobed,
    )


def _probe_shifts(groups: Sequence[Sides]) -> list[float]:
    """log(NEW/BASE) of each group's median probe (groups with units on both sides)."""
    out = []
    for base, new in groups:
        if _probed(base) and _probed(new):
            out.append(math.log(_side_median(new) / _side_median(base)))
    return out


def rescaled(units: Sequence[Unit], beta: float, reference: float) -> list[verdicts.Item]:
    """The units' values times (probe / reference)^-beta."""
    return [
        (run, launch, value * ((probe or reference) / reference) ** -beta)
        for run, launch, value, probe, _ in units
    ]


def _side_median(units: Sequence[Unit]) -> float:
    return float(np.median([unit[3] for unit in _probed(units)]))


def _adjusted_sides(sides: Sides, fit: Fit) -> tuple[list[verdicts.Item], list[verdicts.Item]]:
    """Same code: every unit against one reference (the probe's shift is the host's). Changed
    code: each side against its own median probe (what its code did to the probe stays out),
    then NEW moved by the host's drift that the unchanged implementations read."""
    assert fit.beta is not None
    base, new = sides
    if fit.host_drift is None:
        reference = float(np.median([unit[3] for side in sides for unit in _probed(side)]))
        return rescaled(base, fit.beta, reference), rescaled(new, fit.beta, reference)
    drift = fit.host_drift**-fit.beta
    shifted = [
        (run, unit, v * drift) for run, unit, v in rescaled(new, fit.beta, _side_median(new))
    ]
    return rescaled(base, fit.beta, _side_median(base)), shifted


def adjusted_between(
    between: hierarchy.BetweenRun | None, beta: float
) -> hierarchy.BetweenRun | None:
    """The history's between-run variance of the adjusted metric, log v - β log p:
    Var(v) - 2β Cov(v, p) + β² Var(p) over the same earlier runs. Without the probe's moments
    (runs recorded without it) the unadjusted spread stays, which errs towards a wider CI."""
    if between is None or between.probe_variance is None or between.probe_covariance is None:
        return between
    variance = (
        between.variance - 2 * beta * between.probe_covariance + beta**2 * between.probe_variance
    )
    return replace(between, variance=max(variance, 0.0), source=f"{between.source}, speed-adjusted")


def figures(
    sides: Sides,
    fit: Fit | None,
    between: hierarchy.BetweenRun | None,
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """A group's two-sample figures, adjusted when ``fit`` applies, with the unadjusted ratio,
    CI and p beside."""
    base, new = ([unit[:3] for unit in side] for side in sides)
    raw = verdicts.two_sample_figures(base, new, between, resamples, seed)
    if fit is None or fit.beta is None or not _probed(sides[0]) or not _probed(sides[1]):
        return raw
    base_adjusted, new_adjusted = _adjusted_sides(sides, fit)
    out = verdicts.two_sample_figures(
        base_adjusted, new_adjusted, adjusted_between(between, fit.beta), resamples, seed
    )
    return with_unadjusted(out, raw, fit)


def fits_by(
    groups: Mapping[Any, Sides], pool_of: Callable[[Any], str], probe: str
) -> dict[str, Fit]:
    """One fit per pool (an implementation) over the groups that ``pool_of(group)`` names; a
    changed implementation borrows the host's drift from the unchanged ones (their groups'
    median probe shift), when there are any."""
    pools = pooled(groups, pool_of)
    fits = {name: fit(members, probe) for name, members in pools.items()}
    shifts = [
        shift
        for name, members in pools.items()
        if fits[name].applied
        for shift in _probe_shifts(members)
    ]
    if shifts:
        drift = math.exp(float(np.median(shifts)))
        for name, members in pools.items():
            if fits[name].reason == CODE_DIFFERS:
                fits[name] = fit(members, probe, host_drift=drift)
    return fits
