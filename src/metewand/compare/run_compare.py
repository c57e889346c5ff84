"""``metewand compare``: what changed between runs of the same suite.

Suite-specific parts (how attempts group, which metric is the default, what a status is, which
provenance facts matter, which process launch a row ran in) come from ``compare.suite_registry``,
keyed by the run's suite kind; this module only matches groups, hands each group's values,
nested as runs ⊃ process launches ⊃ repetitions, to ``compare.verdicts`` and gathers the result.

Each side may hold several runs: runs then become a level of the hierarchy, and the between-run
noise that an A/A pair of single runs cannot see is estimated. With one run per side the report
says that it could not be. ``compare.ab_compare`` reads paired designs (one interleaved A/B run,
or two engines of one browser run) into the same result shape.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from metewand.compare import (
    compare_suites,  # noqa: F401  (the edge: registers the suite kinds)
    controls,
    hierarchy,
    hosts,
    pollution,
    run_drift,
    speed_adjust,
    speed_sides,
    stats,
    verdicts,
)
from metewand.compare.rundir import RunData
from metewand.compare.suite_registry import CompareError, Group, SuiteKind, suite_kind

SCHEMA = "metewand_compare/2"
DEFAULT_THRESHOLD = 0.05
SLOWER, FASTER, SAME = verdicts.SLOWER, verdicts.FASTER, verdicts.SAME
UNMEASURED = verdicts.UNMEASURED
PASS = "pass"
RunsArg = RunData | Sequence[RunData]


@dataclass
class _Side:
    items: dict[str, list[verdicts.Item]] = field(default_factory=dict)  # metric -> items
    # metric -> each item's row and its code identity
    sources: dict[str, list[tuple[Mapping[str, Any], str | None]]] = field(default_factory=dict)
    statuses: Counter[str] = field(default_factory=Counter)
    rows: list[Mapping[str, Any]] = field(default_factory=list)  # for the hosts they ran on
    row_codes: list[str | None] = field(default_factory=list)  # each row's code identity


@dataclass(frozen=True)
class Settings:
    """How a comparison judges: the metric and its CPU/wall companion, and the gate's rules."""

    metric: str
    companion: str | None
    threshold: float = DEFAULT_THRESHOLD
    resamples: int = stats.DEFAULT_RESAMPLES
    seed: int = stats.DEFAULT_BOOTSTRAP_SEED
    min_units: int = verdicts.DEFAULT_MIN_UNITS
    alpha: float = 0.05
    # per (metric, group), between-run variance known from the run history (issue #23's store):
    # a side of one run adds it, so a change must exceed the group's historical spread
    between_run: Mapping[tuple[str, Group], hierarchy.BetweenRun] | None = None
    # units adjusted by each process's speed (compare.speed_adjust: pairs; speed_sides: runs)
    speed_adjust: bool = True
    # separate runs read against the drift of the unchanged implementations (compare.controls)
    controls: bool = True
    # one run per side, no history: between-run noise read across the unchanged groups
    # (compare.cross_section)
    cross_section: bool = True


def as_runs(runs: RunsArg) -> list[RunData]:
    return [runs] if isinstance(runs, RunData) else list(runs)


def _collect(runs: list[RunData], kind: SuiteKind, metrics: list[str]) -> dict[Group, _Side]:
    """Each group's values per metric as (run, launch, value) items, and its statuses."""
    groups: dict[Group, _Side] = {}
    for index, run in enumerate(runs):
        code_of = kind.code_of(run)
        by_group: dict[Group, list[dict[str, Any]]] = {}
        for row in run.rows:
            group = kind.group_of(row)
            if group is not None and (kind.ab_of is None or kind.ab_of(row) is None):
                by_group.setdefault(group, []).append(row)
        for group, rows in by_group.items():
            side = groups.setdefault(group, _Side())
            for row, launch in zip(rows, kind.launches_of(rows), strict=True):
                code = code_of(row)
                side.statuses[kind.status_of(row)] += 1
                side.rows.append(row)
                side.row_codes.append(code)
                for metric in metrics:
                    value = kind.value_of(row, metric)
                    if value is not None:
                        side.items.setdefault(metric, []).append((index, launch, value))
                        side.sources.setdefault(metric, []).append((row, code))
    return groups


