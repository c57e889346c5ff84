"""Text, Markdown and CSV of ``metewand measure`` (human units and readable labels in text).

Plain text, aligned to its own content and never cut: a command line or a name is shown whole
whatever the terminal's width (a CI log is read later, in a wider window or none). Times follow
``--time-unit`` (``auto`` picks per value); CSV and JSON keep raw integer ns and bytes.
"""

from __future__ import annotations

import io
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from metewand.cli.measure_stats import median, verdict

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
    "name",
    "median_wall_ci_level",
)
UNITS = {"microsecond": (1e3, "µs"), "millisecond": (1e6, "ms"), "second": (1e9, "s")}
# Labels of the single-run table, in its order: what each field holds, in words.
FIELD_LABELS = {
    "wall_time_ns": "wall time",
    "cpu_time_ns": "CPU, user + system (whole tree)",
    "cpu_user_time_ns": "CPU, user",
    "cpu_system_time_ns": "CPU, system",
    "peak_memory_bytes": "peak memory (whole tree)",
    "pss_baseline_bytes": "PSS at start",
    "pss_peak_bytes": "PSS, highest seen",
    "pss_end_bytes": "PSS at end",
    "process_count_peak": "processes at once, most",
}
SHORT_WALL_NS = 5_000_000  # below this, exec and exit work alone can put CPU above wall


def duration(ns: float | None, unit: str = "auto") -> str:
    if ns is None:
        return "unavailable"
    if unit != "auto":
        scale, name = UNITS[unit]
        value = ns / scale
        decimals = 0 if value >= 1000 else 1 if value >= 100 else 2 if value >= 1 else 3
        return f"{value:,.{decimals}f} {name}"
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


def ms(ns: float | None) -> str:
    return duration(ns)


def mib(value: float | None) -> str:
    return "unavailable" if value is None else f"{value / 2**20:.1f} MiB"


def _count(value: float) -> str:
    return f"{value:.0f}"


def _signed_mib(value: float) -> str:
    return f"{value / 2**20:+.1f} MiB"


def shower(field: str, unit: str) -> Callable[[float | None], str]:
    """How a field's value is shown: durations in ``unit``, bytes in MiB, counts plain."""
    if field.endswith("_ns"):
        return lambda v: duration(v, unit)
    if field.endswith("_bytes"):
        return mib
    return lambda v: "unavailable" if v is None else _count(v)


