"""Text, Markdown, CSV and JSON of a ``metewand measure`` series (human units in text)."""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Mapping
from typing import Any

CSV_COLUMNS = (
    "command",
    "runs",
    "mean_wall_ns",
    "stddev_wall_ns",
    "median_wall_ns",
    "median_wall_ci95_low_ns",
    "median_wall_ci95_high_ns",
    "min_wall_ns",
    "max_wall_ns",
    "median_cpu_user_ns",
    "median_cpu_system_ns",
    "median_cpu_ns",
    "median_peak_memory_bytes",
    "max_process_count",
    "host_polluted_by",
)


def ms(ns: float | None) -> str:
    if ns is None:
        return "unavailable"
    value = ns / 1e6
    if value >= 1000:
        return f"{value / 1000:.3f} s"
    return (
        f"{value:.1f} ms"
        if value >= 100
        else f"{value:.2f} ms"
        if value >= 1
        else f"{value:.3f} ms"
    )


def mib(value: float | None) -> str:
    return "unavailable" if value is None else f"{value / 2**20:.1f} MiB"


def _span(block: Mapping[str, Any], show: Any) -> str:
    ci = block.get("median_ci95")
    return f"[{show(ci[0])} – {show(ci[1])}]" if ci else "[CI unavailable]"


def _ratio_text(ratio: Mapping[str, Any]) -> str:
    if ratio["ratio"] is None:
        return "unavailable"
    ci = ratio["ratio_ci95"]
    span = f" (95% CI {ci[0]:.3f}–{ci[1]:.3f})" if ci else " (CI unavailable)"
    return f"{ratio['ratio']:.3f}×{span}"


def _line(label: str, block: Mapping[str, Any], show: Any) -> str:
    """``label  mean X ± σ   median M [lo – hi]   min … max A … B`` in one unit."""
    if not block["n"]:
        return f"  {label:13} unavailable"
    stddev = show(block["stddev"]) if block["stddev"] is not None else "n/a (1 run)"
    return (
        f"  {label:13} mean {show(block['mean'])} ± {stddev}   median {show(block['median'])} "
        f"{_span(block, show)}   min … max {show(block['min'])} … {show(block['max'])}"
    )


def command_text(index: int, summary: Mapping[str, Any], warmups: int) -> list[str]:
    m = summary["metrics"]
    procs = m["process_count_peak"]
    lines = [
        f"Command {index}: {summary['command']}  ({summary['runs']} runs, {warmups} warm-up)",
        _line("wall time", m["wall_time_ns"], ms),
        _line("CPU (tree)", m["cpu_time_ns"], ms),
        f"  {'':13} user {ms(m['cpu_user_time_ns']['median'])}, "
        f"system {ms(m['cpu_system_time_ns']['median'])} (medians)",
        _line("peak memory", m["peak_memory_bytes"], mib),
        f"  {'processes':13} at most "
        + (f"{procs['max']:.0f}" if procs["max"] is not None else "unavailable"),
    ]
    return lines + [f"  warning: {w}" for w in summary["warnings"]]


def report_text(result: Mapping[str, Any]) -> str:
    lines = []
    for index, (summary, series) in enumerate(
        zip(result["summaries"], result["commands"], strict=True), start=1
    ):
        lines += command_text(index, summary, series["warmups"])
        lines += series_phases_text(series["runs"]) + [""]
    if result["ratios"]:
        first = result["ratios"][0]["reference"]
        lines.append(f"Relative to command 1 ({first}), median / median:")
        for ratio in result["ratios"]:
            wall = ratio["metrics"]["wall_time_ns"]
            verdict = _faster_slower(wall)
            lines.append(
                f"  {ratio['command']}: wall {_ratio_text(wall)}{verdict}; "
                f"CPU {_ratio_text(ratio['metrics']['cpu_time_ns'])}; "
                f"peak memory {_ratio_text(ratio['metrics']['peak_memory_bytes'])}"
            )
    return "\n".join(lines).rstrip() + "\n" + host_text(result["host"])


def host_text(host: Mapping[str, Any]) -> str:
    """The pollution warning with each tripped condition's detail (foreign CPU names the top
    foreign processes by comm[pid]), or nothing on a clean host."""
    gate = host["gate"]
    if gate["passed"]:
        return ""
    reasons = ", ".join(t["condition"] for t in gate["triggered"]) or "unknown"
    lines = [f"warning: the host was polluted during the runs ({reasons}); figures may be inflated"]
    for tripped in gate["triggered"]:
        lines.append(f"  {tripped['condition']}: {tripped['detail']}")
        top = tripped["figures"].get("top_foreign") or []
        if top:  # every process the gate names, not only the detail's first three
            named = ", ".join(f"{t['comm']}[{t['pid']}] {t['cpu_cores_mean']:.2f}" for t in top)
            lines.append(f"    foreign processes while over (mean cores): {named}")
    return "\n".join(lines) + "\n"


def _form(value: Mapping[str, Any] | None, show: Any) -> str:
    if not value or value.get("value") is None:
        reason = (value or {}).get("reason", "missing")
        return f"unavailable ({reason})"
    shown = show(value["value"])
    return shown + (f" (partial: {value['reason']})" if value["status"] == "partial" else "")