def status_text(statuses: Counter[str]) -> str:
    """``pass`` when every attempt passed, else ``fail x2, pass x1`` (most common first)."""
    if set(statuses) == {PASS}:
        return PASS
    return ", ".join(f"{s} x{n}" for s, n in sorted(statuses.items(), key=lambda i: (-i[1], i[0])))


def _missing_note(base: _Side, new: _Side, metric: str) -> str | None:
    for name, side in (("BASE", base), ("NEW", new)):
        if not side.items.get(metric):
            passed = side.statuses.get(PASS, 0) > 0
            return f"not measured in {name}" if passed else f"no successful attempt in {name}"
    return None


def _units(side: _Side, metric: str, kind: SuiteKind, probe: str | None) -> list[speed_sides.Unit]:
    """The side's items of ``metric`` with each one's probe value and code identity."""
    return [
        (run, launch, value, kind.value_of(row, probe) if probe else None, code)
        for (run, launch, value), (row, code) in zip(
            side.items.get(metric, []), side.sources.get(metric, []), strict=True
        )
    ]


def _figures(
    base: _Side,
    new: _Side,
    metric: str,
    group: Group,
    s: Settings,
    kind: SuiteKind,
    fit: speed_adjust.Fit | None,
    drift: float | None = None,
) -> dict[str, Any]:
    """A group's figures for ``metric``; read against its controls, NEW's units divided by
    ``drift`` and the history's spread the one less each earlier run's drift (``controls``)."""
    probe = fit.probe if fit else None
    sides = (_units(base, metric, kind, probe), _units(new, metric, kind, probe))
    between = (s.between_run or {}).get((metric, group))
    if drift is not None:
        sides = (sides[0], [(r, u, v / drift, p, c) for r, u, v, p, c in sides[1]])
        between = between.controlled or between if between else None
    figures = speed_sides.figures(sides, fit, between, s.resamples, s.seed)
    note = _missing_note(base, new, metric)
    if note:
        figures["note"] = note
    return figures


def _group_entry(
    key: Group,
    base: _Side,
    new: _Side,
    kind: SuiteKind,
    settings: Settings,
    fits: Mapping[str, Mapping[str, speed_adjust.Fit]],
) -> dict[str, Any]:
    entry: dict[str, Any] = {kind.group_names[0]: key[0], kind.group_names[1]: key[1]}
    metric_fit = fits.get(settings.metric, {}).get(key[1])
    entry.update(_figures(base, new, settings.metric, key, settings, kind, metric_fit))
    entry["base_status"] = status_text(base.statuses)
    entry["new_status"] = status_text(new.statuses)
    if settings.companion:
        companion_fit = fits.get(settings.companion, {}).get(key[1])
        entry["companion"] = _figures(
            base, new, settings.companion, key, settings, kind, companion_fit
        )
    pooled = {"base": hosts.pooling(base.rows), "new": hosts.pooling(new.rows)}
    if pooled["base"] or pooled["new"]:  # a Dask run's group ran on several hosts: say so
        entry["pooled_over_hosts"] = {
            side: block["statement"] if block else None for side, block in pooled.items()
        }
    return entry


