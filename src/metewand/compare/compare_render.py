"""A comparison (``run_compare.compare_runs`` output) as rows, Markdown and HTML.

Provenance differences and warnings come first: they decide whether the rest can be trusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metewand import markdown as md
from metewand.compare import controls, pollution, verdicts
from metewand.compare.driver_costs import ROLLUP_HEAD, rollup_rows
from metewand.compare.fmt import bytes_text, ns_text
from metewand.compare.html_parts import page, paragraph, section, table

HEADER = ("ratio NEW/BASE [95% CI]", "p (q)", "verdict", "BASE median (n)", "NEW median (n)")
STATUS = "status"


def value_text(metric: str, value: float | None) -> str:
    if value is None:
        return "no successful attempt"
    if metric.endswith("_ns"):
        return ns_text(value)
    if metric.endswith("_bytes"):
        return bytes_text(value)
    if metric.endswith("_ms"):
        return f"{value:.2f} ms" if value < 100 else f"{value:.0f} ms"
    return f"{value:.6g}"


def ratio_text(group: Mapping[str, Any]) -> str:
    if group["ratio"] is None:
        return group.get("note") or group.get("undefined") or "no successful attempt"
    ci = group["ratio_ci95"]
    span = f" [{ci[0]:.3f}–{ci[1]:.3f}]" if ci else " (CI undefined)"
    return f"{group['ratio']:.3f}×{span}"


def p_text(group: Mapping[str, Any]) -> str:
    """``0.0022 (0.011)``: the rank test's p and its Benjamini–Hochberg q (— when not tested)."""
    p, q = group.get("p_value"), group.get("q_value")
    if p is None:
        return "—"
    return f"{p:.2g} ({q:.2g})" if q is not None else f"{p:.2g} (not in family)"


def companion_header(result: Mapping[str, Any]) -> list[str]:
    companion = result.get("companion_metric")
    return [f"{_short_metric(companion)} NEW/BASE [CI], verdict"] if companion else []


def _short_metric(metric: str) -> str:
    return {
        "cpu_time_ns": "CPU",
        "timed_wall_time_ns": "wall",
        "duration_ms": "wall",
        "engine_cpu_ns": "engine CPU",
    }.get(metric, metric)


def _companion_cell(group: Mapping[str, Any], short: bool = False) -> str:
    companion = group.get("companion")
    if not isinstance(companion, Mapping):
        return "—"
    if short:
        return ratio_text(companion)
    return f"{ratio_text(companion)}, {verdicts.verdict_text(companion)}"


def _shortened(labels: list[str]) -> dict[str, str]:
    """Drop what every label shares: a leading ``experiment/case: `` and a trailing ``[scope]``.

    For the terminal only (80 columns); files keep the whole label.
    """
    heads = {label.split(": ", 1)[0] for label in labels if ": " in label}
    tails = {label.rsplit(" [", 1)[1] for label in labels if " [" in label}
    out = {}
    for label in labels:
        short = label
        if len(heads) == 1 and all(": " in x for x in labels):
            short = short.split(": ", 1)[1]
        if len(tails) == 1 and all(" [" in x for x in labels):
            short = short.rsplit(" [", 1)[0]
        out[label] = short
    return out


def _show_status(result: Mapping[str, Any]) -> bool:
    return bool(result["status_changes"]) or any(
        g["new_status"] != "pass" for g in result["groups"]
    )


def header(result: Mapping[str, Any], short: bool = False) -> list[str]:
    """The groups table's columns; ``short`` (the terminal): one medians column, and the
    status column only when some group did not pass."""
    medians = ["medians BASE → NEW (n)"] if short else list(HEADER[3:])
    status = [STATUS] if not short or _show_status(result) else []
    companion = companion_header(result)
    if short and companion:
        companion = [f"{_short_metric(result['companion_metric'])} NEW/BASE"]
    return [*result["group_names"], *HEADER[:3], *medians, *companion, *status]


