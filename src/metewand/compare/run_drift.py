"""Separate runs read against what moved between them: the between-run spreads read across the
unchanged groups (``compare.cross_section``) and the host's drift that the unchanged
implementations read (``compare.controls``). ``compare.run_compare`` figures the groups; this
module decides which spreads and drifts apply, and hands each group back to be figured again
through a ``refigure(group, metric, drift)`` callable."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from metewand.compare import controls, cross_section, hierarchy, speed_adjust, speed_sides
from metewand.compare.suite_registry import Group

if TYPE_CHECKING:
    from metewand.compare.run_compare import Settings

Refigure = Callable[[Group, str, float], dict[str, Any]]


def same_code(codes: Mapping[Group, Iterable[str | None]]) -> set[Group]:
    """The groups that carry one known code identity in every row of both sides (``codes``:
    each group's rows' identities). Per group, not per implementation: a browser engine's
    identity holds its task, so an edited task changes that task's groups alone, and the
    engine's other groups still serve as controls and in the spread across groups."""
    return {key for key, seen in codes.items() if controls.one_identity(seen)}


def _metrics(settings: Settings) -> list[str]:
    return [m for m in (settings.metric, settings.companion) if m]


def across_groups(
    figured: Mapping[Group, dict[str, Any]],
    unchanged_groups: set[Group],
    settings: Settings,
    one_run: bool,
    other_hosts: str | None,
) -> tuple[Settings, dict[str, Any]]:
    """Settings whose between-run spreads hold, for each metric the history lends none for,
    the spread read across the unchanged groups (``compare.cross_section``); and the account.
    ``figured``: each group's figures as judged alone."""
    why = cross_section.refusal(
        settings.cross_section, one_run, other_hosts, bool(unchanged_groups)
    )
    if why:
        return settings, {"status": "not used", "reason": why}
    keys = list(figured)
    figures = {settings.metric: list(figured.values())}
    if settings.companion:
        figures[settings.companion] = [g.get("companion") or {} for g in figured.values()]
    history = settings.between_run or {}
    added, metrics = cross_section.read(keys, figures, unchanged_groups & set(keys), history)
    if not added:
        why = "no group has enough unchanged others"
        return settings, {"status": "not used", "reason": why, "metrics": metrics}
    judging = replace(settings, between_run={**history, **added})
    return judging, {"status": "used", "metrics": metrics}


def against_controls(
    figured: Mapping[Group, dict[str, Any]],
    unchanged_groups: set[Group],
    settings: Settings,
    fits: Mapping[str, Mapping[str, speed_adjust.Fit]],
    other_hosts: str | None,
    refigure: Refigure,
) -> dict[str, Any]:
    """Each group's figures (``figured``, updated in place) read against the host's drift that
    the other unchanged implementations' groups read (``compare.controls``); what was done, or
    why not. ``settings`` are the comparison's own: only the history's spreads may decline."""
    if not settings.controls:
        return {"status": "off"}
    if other_hosts is not None:
        return {"status": "not applied", "reason": f"the runs' hosts differ ({other_hosts})"}
    if not unchanged_groups:  # every implementation changed, or no row names its code
        return {
            "status": "not applicable",
            "reason": "no implementation's code is known to be the same on both sides",
        }
    implementation_of = {key: key[1] for key in figured}
    unchanged = sorted({key[1] for key in unchanged_groups})
    out: dict[str, Any] = {"status": "used", "unchanged": unchanged, "metrics": {}}
    for metric in _metrics(settings):
        judged = metric == settings.metric
        first = {
            key: group if judged else group["companion"]
            for key, group in figured.items()
            if judged or "companion" in group
        }

        def again_of(key: Group, drift: float, metric: str = metric) -> dict[str, Any]:
            return refigure(key, metric, drift)

        decline = _history_decline(list(figured), metric, settings, fits.get(metric, {}))
        again, out["metrics"][metric] = controls.read_against_controls(
            first, implementation_of, unchanged_groups, again_of, decline
        )
        for key, figures in again.items():
            if judged:
                figured[key].update(figures)
            else:
                figured[key]["companion"] = figures
    if not any(block["implementations"] for block in out["metrics"].values()):
        out["status"] = "not applied"
    return out


def _history_decline(
    keys: list[Group],
    metric: str,
    settings: Settings,
    fits: Mapping[str, speed_adjust.Fit],
) -> Callable[[str, float], str | None]:
    """``decline(implementation, log drift)`` for ``controls.read_against_controls``: the
    history's say (``controls.history_against``) for an implementation whose every group has
    both history spreads; None for any other."""
    by_implementation: dict[str, list[tuple[float, float] | None]] = {}
    for key in keys:
        between = (settings.between_run or {}).get((metric, key))
        fit = fits.get(key[1])
        beta = fit.beta if fit is not None else None
        pair = None
        if between is not None and between.controlled is not None:
            pair = (_added(between, beta), _added(between.controlled, beta))
        by_implementation.setdefault(key[1], []).append(pair)

    def decline(name: str, drift: float) -> str | None:
        pairs = by_implementation.get(name, [])
        known = [pair for pair in pairs if pair is not None]
        return controls.history_against(known, drift) if len(known) == len(pairs) else None

    return decline


def _added(between: hierarchy.BetweenRun, beta: float | None) -> float:
    """The between-run variance as ``speed_sides.figures`` adds it to a side of one run."""
    adjusted = speed_sides.adjusted_between(between, beta) if beta is not None else between
    return adjusted.variance if adjusted is not None else between.variance
