"""A comparison (``run_compare.compare_runs`` output) as rows, Markdown and HTML.

Provenance differences and warnings come first: they decide whether the rest can be trusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metewand import markdown as md
from metewand.compare.driver_costs import ROLLUP_HEAD, rollup_rows
from metewand.compare.fmt import bytes_text, ns_text
from metewand.compare.html_parts import page, paragraph, section, table

HEADER = ("ratio NEW/BASE [95% CI]", "verdict", "BASE median (n)", "NEW median (n)", "status")


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
        return group.get("note") or "no successful attempt"
    ci = group["ratio_ci95"]
    span = f" [{ci[0]:.3f}–{ci[1]:.3f}]" if ci else " (CI undefined)"
    return f"{group['ratio']:.3f}×{span}"


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


def group_rows(result: Mapping[str, Any], short: bool = False) -> list[list[str]]:
    first, second = result["group_names"]
    metric = result["metric"]
    names = _shortened([str(g[first]) for g in result["groups"]]) if short else {}
    rows = []
    for g in result["groups"]:
        status = g["new_status"]
        if g["base_status"] != g["new_status"]:
            status = f"{g['base_status']} → {g['new_status']}"
        rows.append(
            [
                names.get(str(g[first]), str(g[first])),
                str(g[second]),
                ratio_text(g),
                g["verdict"],
                _side_cell(g, "base", metric),
                _side_cell(g, "new", metric),
                status,
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
    return (
        f"{result['suite']} runs {result['base']['run_id']} (BASE) vs {result['new']['run_id']} "
        f"(NEW), metric {result['metric']}, threshold {result['threshold'] * 100:g}%: "
        + ", ".join(parts)
        + f"; {len(result['status_changes'])} status changes"
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
    lines += ["## Provenance differences", ""]
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
    lines += md.table([*names, *HEADER], group_rows(result))
    for name, entries in result.get("rollups", {}).items():
        lines += ["", f"## Per {name.replace('_', ' ')}", ""]
        lines += md.table([name, *ROLLUP_HEAD], rollup_rows(entries, name))
    if unmatched_rows(result):
        lines += ["", "## Unmatched groups", ""]
        lines += md.table(["side", *names], unmatched_rows(result))
    boot = result["bootstrap"]
    lines += [
        "",
        f"A group is slower/faster only when the whole 95% CI of NEW/BASE lies beyond "
        f"±{result['threshold'] * 100:g}%. Bootstrap: {boot['resamples']} resamples of each "
        f"run's attempts, seed {boot['seed']}.",
    ]
    return "\n".join(lines) + "\n"


def html(result: Mapping[str, Any]) -> str:
    names = list(result["group_names"])
    provenance = (
        table(["fact", "BASE", "NEW"], provenance_rows(result))
        if result["provenance_differences"]
        else paragraph("None of the recorded provenance facts differ.", "muted")
    )
    warnings = "".join(paragraph(f"Warning: {w}", "bad") for w in result["warnings"])
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
            section("groups", "Groups", table([*names, *HEADER], group_rows(result))),
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