def aligned(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Columns as wide as their widest cell (nothing is ever cut)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        (
            indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def cpu_over_wall_note(
    cpu: float | None, wall: float | None, processes: float | None
) -> str | None:
    """Why CPU can exceed wall time, when it does."""
    if cpu is None or wall is None or wall <= 0 or cpu <= wall:
        return None
    many = f", up to {processes:.0f} processes at once" if processes and processes > 1 else ""
    if wall < SHORT_WALL_NS:
        return (
            f"CPU is {cpu / wall:.2f}x the wall time: for a command this short, the kernel's "
            "exec and exit work, which the group's CPU counts and the exec-to-exit wall time "
            f"does not, can be most of it; several threads or processes at once add to it{many}"
        )
    return (
        f"CPU is {cpu / wall:.2f}x the wall time: the tree ran on more than one core at a time "
        f"(several threads or processes{many})"
    )


# -- one run ----------------------------------------------------------------------------------


def single_run_text(report: Mapping[str, Any], unit: str = "auto") -> str:
    """The table of one run (``SubjectReport.to_json()`` plus host), its notes and phases."""
    name = report.get("command_name") or shlex.join(report["argv"])
    rows = [("measurement", "value", "form", "source")]
    for field, label in FIELD_LABELS.items():
        form = report[field]
        value = shower(field, unit)(form.get("value"))
        status = form["status"] + (f" ({form['reason']})" if form.get("reason") else "")
        rows.append((label, value, status, report["sources"].get(field) or ""))
    lines = [f"metewand measure ({report['backend']}): {name}", *aligned(rows)]
    ended = (
        f"signal {report['signal']} ({report['signal_name']})"
        if report["signal"]
        else f"exit status {report['exit_status']}"
    )
    lines.append(f"command ended with {ended}")
    note = cpu_over_wall_note(
        report["cpu_time_ns"].get("value"),
        report["wall_time_ns"].get("value"),
        report["process_count_peak"].get("value"),
    )
    if note:
        lines.append(f"note: {note}")
    lines.append("quality flags: " + (", ".join(report["quality_flags"]) or "none"))
    lines += [f"fallback: {reason}" for reason in report["fallback_reasons"]]
    sampler = report["sampler"]
    lines.append(
        f"sampler: {sampler['tick_count']} ticks, {sampler['pss_sample_count']} PSS scans, "
        f"{sampler['sampler_cpu_ns'] / 1e6:.1f} ms CPU"
    )
    text = "\n".join(lines) + "\n"
    return text + phases_text(report.get("phases"), unit) + host_text(report["host"])


# -- series -----------------------------------------------------------------------------------


def _span(block: Mapping[str, Any], show: Callable[[float | None], str]) -> str:
    ci = block.get("median_ci95")
    if not ci:
        return "[CI needs 6 runs]" if block["n"] < 6 else "[CI unavailable]"
    return f"[{show(ci[0])} – {show(ci[1])}]"


def _stat_row(
    label: str, block: Mapping[str, Any], show: Callable[[float | None], str]
) -> tuple[str, ...]:
    if not block["n"]:
        return (label, "unavailable", "", "", "")
    stddev = show(block["stddev"]) if block["stddev"] is not None else "n/a (1 run)"
    return (
        label,
        f"{show(block['median'])} {_span(block, show)}",
        f"{show(block['mean'])} ± {stddev}",
        show(block["min"]),
        show(block["max"]),
    )


def command_text(
    index: int, summary: Mapping[str, Any], series: Mapping[str, Any], unit: str = "auto"
) -> list[str]:
    m = summary["metrics"]
    time_of = shower("_ns", unit)
    label = summary.get("name") or summary["command"]
    head = f"Command {index}: {label}"
    if summary.get("name"):
        head += f"  ({summary['command']})"
    lines = [f"{head}  —  {summary['runs']} runs, {series['warmups']} warm-up"]
    rows = [
        ("", "median [95% CI]", "mean ± σ", "min", "max"),  # the CI: exact level >= 95%
        _stat_row("wall time", m["wall_time_ns"], time_of),
        _stat_row("CPU (tree)", m["cpu_time_ns"], time_of),
        _stat_row("  user", m["cpu_user_time_ns"], time_of),
        _stat_row("  system", m["cpu_system_time_ns"], time_of),
        _stat_row("peak memory", m["peak_memory_bytes"], mib),
    ]
    lines += aligned(rows)
    procs = m["process_count_peak"]
    lines.append(
        "  processes at once, most: "
        + (f"{procs['max']:.0f}" if procs["max"] is not None else "unavailable")
    )
    note = cpu_over_wall_note(m["cpu_time_ns"]["median"], m["wall_time_ns"]["median"], procs["max"])
    if note:
        lines.append(f"  note: {note}")
    return lines + [f"  warning: {w}" for w in summary["warnings"]]


def _ratio_text(ratio: Mapping[str, Any]) -> str:
    if ratio["ratio"] is None:
        return "unavailable"
    ci = ratio["ratio_ci95"]
    if not ci:
        return f"{ratio['ratio']:.3f}x (no CI: {ratio['units']} {_units(ratio)}, 6 needed)"
    level = f"{ratio['level']:.1%}" if ratio.get("level") else "95%"
    return f"{ratio['ratio']:.3f}x [{ci[0]:.3f} – {ci[1]:.3f}] ({level} CI)"


def _units(ratio: Mapping[str, Any]) -> str:
    return "rounds" if ratio["method"] == "paired" else "runs"


def _verdict_text(ratio: Mapping[str, Any]) -> str:
    said = verdict(ratio)
    if said == "slower":
        return f" — {ratio['ratio']:.2f}x slower"
    if said == "faster":
        return f" — {1 / ratio['ratio']:.2f}x faster"
    if said == "no difference":
        return " — no difference the CI can show"
    return ""


def ratios_text(result: Mapping[str, Any]) -> list[str]:
    if not result["ratios"]:
        return []
    labels = {s["command"]: s.get("name") or s["command"] for s in result["summaries"]}
    first = result["ratios"][0]["reference"]
    if result["design"] == "interleaved":
        rounds = len(result["rounds"] or [])
        how = (
            f"paired per round ({rounds} interleaved rounds, the independent units): median "
            "of NEW/BASE over rounds"
        )
    else:
        how = (
            "ratio of medians; the commands ran one after the other, so drift of the host "
            "between them is in neither CI"
        )
    lines = [f"Relative to command 1 ({labels.get(first, first)}), {how}:"]
    for ratio in result["ratios"]:
        metrics = ratio["metrics"]
        wall = metrics["wall_time_ns"]
        sign = f", sign test p = {wall['p_value']:.3g}" if wall.get("p_value") is not None else ""
        lines.append(f"  {labels.get(ratio['command'], ratio['command'])}:")
        lines.append(f"    wall         {_ratio_text(wall)}{_verdict_text(wall)}{sign}")
        lines.append(f"    CPU          {_ratio_text(metrics['cpu_time_ns'])}")
        lines.append(f"    peak memory  {_ratio_text(metrics['peak_memory_bytes'])}")
    return lines


def report_text(result: Mapping[str, Any], unit: str = "auto") -> str:
    lines = []
    for index, (summary, series) in enumerate(
        zip(result["summaries"], result["commands"], strict=True), start=1
    ):
        lines += command_text(index, summary, series, unit)
        lines += series_phases_text(series["runs"], unit) + [""]
    lines += ratios_text(result)
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


# -- phases -----------------------------------------------------------------------------------


def _form(value: Mapping[str, Any] | None, show: Callable[[float], str]) -> str:
    if not value or value.get("value") is None:
        reason = (value or {}).get("reason", "missing")
        return f"unavailable ({reason})"
    shown = show(value["value"])
    return shown + (f" (partial: {value['reason']})" if value["status"] == "partial" else "")


def phase_columns(unit: str) -> tuple[tuple[str, str, Callable[[float], str]], ...]:
    time_of = shower("_ns", unit)
    return (
        ("wall", "wall_time_ns", time_of),
        ("CPU", "cpu_time_ns", time_of),
        ("user", "cpu_user_time_ns", time_of),
        ("system", "cpu_system_time_ns", time_of),
        ("memory rise", "memory_rise_bytes", _signed_mib),
        ("processes at end", "process_count_end", _count),
    )


def phases_text(phases: Mapping[str, Any] | None, unit: str = "auto") -> str:
    """One run's phases (``metewand_phases/1``), one line each, then what lies between marks."""
    if phases is None:
        return ""
    lines = [f"phases ({phases['mark_count']} marks):"]
    for phase in phases["phases"]:
        cells = ", ".join(
            f"{label} {_form(phase[key], show)}" for label, key, show in phase_columns(unit)
        )
        lines.append(f"  {phase['name']}: {cells}")
    between = phases["between_marks"]
    time_of = shower("_ns", unit)
    if between["stretches"]:
        lines.append(
            f"  between marks ({between['stretches']} stretch(es)): wall "
            f"{_form(between['wall_time_ns'], time_of)}, CPU {_form(between['cpu_time_ns'], time_of)}"
        )
    if phases["cpu_adds_up"] is False:
        lines.append(
            f"  the phases' CPU is not the run's total within {phases['adds_up_fraction']:.0%}: "
            "the rest is between marks"
        )
    if phases["late_marks"]:
        lines.append(f"  {phases['late_marks']} mark(s) arrived after the command ended")
    if phases.get("dropped_marks"):
        lines.append(
            f"  {phases['dropped_marks']} mark(s) after the first {phases['mark_limit']} were "
            "counted, not kept (--mark-limit): the last kept phase runs on to the end"
        )
    return "\n".join(lines) + "\n"


def series_phases_text(runs: list[Mapping[str, Any]], unit: str = "auto") -> list[str]:
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
        for label, key, show in phase_columns(unit)[:4]:
            values = [
                s[key]["value"] for s in spans if s and s.get(key, {}).get("value") is not None
            ]
            middle = median(values)
            cells.append(f"{label} {show(middle) if middle is not None else 'unavailable'}")
        lines.append(f"    {name}: " + ", ".join(cells))
    dropped = sum(record.get("dropped_marks", 0) for record in marked)
    if dropped:
        lines.append(f"    {dropped} mark(s) past --mark-limit were counted, not kept")
    return lines


def _phase_named(record: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    if name == "between marks":
        return record["between_marks"]
    found = [p for p in record["phases"] if p["name"] == name]
    return found[0] if found else None


# -- exports ----------------------------------------------------------------------------------


def report_markdown(result: Mapping[str, Any], unit: str = "auto") -> str:
    time_of = shower("_ns", unit)
    head = "| command | runs | median [95% CI] | mean ± σ | min … max | CPU median | peak memory |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for summary in result["summaries"]:
        m = summary["metrics"]
        wall = m["wall_time_ns"]
        stddev = time_of(wall["stddev"]) if wall["stddev"] is not None else "n/a"
        label = (summary.get("name") or summary["command"]).replace("|", "\\|")
        lines.append(
            f"| `{label}` | {summary['runs']} | {time_of(wall['median'])} {_span(wall, time_of)} | "
            f"{time_of(wall['mean'])} ± {stddev} | {time_of(wall['min'])} … "
            f"{time_of(wall['max'])} | {time_of(m['cpu_time_ns']['median'])} | "
            f"{mib(m['peak_memory_bytes']['median'])} |"
        )
    labels = {s["command"]: s.get("name") or s["command"] for s in result["summaries"]}
    for ratio in result["ratios"]:
        lines.append("")
        lines.append(
            f"`{labels[ratio['command']]}` / `{labels[ratio['reference']]}` wall "
            f"({ratio['metrics']['wall_time_ns']['method']}): "
            f"{_ratio_text(ratio['metrics']['wall_time_ns'])}"
        )
    warning = host_text(result["host"])
    return "\n".join(lines) + "\n" + ("\n" + warning if warning else "")


def report_csv(result: Mapping[str, Any]) -> str:
    """One line per command; text cells spreadsheet-safe (``compare.csv_safe``)."""
    import csv  # only for --export-csv

    from metewand.compare.csv_safe import safe_cell

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
            summary.get("name"),
            wall["median_ci_level"],
        ]
        writer.writerow([safe_cell(c) for c in cells])
    return buffer.getvalue()
