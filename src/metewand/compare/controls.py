"""Separate runs judged against the host's drift that the unchanged implementations read.

Two runs on one host drift apart: the host was quieter or busier during one of them, and every
process of that run moved alike. The speed probe (``speed_sides``) reads each process's speed
from its prepare phase, but not all of the drift: on a work dir of
``benchmarks/compare_false_alarms.py`` (benchmarks/README.md, 2026-12-05) the two unchanged
implementations of a planted comparison read 0.90-0.99 on every group, and 11 of their groups
were called faster on wall time.

An implementation whose code is the same on both sides (``SuiteKind.code_of``: every unit of
its groups carries one implementation configuration, which pins its sources, build and
environment) cannot have changed the work it does: whatever moved it is the host. So each
implementation's groups are read against the drift of the *other* unchanged implementations,
a difference-in-differences with those as controls:

- the drift: the median log ratio (NEW/BASE) of the control groups' figures, speed-adjusted
  where that applied; its standard error ``1.2533 sd / sqrt(n)`` (the median's, normal data);
- the group's NEW units are divided by the drift and its figures recomputed (ratio, CI, rank
  test), and the CI's half-widths (log scale) are combined in quadrature with 1.96 se: the
  drift's own noise moves the group's every unit alike, so it is not in their spread;
- a group needs at least ``MIN_CONTROL_GROUPS`` control groups; with fewer (every implementation
  changed, or only one implementation) it is judged as before, and the comparison says why.

Only between runs of one host (the ``host.*`` provenance facts agree): across hosts, the drift
between the runs is what a comparison is asked about. ``compare --no-controls`` judges every
group as before; each adjusted group keeps its figures before the controls beside.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from metewand.compare.speed_adjust import widened_by

K = TypeVar("K", bound=Hashable)

MIN_CONTROL_GROUPS = 3
MEDIAN_SE_FACTOR = 1.2533  # sqrt(pi / 2): the median's standard error over the mean's


@dataclass(frozen=True)
class Drift:
    """The host's drift between the runs as the controls of one implementation read it."""

    ratio: float  # exp(median log ratio of the control groups)
    se: float  # standard error of that median, log scale
    controls: tuple[str, ...]  # the unchanged implementations read
    groups: int

    def as_json(self) -> dict[str, Any]:
        return {
            "drift": self.ratio,
            "drift_se_log": self.se,
            "controls": list(self.controls),
            "control_groups": self.groups,
        }


def unchanged(codes: Mapping[str, Iterable[str | None]]) -> set[str]:
    """The implementations whose every unit, on both sides, carries one known code identity."""
    out = set()
    for name, seen in codes.items():
        distinct = set(seen)
        if len(distinct) == 1 and None not in distinct:
            out.add(name)
    return out


def drifts(
    log_ratios: Mapping[K, float],
    implementation_of: Mapping[K, str],
    same_code: set[str],
) -> tuple[dict[str, Drift], dict[str, str]]:
    """Per implementation, the drift its controls read, or why it has none."""
    found: dict[str, Drift] = {}
    why: dict[str, str] = {}
    for name in sorted(set(implementation_of.values())):
        members = [
            (implementation_of[key], value)
            for key, value in log_ratios.items()
            if implementation_of[key] != name
            and implementation_of[key] in same_code
            and math.isfinite(value)
        ]
        if len(members) < MIN_CONTROL_GROUPS:
            why[name] = (
                f"{len(members)} groups of other unchanged implementations < {MIN_CONTROL_GROUPS}"
            )
            continue
        values = [value for _, value in members]
        se = MEDIAN_SE_FACTOR * statistics.stdev(values) / math.sqrt(len(values))
        found[name] = Drift(
            math.exp(statistics.median(values)),
            se,
            tuple(sorted({impl for impl, _ in members})),
            len(values),
        )
    return found, why