def _signed_mib(value: float) -> str:
    return f"{value / 2**20:+.1f} MiB"


def _count(value: float) -> str:
    return f"{value:.0f}"


PHASE_COLUMNS = (
    ("wall", "wall_time_ns", ms),
    ("CPU", "cpu_time_ns", ms),
    ("user", "cpu_user_time_ns", ms),
    ("system", "cpu_system_time_ns", ms),
    ("memory rise", "memory_rise_bytes", _signed_mib),
    ("processes at end", "process_count_end", _count),
)


def phases_text(phases: Mapping[str, Any] | None) -> str:
    """One run's phases (``metewand_phases/1``), one line each, then what lies between marks."""
    if phases is None:
        return ""
    lines = [f"phases ({phases['mark_count']} marks):"]
    for phase in phases["phases"]:
        cells = ", ".join(
            f"{label} {_form(phase[key], show)}" for label, key, show in PHASE_COLUMNS
        )
        lines.append(f"  {phase['name']}: {cells}")
    between = phases["between_marks"]
    if between["stretches"]:
        lines.append(
            f"  between marks ({between['stretches']} stretch(es)): wall "
            f"{_form(between['wall_time_ns'], ms)}, CPU {_form(between['cpu_time_ns'], ms)}"
        )
    adds_up = phases["cpu_adds_up"]
    if adds_up is False:
        lines.append(
            f"  the phases' CPU is not the run's total within {phases['adds_up_fraction']:.0%}: "
            "the rest is between marks"
        )
    if phases["late_marks"]:
        lines.append(f"  {phases['late_marks']} mark(s) arrived after the command ended")
    return "\n".join(lines) + "\n"


def series_phases_text(runs: list[Mapping[str, Any]]) -> list[str]:
    """Per phase name (in first-seen order), the median over runs of wall, CPU, user, system."""
    marked = [r["phases"] for r in runs if r.get("phases")]
    if not marked:
        return []
    names: list[str] = []
    for record in marked:
        names += [p["name"] for p in record["phases"] if p["name"] not in names]
    lines = [f"  phases (medians over {len(marked)} marked runs):"]
    for name in names + ["between marks"]:
        spans = [_phase_named(record, name) for record in marked]
        cells = []
        for label, key, show in PHASE_COLUMNS[:4]:
            values = [
                s[key]["value"] for s in spans if s and s.get(key, {}).get("value") is not None
            ]
            cells.append(f"{label} {show(statistics.median(values)) if values else 'unavailable'}")
        lines.append(f"    {name}: " + ", ".join(cells))
    return lines


def _phase_named(record: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    if name == "between marks":
        return record["between_marks"]
    found = [p for p in record["phases"] if p["name"] == name]
    return found[0] if found else None


def _faster_slower(ratio: Mapping[str, Any]) -> str:
    ci = ratio.get("ratio_ci95")
    if not ci:
        return ""
    if ci[0] > 1:
        return f" — {ratio['ratio']:.2f}× slower"
    if ci[1] < 1:
        return f" — {1 / ratio['ratio']:.2f}× faster"
    return " — no difference the CI can show"


def report_markdown(result: Mapping[str, Any]) -> str:
    head = "| command | runs | mean ± σ | median [95% CI] | min … max | CPU median | peak memory |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for summary in result["summaries"]:
        m = summary["metrics"]
        wall = m["wall_time_ns"]
        stddev = ms(wall["stddev"]) if wall["stddev"] is not None else "n/a"
        command = summary["command"].replace("|", "\\|")
        lines.append(
            f"| `{command}` | {summary['runs']} | {ms(wall['mean'])} ± {stddev} | "
            f"{ms(wall['median'])} {_span(wall, ms)} | {ms(wall['min'])} … {ms(wall['max'])} | "
            f"{ms(m['cpu_time_ns']['median'])} | {mib(m['peak_memory_bytes']['median'])} |"
        )
    for ratio in result["ratios"]:
        lines.append("")
        lines.append(
            f"`{ratio['command']}` / `{ratio['reference']}` wall: "
            f"{_ratio_text(ratio['metrics']['wall_time_ns'])}"
        )
    warning = host_text(result["host"])
    return "\n".join(lines) + "\n" + ("\n" + warning if warning else "")


def report_csv(result: Mapping[str, Any]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    polluted_by = ";".join(t["condition"] for t in result["host"]["gate"]["triggered"])
    for summary in result["summaries"]:
        m = summary["metrics"]
        wall = m["wall_time_ns"]
        ci = wall["median_ci95"] or [None, None]
        cells = [
            summary["command"],
            summary["runs"],
            wall["mean"],
            wall["stddev"],
            wall["median"],
            ci[0],
            ci[1],
            wall["min"],
            wall["max"],
            m["cpu_user_time_ns"]["median"],
            m["cpu_system_time_ns"]["median"],
            m["cpu_time_ns"]["median"],
            m["peak_memory_bytes"]["median"],
            m["process_count_peak"]["max"],
            polluted_by,
        ]
        writer.writerow(["" if c is None else c for c in cells])
    return buffer.getvalue()
