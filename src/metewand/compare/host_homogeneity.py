"""Are several hosts' resource figures one population? The test that decides pooling.

Rows of several hosts are pooled into one resource comparison only when the hosts are shown to
be equivalent. Three parts, all must hold:

1. the same engine identities: every engine's binary sha256, as each host's rows name it, is one
   value over all hosts (and one per host);
2. the same CPU model and the same number of usable cores (each host's fingerprint);
3. their medians agree. For each engine and metric (``METRICS``: engine CPU and peak PSS over
   each host's own all-pass intersection), each host is compared with the other hosts pooled,
   *paired by task*: per task both ran, the ratio of the host's median to the others' median;
   the statistic is the median over tasks of the log ratio, and its confidence interval is the
   distribution-free one of a median (order statistics, from the sign test's binomial law) at
   the Bonferroni level ``1 - ALPHA / M``, M being every comparison made. The medians agree when
   every interval holds 0 (a ratio of 1). With two hosts one comparison per engine and metric is
   made (the second host against the first is its mirror).

Why paired by task: Dask puts rounds on hosts as they come free, so two hosts run different
mixes of tasks, and unpaired medians would differ by the mix alone. Why order statistics and not
the bootstrap the per-engine medians use: with a few dozen tasks the percentile bootstrap of a
median covers less than it claims (on synthetic identical hosts, 29 tasks, k = 5, 4
comparisons: 9% false alarms at a nominal 5%); the sign-test interval is exact for any
continuous law symmetric under swapping the hosts, which identical hosts give (measured: 1.5-4%
false alarms; ``tests/test_host_homogeneity.py`` pins the error rates).

A comparison whose tasks are too few for a finite interval at its level (fewer than 8 at 5% over
4 comparisons) cannot show agreement: homogeneity is then *not established*, and the reason
says so. The test only ever allows pooling; a host refused from the pool keeps its own verdict.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

METRICS = ("cpu_total_ms", "pss_peak_bytes")
ALPHA = 0.05
Keyed = Mapping[tuple[str, int], float]  # (task_id, attempt) -> value
STATEMENT = (
    "hosts are pooled only when every engine's binary sha256 is the same on all of them, their "
    "CPU model and usable core count are the same, and, for each engine and metric "
    f"({', '.join(METRICS)}), each host's per-task median agrees with the other hosts': the "
    "median over shared tasks of log(host median / others' median) has a distribution-free "
    "order-statistic (sign-test) confidence interval at the Bonferroni level 1 - "
    f"{ALPHA}/M holding 0"
)


def sign_test_interval(values: Sequence[float], level: float) -> tuple[float, float] | None:
    """The order-statistic interval of the median at (at least) ``level``: ``[x_(j),
    x_(n+1-j)]`` with the largest ``j`` such that P(Binomial(n, 1/2) < j) <= (1 - level) / 2.
    None when ``n`` is too small for any finite interval at that level."""
    ordered = sorted(values)
    n = len(ordered)
    tail = (1.0 - level) / 2.0
    cumulative, j = 0.0, 0
    for i in range(n + 1):
        mass = math.comb(n, i) / 2.0**n
        if cumulative + mass > tail:
            break
        cumulative, j = cumulative + mass, i + 1
    if j < 1 or j > n + 1 - j:
        return None
    return (ordered[j - 1], ordered[n - j])


def _task_medians(values: Keyed) -> dict[str, float]:
    by_task: dict[str, list[float]] = defaultdict(list)
    for (task, _attempt), value in values.items():
        by_task[task].append(value)
    return {task: float(np.median(found)) for task, found in by_task.items()}


def compare_medians(host: Keyed, others: Keyed, level: float) -> dict[str, Any]:
    """One comparison: ``host`` against ``others``, paired by task (see the module doc)."""
    mine, theirs = _task_medians(host), _task_medians(others)
    logs = [
        math.log(mine[task] / theirs[task])
        for task in sorted(set(mine) & set(theirs))
        if mine[task] > 0 and theirs[task] > 0
    ]
    undefined = len(set(mine) & set(theirs)) - len(logs)
    interval = sign_test_interval(logs, level)
    record: dict[str, Any] = {
        "tasks": len(logs),
        "undefined_tasks": undefined,  # a median of 0 on either side: no ratio
        "level": level,
        "median_ratio": math.exp(float(np.median(logs))) if logs else None,
        "ratio_interval": None,
        "agrees": None,
    }
    if interval is None:
        record["reason"] = (
            f"{len(logs)} shared task(s): too few for a finite interval at level {level:.4f}"
        )
        return record
    record["ratio_interval"] = [math.exp(interval[0]), math.exp(interval[1])]
    record["agrees"] = interval[0] <= 0.0 <= interval[1]
    return record


def median_agreement(
    values: Mapping[str, Mapping[str, Mapping[str, Keyed]]], alpha: float = ALPHA
) -> dict[str, Any]:
    """``values``: place -> engine -> metric -> keyed values (intersection rows). Every
    comparison with its figures; ``agree`` True only when each one agreed."""
    places = sorted(values)
    engines = sorted({e for per_engine in values.values() for e in per_engine})
    subjects = places[1:] if len(places) == 2 else places
    plan = [(e, m, h) for e in engines for m in METRICS for h in subjects]
    level = 1.0 - alpha / max(1, len(plan))
    comparisons = []
    for engine, metric, place in plan:
        others: dict[tuple[str, int], float] = {}
        for other in places:
            if other != place:  # a task-attempt ran on one place: its round ran whole there
                others.update(values[other].get(engine, {}).get(metric, {}))
        mine = values[place].get(engine, {}).get(metric, {})
        found = compare_medians(mine, others, level)
        others_name = "others" if len(places) > 2 else next(p for p in places if p != place)
        comparisons.append(
            {"engine": engine, "metric": metric, "host": place, "against": others_name, **found}
        )
    verdicts = [c["agrees"] for c in comparisons]
    return {
        "alpha": alpha,
        "comparisons_made": len(comparisons),
        "level_each": level,
        "comparisons": comparisons,
        "agree": bool(comparisons) and all(v is True for v in verdicts),
        "disagreeing": [_name(c) for c in comparisons if c["agrees"] is False],
        "undecided": [_name(c) for c in comparisons if c["agrees"] is None],
    }


def _name(comparison: Mapping[str, Any]) -> str:
    return f"{comparison['engine']} {comparison['metric']} on {comparison['host']}"


def same_fingerprints(
    fingerprints: Mapping[str, Mapping[str, Any]], engine_shas: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """Parts 1 and 2: ``fingerprints`` (place -> cpu_model, usable_cores, ...) and
    ``engine_shas`` (place -> engine -> sorted list of the sha256 its rows name)."""
    problems = []
    engines = sorted({e for shas in engine_shas.values() for e in shas})
    for engine in engines:
        seen = {place: shas.get(engine) for place, shas in engine_shas.items()}
        values = {tuple(v) for v in seen.values() if v}
        if len(values) > 1 or any(v and len(v) > 1 for v in seen.values()):
            listed = ", ".join(f"{p} {', '.join(s[:12] for s in v or [])}" for p, v in seen.items())
            problems.append(f"{engine} binaries differ ({listed})")
    for name in ("cpu_model", "usable_cores"):
        seen_fact = {place: _fact(print_.get(name)) for place, print_ in fingerprints.items()}
        unknown = sorted(p for p, v in seen_fact.items() if v is None)
        if unknown:
            problems.append(f"{name} not recorded for {', '.join(unknown)}")
        elif len(set(seen_fact.values())) > 1:
            listed = ", ".join(f"{p} {v}" for p, v in sorted(seen_fact.items()))
            problems.append(f"{name} differs ({listed})")
    return {"equal": not problems, "problems": problems}


def _fact(value: Any) -> Any:
    """A fingerprint fact as comparable data (an unreadable one is None: not known)."""
    if isinstance(value, Mapping):
        return None
    return value
