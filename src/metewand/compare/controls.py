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

An implementation with many unchanged groups of its own (``MIN_OWN_GROUPS`` others for each,
such as a browser engine over a corpus) is its own control instead: each group is read against
the median of that implementation's other unchanged groups, the group itself left out so that a
change of its own is not taken for drift. Two engines do not drift alike: in the fifth A/A pair
of browser runs in benchmarks/README.md (2026-12-05, work dir N, pair 1) Chrome's groups moved
by a median of +10% and Lightpanda's by +3%, so Chrome read against Lightpanda kept 7% of its
engine's own drift in every group, and its two shortest tasks (+31%) were called slower. Read
against their own groups, no group of the seven kept browser A/A pairs (364 comparable groups,
work dirs G, L and O) is called slower or faster, on duration or on CPU, and the planted
comparisons find what they found before. A compute implementation's few cases (five in the
sorting example) stay with the other implementations, whose pooled groups estimate the drift
with less noise.

Only between runs of one host (the ``host.*`` provenance facts agree): across hosts, the drift
between the runs is what a comparison is asked about. ``compare --no-controls`` judges every
group as before; each adjusted group keeps its figures before the controls beside.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from metewand.compare.speed_adjust import widened_by

K = TypeVar("K", bound=Hashable)

MIN_CONTROL_GROUPS = 3
# other unchanged groups of its own an implementation needs for each group to be its own control
MIN_OWN_GROUPS = 10
MEDIAN_SE_FACTOR = 1.2533  # sqrt(pi / 2): the median's standard error over the mean's


@dataclass(frozen=True)
class Drift:
    """The host's drift between the runs as the controls of one implementation read it."""

    ratio: float  # exp(median log ratio of the control groups)
    se: float  # standard error of that median, log scale
    controls: tuple[str, ...]  # the unchanged implementations read
    groups: int
    own: bool = False  # the implementation's own other groups, each group leaving itself out

    def as_json(self) -> dict[str, Any]:
        out = {
            "drift": self.ratio,
            "drift_se_log": self.se,
            "controls": list(self.controls),
            "control_groups": self.groups,
        }
        if self.own:
            out["own_groups"] = True
        return out


def one_identity(seen: Iterable[str | None]) -> bool:
    """Every unit, on both sides, carries the same known code identity."""
    distinct = set(seen)
    return len(distinct) == 1 and None not in distinct


def unchanged(codes: Mapping[str, Iterable[str | None]]) -> set[str]:
    """The implementations whose every unit, on both sides, carries one known code identity."""
    return {name for name, seen in codes.items() if one_identity(seen)}


def drifts(
    log_ratios: Mapping[K, float],
    implementation_of: Mapping[K, str],
    unchanged_groups: Collection[K],
) -> tuple[dict[str, Drift], dict[str, str]]:
    """Per implementation, the drift its controls read, or why it has none. ``unchanged_groups``: the
    groups whose code is the same on both sides, the only ones that may serve as controls (for
    a compute implementation all its groups or none; a browser engine's group also holds its
    task, so an edited task leaves the engine's other groups unchanged)."""
    found: dict[str, Drift] = {}
    why: dict[str, str] = {}
    for name in sorted(set(implementation_of.values())):
        members = [
            (implementation_of[key], value)
            for key, value in log_ratios.items()
            if implementation_of[key] != name and key in unchanged_groups and math.isfinite(value)
        ]
        if len(members) < MIN_CONTROL_GROUPS:
            why[name] = (
                f"{len(members)} groups of other unchanged implementations < {MIN_CONTROL_GROUPS}"
            )
            continue
        controls = tuple(sorted({impl for impl, _ in members}))
        found[name] = _median_drift([value for _, value in members], controls, False)
    return found, why


def _median_drift(values: Sequence[float], controls: tuple[str, ...], own: bool) -> Drift:
    se = MEDIAN_SE_FACTOR * statistics.stdev(values) / math.sqrt(len(values))
    return Drift(math.exp(statistics.median(values)), se, controls, len(values), own)


def own_drifts(
    log_ratios: Mapping[K, float],
    implementation_of: Mapping[K, str],
    unchanged_groups: Collection[K],
) -> tuple[dict[K, Drift], dict[str, Drift]]:
    """For each implementation with more than ``MIN_OWN_GROUPS`` unchanged groups: the drift
    all of them read (for the account, and for its changed groups); and per unchanged group,
    the drift the others read (the group left out)."""
    own: dict[str, list[tuple[K, float]]] = {}
    for key, value in log_ratios.items():
        if key in unchanged_groups and math.isfinite(value):
            own.setdefault(implementation_of[key], []).append((key, value))
    per_group: dict[K, Drift] = {}
    whole: dict[str, Drift] = {}
    for name, members in own.items():
        if len(members) <= MIN_OWN_GROUPS:
            continue
        values = [value for _, value in members]
        whole[name] = _median_drift(values, (name,), True)
        for i, (key, _) in enumerate(members):
            per_group[key] = _median_drift(values[:i] + values[i + 1 :], (name,), True)
    return per_group, whole


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
    unchanged_groups: Collection[K],
    refigure: Callable[[K, float], dict[str, Any]],
    decline: Callable[[str, float], str | None] | None = None,
) -> tuple[dict[K, dict[str, Any]], dict[str, Any]]:
    """The groups whose implementation has controls, figured again: ``first`` holds each
    group's figures as judged alone; ``refigure(key, drift)`` figures a group with NEW's units
    divided by ``drift``. Returns the new figures by group (CIs widened, the figures before
    beside) and the account (each implementation's drift, or why it has none). ``decline(name,
    log drift)``: why an implementation is not to be read against the other implementations'
    drift, or None (it still serves as a control for the others); one read against its own
    groups (``own_drifts``) is not asked."""
    ratios = {key: log_ratio(figures) for key, figures in first.items()}
    found, why = drifts(ratios, implementation_of, unchanged_groups)
    per_group, own = own_drifts(ratios, implementation_of, unchanged_groups)
    # its own groups move with it: the history's say, which weighs the other implementations'
    # drift against a group's own noise, is not asked of an implementation read against them
    found.update(own)
    for name in own:
        why.pop(name, None)
    for name, read in list(found.items()):
        reason = decline(name, math.log(read.ratio)) if decline and name not in own else None
        if reason:
            del found[name]
            why[name] = reason
    out: dict[K, dict[str, Any]] = {}
    for key, before in first.items():
        name = implementation_of[key]
        if name not in found:
            continue
        drift = per_group.get(key, found[name])  # a changed group leaves no one out
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