def group_rows(result: Mapping[str, Any], short: bool = False) -> list[list[str]]:
    first, second = result["group_names"]
    metric = result["metric"]
    names = _shortened([str(g[first]) for g in result["groups"]]) if short else {}
    rows = []
    for g in result["groups"]:
        status = g["new_status"]
        if g["base_status"] != g["new_status"]:
            status = f"{g['base_status']} → {g['new_status']}"
        if short:
            medians = [f"{_side_cell(g, 'base', metric)} → {_side_cell(g, 'new', metric)}"]
        else:
            medians = [_side_cell(g, "base", metric), _side_cell(g, "new", metric)]
        companion = []
        if result.get("companion_metric"):
            companion = [_companion_cell(g, short)]
        rows.append(
            [
                names.get(str(g[first]), str(g[first])),
                str(g[second]),
                ratio_text(g),
                p_text(g),
                verdicts.verdict_text(g),
                *medians,
                *companion,
                *([status] if not short or _show_status(result) else []),
            ]
        )
    return rows


def _side_cell(group: Mapping[str, Any], side: str, metric: str) -> str:
    """``12.3 ms (5)``; a median over rows of several Dask hosts says it pools them."""
    text = f"{value_text(metric, group[side]['median'])} ({group[side]['n']})"
    pooled = (group.get("pooled_over_hosts") or {}).get(side)
    return f"{text}, {pooled.split(' (', 1)[0].removeprefix('pooled over ')}" if pooled else text


def headline(result: Mapping[str, Any]) -> str:
    counts = result["counts"]
    parts = [f"{counts.get(v, 0)} {v}" for v in ("slower", "faster", "no change", "not comparable")]
    design = {"interleaved_ab": "interleaved A/B run", "paired_engines": "engines of run"}.get(
        result.get("design", ""), "runs"
    )
    if result.get("design") in ("interleaved_ab", "paired_engines"):
        what = f"{design} {result['base']['run_id']} ({result['new']['side']} / {result['base']['side']})"
    else:
        what = f"runs {result['base']['run_id']} (BASE) vs {result['new']['run_id']} (NEW)"
    return (
        f"{result['suite']} {what}, metric {result['metric']}, threshold "
        f"{result['threshold'] * 100:g}%: "
        + ", ".join(parts)
        + f"; {len(result['status_changes'])} status changes"
    )


def notes(result: Mapping[str, Any]) -> list[str]:
    """What the reader must know before the table: the host, the between-run noise, the gate."""
    out = []
    stated = pollution.statement(result["pollution"])
    if stated:
        out.append(stated)
    nc = verdicts.not_comparable_text(result["gate"])
    if nc:
        out.append(nc)
    history = history_text(
        result["statistics"].get("history"), result["statistics"].get("cross_section")
    )
    if history:
        out.append(history)
    speed = speed_text(result["statistics"].get("speed_adjustment"))
    if speed:
        out.append(speed)
    noun = (result.get("group_names") or ["", "implementation"])[-1]
    drift_note = controls_text(result["statistics"].get("controls"), result["metric"], noun)
    if drift_note:
        out.append(drift_note)
    return out


def controls_text(
    account: Mapping[str, Any] | None, metric: str, noun: str = "implementation"
) -> str | None:
    """The host's drift between the runs as each implementation (``noun``: a browser run's
    engine) read it from its controls, or why none was read against one."""
    if not account or account["status"] in ("off", "not applicable"):
        return None
    if "reason" in account:
        return f"not read against the unchanged {noun}s: {account['reason']}"
    block = account["metrics"].get(metric) or {}
    parts = [
        f"{name} x{d['drift']:.3f} ({_drift_source(d)})"
        for name, d in block.get("implementations", {}).items()
    ]
    parts += [f"{name} not: {why}" for name, why in block.get("not_adjusted", {}).items()]
    return (
        f"each {noun} read against the host's drift between the runs that the other "
        f"unchanged {noun}s read, or its own other unchanged groups where it has "
        f"{controls.MIN_OWN_GROUPS} or more (--no-controls: off): {'; '.join(parts)}"
    )


