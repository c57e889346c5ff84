"""Between-run noise of one run per side, read across the comparison's unchanged groups.

Two single runs cannot show a group's between-run noise, and the run history can only lend it
once it holds earlier runs (``cli.compare_history``). Without either, a group's CI held only its
own processes' scatter. At the sorting example's former 10 repetitions those CIs were wide
enough to hide the rest most of the time (work dir H: one A/A CPU alarm in 10 pairs). At 20,
the first A/A pair of a fresh work dir of ``benchmarks/compare_false_alarms.py`` (no earlier
run) called python-builtin's 2,000 reversed values 1.132x [1.065-1.207] slower on CPU. Its 20
processes of the second run all read about 13% more than the first run's, and no other group
moved. A run moves one group by more than its processes' scatter says, and that is the noise
missing.

Every group whose code is the same on both sides (``run_drift.same_code``) is an A/A pair of
its own: its log ratio ``y_i`` is the runs' common drift, plus the group's
own between-run move, plus its sampling error (variance ``s_i²``, its figures' standard error).
The spread of the group moves, ``τ²``, is the random-effects heterogeneity of a meta-analysis,
estimated by the method of moments over the other unchanged groups (a group never estimates its
own):

- around the drift (the moment estimator with an estimated mean), for a group read against its
  controls, whose drift ``compare.controls`` takes out;
- around no change (the same with the mean fixed at 0), for a group judged alone, which carries
  the drift too.

Each side of one run then adds ``τ² / 2`` as the history's spread is added
(``hierarchy.BetweenRun``), with ``k - 1`` or ``k`` degrees of freedom (``k`` groups). It
assumes that the groups' moves are alike in size, as the history's moderated spreads do, and
that the unchanged groups are unchanged: the changed implementations' groups never take part.
It is used only when both sides hold one run and the history lends no spread for the metric;
with fewer than ``MIN_GROUPS`` other unchanged groups the group stays "not estimable".
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

from metewand.compare.hierarchy import BetweenRun

K = TypeVar("K", bound=Hashable)

MIN_GROUPS = 5


def heterogeneity(estimates: list[tuple[float, float]], centred: bool) -> float:
    """The variance of the true ``y`` of ``(y, s)`` pairs beyond their sampling errors ``s``,
    around their mean (``centred``) or around 0, floored at 0: the unweighted moment estimator
    (Hedges'). DerSimonian and Laird's weights ``1 / s²`` read 9% low here: the errors are
    themselves estimated from 10-20 processes, and a group whose error came out small by chance
    weighs most."""
    ys = [y for y, _ in estimates]
    noise = sum(s * s for _, s in estimates) / len(estimates)
    if centred:
        mean = sum(ys) / len(ys)
        return max(0.0, sum((y - mean) ** 2 for y in ys) / (len(ys) - 1) - noise)
    return max(0.0, sum(y * y for y in ys) / len(ys) - noise)


def usable(log_ratio: float | None, standard_error: float | None) -> bool:
    return (
        log_ratio is not None
        and standard_error is not None
        and math.isfinite(log_ratio)
        and math.isfinite(standard_error)
        and standard_error > 0
    )


def spreads(estimates: Mapping[K, tuple[float, float]], unchanged: set[K]) -> dict[K, BetweenRun]:
    """Per group, the between-run spread its side of one run adds: from ``estimates`` (each
    group's log ratio and standard error, as judged alone) of the ``unchanged`` groups other
    than itself; groups with too few such others are left out."""
    out: dict[K, BetweenRun] = {}
    for key in estimates:
        others = [estimates[other] for other in estimates if other in unchanged and other != key]
        if len(others) < MIN_GROUPS:
            continue
        source = f"across this comparison's {len(others)} other unchanged groups"
        around_drift = BetweenRun(
            heterogeneity(others, centred=True) / 2,
            float(len(others) - 1),
            f"{source}, less their drift",
        )
        out[key] = BetweenRun(
            heterogeneity(others, centred=False) / 2,
            float(len(others)),
            source,
            controlled=around_drift,
        )
    return out


def refusal(enabled: bool, one_run: bool, other_hosts: str | None, unchanged: bool) -> str | None:
    """Why a comparison does not read its spreads across groups, or None."""
    if not enabled:
        return "off (--no-cross-section)"
    if not one_run:
        return "a side holds several runs: their own runs show the between-run noise"
    if other_hosts is not None:
        return "the runs' hosts differ: the drift between them is what is compared"
    if not unchanged:
        return "no implementation's code is known to be the same on both sides"
    return None


def _estimates(
    keys: Sequence[K], figures: Sequence[Mapping[str, Any]]
) -> dict[K, tuple[float, float]]:
    """Each group's log ratio and standard error, as judged alone, where both are usable."""
    out = {}
    for key, one in zip(keys, figures, strict=True):
        ratio, error = one.get("ratio"), one.get("log_standard_error")
        if ratio and error is not None and usable(math.log(ratio), error):
            out[key] = (math.log(ratio), float(error))
    return out


def read(
    keys: Sequence[K],
    figures: Mapping[str, Sequence[Mapping[str, Any]]],
    unchanged: set[K],
    history: Mapping[tuple[str, K], BetweenRun],
) -> tuple[dict[tuple[str, K], BetweenRun], dict[str, Any]]:
    """Per (metric, group), the spread to add, for each metric of ``figures`` (each group's
    figures in the order of ``keys``) that the ``history`` lends no spread for; and the
    account per metric."""
    added: dict[tuple[str, K], BetweenRun] = {}
    account: dict[str, Any] = {}
    for metric, judged in figures.items():
        if any((metric, key) in history for key in keys):
            account[metric] = "the history lends its spreads"
            continue
        estimates = _estimates(keys, judged)
        found = spreads(estimates, unchanged & set(estimates))
        added.update({(metric, key): spread for key, spread in found.items()})
        account[metric] = {
            "groups": len(found),
            "unchanged_groups": len(unchanged & set(estimates)),
        }
    return added, account
