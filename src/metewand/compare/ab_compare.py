"""Paired comparisons inside runs: the two sides of interleaved A/B runs, or two engines of
browser runs. Host drift moves both halves of a pair alike, so it cancels in each pair's ratio.

- ``compare --ab RUN`` (compute, ``run --ab-baseline``): per case x implementation, every
  repetition ran once from the baseline tree and once from the current one, back to back on the
  same dataset instance. NEW/BASE comes from the pairs' ratios. A pair whose halves ran in two
  sessions of the run (a kill between them, finished by ``--resume``) did not run back to back:
  it is left out, counted and named.
- ``compare --ab-engines A,B RUN`` (browser): engines already alternate inside a round, so per
  task the k-th passing attempt of B is paired with A's k-th (the same round); B/A per task.

Several runs may be given: runs are then the top level of the pairs' hierarchy.

Compute pairs are adjusted for each worker process's speed, read from a phase both halves share
(``speed_adjust``; ``--no-speed-adjust`` turns it off); the unadjusted figures stay beside.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from metewand.compare import run_compare, speed_adjust
from metewand.compare.rundir import RunData
from metewand.compare.suite_registry import CompareError, Group, SuiteKind, suite_kind


@dataclass
class _Pairs:
    halves: dict[tuple[int, str], dict[str, Mapping[str, Any]]] = field(default_factory=dict)
    statuses: dict[str, Counter[str]] = field(
        default_factory=lambda: {"base": Counter(), "new": Counter()}
    )


def _kind_of(runs: Sequence[RunData], suite: str) -> SuiteKind:
    if not runs:
        raise CompareError("no run to compare")
    for run in runs:
        if run.kind != suite:
            raise CompareError(f"{run.path} is a {run.kind} run, not a {suite} run")
    return suite_kind(suite)


def _pair_values(
    pairs: _Pairs,
    kind: SuiteKind,
    metric: str,
    sessions: Mapping[tuple[int, str], set[int]],
    probe: str | None = None,
) -> tuple[list[speed_adjust.ProbedPair], list[str]]:
    """(run, pair, base value, new value, base probe, new probe) of each complete pair (probes
    None without ``probe``), and the pairs left out because their halves ran in different
    sessions of the run."""
    items: list[speed_adjust.ProbedPair] = []
    split: list[str] = []
    for (run, pair), halves in sorted(pairs.halves.items()):
        if set(halves) != {"base", "new"}:
            continue
        if len(sessions.get((run, pair), set())) > 1:
            split.append(pair)
            continue
        base, new = kind.value_of(halves["base"], metric), kind.value_of(halves["new"], metric)
        if base is None or new is None:
            continue
        probes = [kind.value_of(halves[side], probe) if probe else None for side in ("base", "new")]
        items.append((run, pair, base, new, probes[0], probes[1]))
    return items, split


def _entry(
    key: Group,
    pairs: _Pairs,
    kind: SuiteKind,
    settings: run_compare.Settings,
    sessions: Mapping[tuple[int, str], set[int]],
    names: tuple[str, str],
    fits: Mapping[str, Mapping[str, speed_adjust.Fit]] | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {names[0]: key[0], names[1]: key[1]}
    fits = fits or {}
    between = (settings.between_run or {}).get((settings.metric, key))
    metric_fit = fits.get(settings.metric, {}).get(key[1])
    probe = metric_fit.probe if metric_fit else None
    items, split = _pair_values(pairs, kind, settings.metric, sessions, probe)
    entry.update(
        speed_adjust.figures(items, metric_fit, between, settings.resamples, settings.seed)
    )
    if not items:
        entry["note"] = "no pair where both sides succeeded"
    if split:
        entry["pairs_split_by_resume"] = sorted(split)
    entry["base_status"] = run_compare.status_text(pairs.statuses["base"])
    entry["new_status"] = run_compare.status_text(pairs.statuses["new"])
    if settings.companion:
        companion_fit = fits.get(settings.companion, {}).get(key[1])
        probe = companion_fit.probe if companion_fit else None
        companion, _ = _pair_values(pairs, kind, settings.companion, sessions, probe)
        entry["companion"] = speed_adjust.figures(
            companion, companion_fit, between, settings.resamples, settings.seed
        )
    return entry


def _speed_fits(
    groups: Mapping[Group, _Pairs],
    kind: SuiteKind,
    settings: run_compare.Settings,
    sessions: Mapping[tuple[int, str], set[int]],
) -> dict[str, dict[str, speed_adjust.Fit]]:
    """Per metric (the judged one and its companion) and implementation, the speed adjustment
    (``speed_adjust``); none when it is off or the suite names no probe for the metric."""
    out: dict[str, dict[str, speed_adjust.Fit]] = {}
    for metric, probe in run_compare.speed_probes(kind, settings, paired=True):
        probed = {
            key: _pair_values(pairs, kind, metric, sessions, probe)[0]
            for key, pairs in groups.items()
        }
        out[metric] = speed_adjust.fits_by(probed, lambda key: key[1], probe)
    return out


def _result(
    kind: SuiteKind,
    settings: run_compare.Settings,
    design: str,
    runs: list[RunData],
    groups: list[dict[str, Any]],
    group_names: tuple[str, str],
    sides: tuple[str, str],
) -> dict[str, Any]:
    result = run_compare.head(kind, settings, design, [("RUN", runs)])
    result["group_names"] = list(group_names)
    block = run_compare.run_block(runs)
    result.update(
        {
            "base": {**block, "side": sides[0]},
            "new": {**block, "side": sides[1]},
            "provenance_differences": [],
            "unmatched": {"only_in_base": [], "only_in_new": []},
            "status_changes": [g for g in groups if g["base_status"] != g["new_status"]],
            "rollups": {},
            "warnings": _split_warnings(groups),
        }
    )
    return run_compare.finish(result, groups, kind, settings)


def _split_warnings(groups: list[dict[str, Any]]) -> list[str]:
    split = sum(len(g.get("pairs_split_by_resume", [])) for g in groups)
    if not split:
        return []
    return [
        f"{split} pair(s) left out: their halves ran in two sessions of the run (a kill "
        "between them, finished by --resume), not back to back"
    ]


def compare_ab(runs: Sequence[RunData], metric: str | None = None, **rules: Any) -> dict[str, Any]:
    """NEW/BASE of interleaved A/B compute runs (``run --ab-baseline``), from their pairs."""
    runs = list(runs)
    kind = _kind_of(runs, "compute")
    assert kind.ab_of is not None
    settings = run_compare.settings_for(kind, metric, **rules)
    groups: dict[Group, _Pairs] = {}
    sessions: dict[tuple[int, str], set[int]] = {}
    for index, run in enumerate(runs):
        rows = [row for row in run.rows if kind.ab_of(row) is not None]
        if not rows:
            raise CompareError(
                f"{run.path} has no interleaved A/B rows (run it with --ab-baseline)"
            )
        for row in rows:
            group, ab = kind.group_of(row), kind.ab_of(row)
            if group is None or ab is None:
                continue
            side, pair, session = ab
            pairs = groups.setdefault(group, _Pairs())
            pairs.halves.setdefault((index, pair), {})[side] = row
            pairs.statuses[side][kind.status_of(row)] += 1
            sessions.setdefault((index, pair), set()).add(session)
    fits = _speed_fits(groups, kind, settings, sessions)
    entries = [
        _entry(key, groups[key], kind, settings, sessions, kind.group_names, fits)
        for key in sorted(groups)
    ]
    result = _result(
        kind,
        settings,
        "interleaved_ab",
        runs,
        entries,
        kind.group_names,
        ("baseline tree", "current tree"),
    )
    result["statistics"]["speed_adjustment"] = run_compare.speed_account(fits, settings)
    return result


def compare_engines(
    runs: Sequence[RunData], engines: tuple[str, str], metric: str | None = None, **rules: Any
) -> dict[str, Any]:
    """B/A per task of two engines of browser runs, paired attempt by attempt in each round."""
    runs = list(runs)
    kind = _kind_of(runs, "browser")
    settings = run_compare.settings_for(kind, metric, **rules)
    base_engine, new_engine = engines
    groups: dict[Group, _Pairs] = {}
    seen: set[str] = set()
    for index, run in enumerate(runs):
        for row in run.rows:
            group = kind.group_of(row)
            if group is None or group[1] not in engines:
                continue
            seen.add(group[1])
            side = "base" if group[1] == base_engine else "new"
            key = (group[0], f"{new_engine} vs {base_engine}")
            pairs = groups.setdefault(key, _Pairs())
            pairs.halves.setdefault((index, str(row.get("attempt"))), {})[side] = row
            pairs.statuses[side][kind.status_of(row)] += 1
    missing = [engine for engine in engines if engine not in seen]
    if missing:
        raise CompareError(f"--ab-engines: no attempt of {', '.join(missing)} in the run(s)")
    entries = [
        _entry(key, groups[key], kind, settings, {}, ("task", "engines")) for key in sorted(groups)
    ]
    return _result(
        kind,
        settings,
        "paired_engines",
        runs,
        entries,
        ("task", "engines"),
        (base_engine, new_engine),
    )