def _drift_source(drift: Mapping[str, Any]) -> str:
    if drift.get("own_groups"):
        groups = drift["control_groups"]
        return f"from its own {groups} unchanged groups, each group leaving itself out"
    return f"from {', '.join(drift['controls'])}"


def speed_text(account: Mapping[str, Any] | None) -> str | None:
    """Which implementations' pairs were adjusted for process speed, by how much, and why not."""
    if not account or account["status"] in ("off", "no probe"):
        return None
    parts = []
    for name, fit in account["implementations"].items():
        if fit["applied"] and fit["probe_moved"]:
            moved = f"its probe moved x{fit['probe_ratio']:.3f} (p {fit['probe_p']:.2g})"
            parts.append(f"{name} beta {fit['beta']:.2f}, {moved}")
        elif fit["applied"] and fit.get("host_drift"):
            drift = f"its code changed: the host's drift x{fit['host_drift']:.3f} from the others"
            parts.append(f"{name} beta {fit['beta']:.2f}, {drift}")
        elif fit["applied"]:
            parts.append(f"{name} beta {fit['beta']:.2f}")
        else:
            parts.append(f"{name} not adjusted: {fit['reason']}")
        if fit["applied"] and fit.get("unprobed"):
            parts[-1] += f" ({fit['unprobed']} of {fit['units']} without a probe left as read)"
    return (
        f"worker processes' times read against their speed, from their {account['probe']} "
        f"(--no-speed-adjust: off): {'; '.join(parts)}"
    )


def history_text(
    account: Mapping[str, Any] | None, across: Mapping[str, Any] | None = None
) -> str | None:
    """Where a side of one run took its between-run noise from, or why it had none."""
    if not account or account["status"] == "not needed":
        return None
    instead = (
        "read across the other unchanged groups instead (--no-cross-section: off)"
        if (across or {}).get("status") == "used"
        else "could not be estimated"
    )
    if account["status"] == "used":
        if not account["groups"]:
            return (
                f"history {account['path']}: no group has {account['min_runs']} earlier runs "
                f"on this host; between-run noise {instead}"
            )
        low, high = account["earlier_runs"]
        runs = f"{low}" if low == high else f"{low}-{high}"
        return (
            f"between-run noise from the history ({account['path']}): {account['groups']} "
            f"group x metric spreads over {runs} earlier runs; a change must exceed them"
            + _controlled_text(account)
        )
    where = "--no-history" if account["status"] == "off" else f"no history at {account['path']}"
    return f"{where}: between-run noise of a side with one run {instead}"


def _controlled_text(account: Mapping[str, Any]) -> str:
    parts = []
    if account.get("controlled_groups"):
        parts.append(
            f"{account['controlled_groups']} also with each earlier run's drift taken out, for "
            "a group read against its controls"
        )
    if account.get("clean_runs_only"):
        parts.append(f"{', '.join(account['clean_runs_only'])}: of runs with a clean host gate")
    return f" ({'; '.join(parts)})" if parts else ""


def method_text(result: Mapping[str, Any]) -> str:
    gate, stats = result["gate"], result["statistics"]
    walsh = any(g.get("ci_method") == "walsh" for g in result["groups"])
    paired = (
        "; for one run's pairs, the Hodges–Lehmann ratio and the Walsh CI that inverts the "
        "signed-rank test"
        if walsh
        else ""
    )
    return (
        f"A group is slower/faster only when the whole 95% CI of NEW/BASE (ratio of 20%-trimmed "
        f"geometric means; hierarchical bootstrap-t over runs ⊃ process launches ⊃ repetitions, "
        f"{stats['resamples']} resamples, seed {stats['seed']}{paired}) lies beyond "
        f"±{result['threshold'] * 100:g}% and a rank test over the independent units is "
        f"significant after Benjamini–Hochberg over the {gate['family_size']} comparable groups "
        f"(q <= {gate['alpha']:g}); a group with fewer than {gate['min_units']} units on a side "
        f"is not comparable and not counted by the gate."
    )