def provenance_differences(
    base: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Facts whose values differ between the sides (absent on one side counts as different).
    A side of several runs shows one value when its runs agree, else the list of them."""

    def side_value(facts: Sequence[Mapping[str, Any]], name: str) -> Any:
        values = [f.get(name) for f in facts]
        return values[0] if all(v == values[0] for v in values) else values

    names = sorted({n for f in [*base, *new] for n in f})
    out = []
    for name in names:
        b, n = side_value(base, name), side_value(new, name)
        if b != n:
            out.append({"fact": name, "base": b, "new": n})
    return out


def _host_warnings(sides: Sequence[tuple[str, list[RunData]]]) -> list[str]:
    """A run whose rows ran on several Dask hosts: its medians pool them (never silently)."""
    out = []
    for name, runs in sides:
        for run in runs:
            pooled = hosts.pooling(run.rows)
            if pooled is not None:
                whose = name if len(runs) == 1 else f"{name} run {run.run_id}"
                out.append(f"{whose}'s medians are {pooled['statement']}")
    return out


def _rollups(kind: SuiteKind, base: RunData, new: RunData) -> dict[str, list[dict[str, Any]]]:
    """Each rollup's groups with both runs' summaries side by side (None: absent in a run)."""
    if kind.rollups_of is None:
        return {}
    base_r, new_r = kind.rollups_of(base.rows), kind.rollups_of(new.rows)
    out: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(set(base_r) | set(new_r)):
        b, n = base_r.get(name, {}), new_r.get(name, {})
        out[name] = [
            {name: key[0], kind.group_names[1]: key[1], "base": b.get(key), "new": n.get(key)}
            for key in sorted(set(b) | set(n))
        ]
    return out


def settings_for(kind: SuiteKind, metric: str | None, **rules: Any) -> Settings:
    """The comparison's settings, the metric checked against the suite's (CompareError)."""
    chosen = metric or kind.default_metric
    accepted = chosen in kind.metrics or bool(kind.accepts_metric and kind.accepts_metric(chosen))
    if not accepted:
        raise CompareError(
            f"--metric {chosen!r} is not a {kind.name} metric; choose from {list(kind.metrics)}"
        )
    return Settings(metric=chosen, companion=kind.companion_of(chosen), **rules)


def run_block(runs: list[RunData]) -> dict[str, Any]:
    return {
        "run_id": ", ".join(run.run_id for run in runs),
        "runs": [{"run_id": r.run_id, "path": str(r.path), "rows": len(r.rows)} for r in runs],
        "rows": sum(len(run.rows) for run in runs),
    }


def finish(
    result: dict[str, Any], groups: list[dict[str, Any]], kind: SuiteKind, settings: Settings
) -> dict[str, Any]:
    """Judge the groups (and, apart, their companions) and add the gate's account, the counts
    and the regressions: what every comparison shape ends with."""
    result["gate"] = verdicts.judge(groups, settings.threshold, settings.min_units, settings.alpha)
    companions = [g["companion"] for g in groups if "companion" in g]
    if companions:
        verdicts.judge(companions, settings.threshold, settings.min_units, settings.alpha)
    first, second = kind.group_names
    regressions = [g for g in groups if g["verdict"] == SLOWER]
    lost_passes = [g for g in result["status_changes"] if g["base_status"] == PASS]
    result["groups"] = groups
    result["counts"] = verdicts.counts(groups)
    result["regression"] = bool(regressions or lost_passes)
    result["regression_reasons"] = [
        f"{g[first]} x {g[second]}: slower (NEW/BASE {g['ratio']:.3f}, CI "
        f"{g['ratio_ci95'][0]:.3f}-{g['ratio_ci95'][1]:.3f}, q {g['q_value']:.3g})"
        for g in regressions
    ] + [f"{g[first]} x {g[second]}: {g['base_status']} -> {g['new_status']}" for g in lost_passes]
    return result


def head(
    kind: SuiteKind, settings: Settings, design: str, sides: Sequence[tuple[str, list[RunData]]]
) -> dict[str, Any]:
    """The fields every comparison starts with: what was compared, how, and the host's state."""
    return {
        "schema": SCHEMA,
        "suite": kind.name,
        "design": design,
        "group_names": list(kind.group_names),
        "metric": settings.metric,
        "metric_family": kind.metric_family(settings.metric),
        "companion_metric": settings.companion,
        "threshold": settings.threshold,
        "statistics": {
            "method": "hierarchical_bootstrap_t_ratio_of_geometric_means",
            "levels": list(hierarchy.LEVELS),
            "resamples": settings.resamples,
            "seed": settings.seed,
            "level": hierarchy.CI_LEVEL,
            "history_between_run": bool(settings.between_run),
        },
        "pollution": pollution.account(
            [(name, run.run_id, run.host_summary) for name, runs in sides for run in runs]
        ),
    }


def compare_runs(
    base: RunsArg,
    new: RunsArg,
    metric: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_BOOTSTRAP_SEED,
    *,
    min_units: int = verdicts.DEFAULT_MIN_UNITS,
    alpha: float = 0.05,
    between_run: Mapping[tuple[str, Group], hierarchy.BetweenRun] | None = None,
    speed_adjust: bool = True,
    use_controls: bool = True,
    use_cross_section: bool = True,
) -> dict[str, Any]:
    """NEW against BASE, each one run or several runs of the same suite.

    ``between_run``: per (metric, group), a between-run variance (log scale) from the run
    history; see ``Settings``. ``speed_adjust``: units rescaled by their processes' speed where
    the implementation's code is the same on both sides (``speed_sides``)."""
    base_runs, new_runs = as_runs(base), as_runs(new)
    kind = _separate_suite(base_runs, new_runs)
    settings = settings_for(
        kind,
        metric,
        threshold=threshold,
        resamples=resamples,
        seed=seed,
        min_units=min_units,
        alpha=alpha,
        between_run=between_run,
        speed_adjust=speed_adjust,
        controls=use_controls,
        cross_section=use_cross_section,
    )
    metrics = [m for m in (settings.metric, settings.companion) if m]
    base_groups = _collect(base_runs, kind, metrics)
    new_groups = _collect(new_runs, kind, metrics)
    shared = sorted(set(base_groups) & set(new_groups))
    fits = _speed_fits(shared, base_groups, new_groups, kind, settings)
    differences = provenance_differences(
        [kind.provenance_of(r) for r in base_runs], [kind.provenance_of(r) for r in new_runs]
    )
    one_run = len(base_runs) == len(new_runs) == 1
    groups, across, account = _judged_groups(
        shared, (base_groups, new_groups), kind, settings, fits, differences, one_run
    )
    sides = [("BASE", base_runs), ("NEW", new_runs)]
    result = head(kind, settings, "separate_runs", sides)
    result.update(
        {
            "base": run_block(base_runs),
            "new": run_block(new_runs),
            "provenance_differences": differences,
            "unmatched": {
                "only_in_base": [list(k) for k in sorted(set(base_groups) - set(new_groups))],
                "only_in_new": [list(k) for k in sorted(set(new_groups) - set(base_groups))],
            },
            "status_changes": [g for g in groups if g["base_status"] != g["new_status"]],
            "rollups": _rollups(kind, base_runs[0], new_runs[0])
            if len(base_runs) == len(new_runs) == 1
            else {},
            "warnings": _warnings(sides, groups, across) + _host_warnings(sides),
        }
    )
    result["statistics"]["speed_adjustment"] = speed_account(fits, settings)
    result["statistics"]["controls"] = account
    result["statistics"]["cross_section"] = across
    return finish(result, groups, kind, settings)


def _separate_suite(base_runs: list[RunData], new_runs: list[RunData]) -> SuiteKind:
    """The one suite both sides' runs are of, none of them an interleaved A/B run
    (CompareError otherwise)."""
    if not base_runs or not new_runs:
        raise CompareError("each side needs at least one run")
    kinds = {run.kind for run in [*base_runs, *new_runs]}
    if len(kinds) != 1:
        raise CompareError(f"the runs are of different suites: {sorted(kinds)}")
    kind = suite_kind(kinds.pop())
    for run in [*base_runs, *new_runs]:
        if kind.ab_of is not None and any(kind.ab_of(row) for row in run.rows):
            raise CompareError(
                f"{run.path} is an interleaved A/B run: compare its two sides with --ab"
            )
    return kind


def _judged_groups(
    shared: Sequence[Group],
    sides: tuple[Mapping[Group, _Side], Mapping[Group, _Side]],
    kind: SuiteKind,
    settings: Settings,
    fits: Mapping[str, Mapping[str, speed_adjust.Fit]],
    differences: Sequence[Mapping[str, Any]],
    one_run: bool,
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Each shared group's figures: judged alone, again with the spreads read across groups
    when those apply, then read against its controls; with the two accounts."""
    base_groups, new_groups = sides

    def figured(judging: Settings) -> list[dict[str, Any]]:
        return [
            _group_entry(key, base_groups[key], new_groups[key], kind, judging, fits)
            for key in shared
        ]

    groups = figured(settings)
    codes = {key: [*base_groups[key].row_codes, *new_groups[key].row_codes] for key in shared}
    unchanged_groups = run_drift.same_code(codes)
    other_hosts = controls.one_host(differences)
    judging, across = run_drift.across_groups(
        dict(zip(shared, groups, strict=True)), unchanged_groups, settings, one_run, other_hosts
    )
    if across["status"] == "used":
        groups = figured(judging)

    def refigure(key: Group, metric: str, drift: float) -> dict[str, Any]:
        fit = fits.get(metric, {}).get(key[1])
        side = (base_groups[key], new_groups[key])
        return _figures(*side, metric, key, judging, kind, fit, drift)

    account = run_drift.against_controls(
        dict(zip(shared, groups, strict=True)),
        unchanged_groups,
        settings,
        fits,
        other_hosts,
        refigure,
    )
    return groups, across, account


def _speed_fits(
    shared: Sequence[Group],
    base_groups: Mapping[Group, _Side],
    new_groups: Mapping[Group, _Side],
    kind: SuiteKind,
    settings: Settings,
) -> dict[str, dict[str, speed_adjust.Fit]]:
    """Per metric (the judged one and its companion) and implementation, the adjustment of
    ``speed_sides``; none when it is off or the suite names no probe for the metric."""
    out: dict[str, dict[str, speed_adjust.Fit]] = {}
    for metric, probe in speed_probes(kind, settings, paired=False):
        sides = {
            key: (
                _units(base_groups[key], metric, kind, probe),
                _units(new_groups[key], metric, kind, probe),
            )
            for key in shared
        }
        out[metric] = speed_sides.fits_by(sides, lambda key: key[1], probe)
    return out


def speed_probes(kind: SuiteKind, settings: Settings, paired: bool) -> list[tuple[str, str]]:
    """(metric, its speed probe) for the judged metric and its companion, where the suite names
    a probe and the adjustment is on."""
    if not settings.speed_adjust:
        return []
    metrics = filter(None, (settings.metric, settings.companion))
    found = [(metric, kind.speed_probe_of(metric, paired)) for metric in metrics]
    return [(metric, probe) for metric, probe in found if probe is not None]


def speed_account(
    fits: Mapping[str, Mapping[str, speed_adjust.Fit]], settings: Settings
) -> dict[str, Any]:
    """What a comparison says about the speed adjustment: off, or the judged metric's fits."""
    if not settings.speed_adjust:
        return {"status": "off"}
    chosen = fits.get(settings.metric)
    if chosen is None:
        return {"status": "no probe", "reason": f"no speed probe for {settings.metric}"}
    return {
        "status": "used" if any(f.applied for f in chosen.values()) else "not applied",
        "probe": next(iter(chosen.values())).probe if chosen else None,
        "implementations": {name: f.as_json() for name, f in chosen.items()},
    }


def _warnings(
    result_runs: Sequence[tuple[str, list[RunData]]],
    groups: list[Any],
    across: Mapping[str, Any],
) -> list[str]:
    """Polluted runs, and between-run noise that could not be estimated, or was read across
    groups rather than from each group's own runs."""
    out = []
    for name, runs in result_runs:
        for run in runs:
            gate = pollution.gate_of(run.host_summary)
            if gate["passed"] is False:
                named = ", ".join(c["condition"] for c in gate["conditions"]) or "gate failed"
                out.append(f"{name} run {run.run_id} ran on a polluted host ({named})")
    if all(len(runs) == 1 for _, runs in result_runs) and groups:
        how = (
            "read across the unchanged groups (each group's own could not be seen)"
            if across.get("status") == "used"
            else "could not be estimated (a change of the host between the runs looks like a "
            "change of the code)"
        )
        out.append(
            f"one run per side: between-run noise {how}; give each side several runs "
            "(--base/--new), or run an interleaved A/B (run --ab-baseline, compare --ab)"
        )
    return out