def widened(figures: dict[str, Any], se: float) -> None:
    """The ratio's CI (in place), each half-width combined in quadrature with 1.96 ``se``."""
    ratio, ci = figures.get("ratio"), figures.get("ratio_ci95")
    if ratio is None or not ci or None in ci:
        return
    figures["ratio_ci95"] = widened_by(ratio, ci, se)


def log_ratio(figures: Mapping[str, Any]) -> float:
    ratio = figures.get("ratio")
    return math.log(ratio) if isinstance(ratio, (int, float)) and ratio > 0 else math.nan


def one_host(differences: Sequence[Mapping[str, Any]]) -> str | None:
    """None when both sides ran on one host, else the host facts that differ."""
    facts = [str(d["fact"]) for d in differences if str(d.get("fact", "")).startswith("host.")]
    return ", ".join(facts) if facts else None


def history_against(spreads: Sequence[tuple[float, float]], drift: float) -> str | None:
    """Why the history says an implementation's controls would add more noise than they
    remove in this comparison, or None. ``spreads``: per group of the implementation, its
    between-run variance in the run history alone and less each earlier run's drift
    (``history.spread_controls``), as added to its figures (speed-adjusted where that applies);
    ``drift``: the host's drift between the compared runs that its controls read (log).

    Reading a group against its controls replaces the group's run-to-run noise with that of its
    difference from the controls' median; that is smaller only where the two move together
    (the host's drift). Where they move apart (a CPU time that a neighbour leaves alone, while
    each implementation's own noise differs), the difference is the noisier figure. Pooled over
    the implementation's groups, as the choice is made once per implementation, and out of
    sample: the earlier runs, never the compared pair. But judged alone, the group carries the
    drift between the compared runs whole, a bias the controls remove: the controls are kept
    unless the drift's square is below what they add to the variance of a difference of two
    runs, ``2 (less - alone)`` (the error of each choice: bias squared plus variance)."""
    if not spreads:
        return None
    alone = sum(plain for plain, _ in spreads) / len(spreads)
    less = sum(controlled for _, controlled in spreads) / len(spreads)
    if drift**2 >= 2 * (less - alone):
        return None
    return (
        f"the history's runs move it less alone (log sd {math.sqrt(alone):.3f}) than against "
        f"its controls' drift ({math.sqrt(less):.3f}), by more than the drift between these "
        f"runs (x{math.exp(drift):.3f}) would bias it alone"
    )


def read_against_controls(
    first: Mapping[K, Mapping[str, Any]],
    implementation_of: Mapping[K, str],
    same_code: set[str],
    refigure: Callable[[K, float], dict[str, Any]],
    decline: Callable[[str, float], str | None] | None = None,
) -> tuple[dict[K, dict[str, Any]], dict[str, Any]]:
    """The groups whose implementation has controls, figured again: ``first`` holds each
    group's figures as judged alone; ``refigure(key, drift)`` figures a group with NEW's units
    divided by ``drift``. Returns the new figures by group (CIs widened, the figures before
    beside) and the account (each implementation's drift, or why it has none). ``decline(name,
    log drift)``: why an implementation is not to be read against its controls, or None (it
    still serves as a control for the others)."""
    ratios = {key: log_ratio(figures) for key, figures in first.items()}
    found, why = drifts(ratios, implementation_of, same_code)
    for name, read in list(found.items()):
        reason = decline(name, math.log(read.ratio)) if decline else None
        if reason:
            del found[name]
            why[name] = reason
    out: dict[K, dict[str, Any]] = {}
    for key, before in first.items():
        drift = found.get(implementation_of[key])
        if drift is None:
            continue
        figures = refigure(key, drift.ratio)
        widened(figures, drift.se)
        figures["controls"] = {
            **drift.as_json(),
            "before": {k: before.get(k) for k in ("ratio", "ratio_ci95", "p_value")},
        }
        out[key] = figures
    account = {
        "implementations": {name: d.as_json() for name, d in found.items()},
        "not_adjusted": why,
    }
    return out, account