def provenance_rows(result: Mapping[str, Any]) -> list[list[str]]:
    return [[d["fact"], str(d["base"]), str(d["new"])] for d in result["provenance_differences"]]


def unmatched_rows(result: Mapping[str, Any]) -> list[list[str]]:
    rows = [["only in BASE", *key] for key in result["unmatched"]["only_in_base"]]
    return rows + [["only in NEW", *key] for key in result["unmatched"]["only_in_new"]]


def markdown(result: Mapping[str, Any]) -> str:
    names = list(result["group_names"])
    lines = [f"# Comparison: {result['base']['run_id']} → {result['new']['run_id']}", ""]
    lines += [headline(result), ""]
    lines += [f"**Note:** {md.text(note)}" for note in notes(result)]
    lines += ["", "## Provenance differences", ""]
    lines += (
        md.table(["fact", "BASE", "NEW"], provenance_rows(result))
        if result["provenance_differences"]
        else ["None of the recorded provenance facts differ."]
    )
    for warning in result["warnings"]:
        lines += ["", f"**Warning:** {warning}"]
    if result["regression_reasons"]:
        lines += ["", "## Regressions", ""] + [f"- {r}" for r in result["regression_reasons"]]
    lines += ["", "## Groups", ""]
    lines += md.table(header(result), group_rows(result))
    for name, entries in result.get("rollups", {}).items():
        lines += ["", f"## Per {name.replace('_', ' ')}", ""]
        lines += md.table([name, *ROLLUP_HEAD], rollup_rows(entries, name))
    if unmatched_rows(result):
        lines += ["", "## Unmatched groups", ""]
        lines += md.table(["side", *names], unmatched_rows(result))
    lines += ["", method_text(result)]
    return "\n".join(lines) + "\n"


def html(result: Mapping[str, Any]) -> str:
    names = list(result["group_names"])
    provenance = (
        table(["fact", "BASE", "NEW"], provenance_rows(result))
        if result["provenance_differences"]
        else paragraph("None of the recorded provenance facts differ.", "muted")
    )
    warnings = "".join(paragraph(f"Warning: {w}", "bad") for w in result["warnings"])
    warnings += "".join(paragraph(f"Note: {n}", "bad") for n in notes(result))
    parts = [
        (
            "provenance",
            "Provenance",
            section("provenance", "Provenance differences", provenance, warnings),
        ),
        (
            "regressions",
            "Regressions",
            section(
                "regressions",
                "Regressions",
                *(paragraph(r, "bad") for r in result["regression_reasons"]),
                "" if result["regression_reasons"] else paragraph("None.", "muted"),
            ),
        ),
        (
            "groups",
            "Groups",
            section(
                "groups",
                "Groups",
                table(header(result), group_rows(result)),
                paragraph(method_text(result), "muted"),
            ),
        ),
        *(
            (
                f"rollup-{name}",
                f"Per {name.replace('_', ' ')}",
                section(
                    f"rollup-{name}",
                    f"Per {name.replace('_', ' ')}",
                    table([name, *ROLLUP_HEAD], rollup_rows(entries, name)),
                ),
            )
            for name, entries in result.get("rollups", {}).items()
        ),
        (
            "unmatched",
            "Unmatched",
            section(
                "unmatched",
                "Unmatched groups",
                table(["side", *names], unmatched_rows(result))
                if unmatched_rows(result)
                else paragraph("Every group is in both runs.", "muted"),
            ),
        ),
    ]
    body = paragraph(headline(result)) + "".join(p for _, _, p in parts)
    title = f"metewand compare: {result['base']['run_id']} → {result['new']['run_id']}"
    return page(title, [(i, t) for i, t, _ in parts], body)
