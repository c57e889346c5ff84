"""Per-case compute statistics as text: Markdown tables, the case CSV, terminal rows.

Every cell comes from ``cases.case_statistics``; a case where an implementation never
succeeded says "no successful attempt", never a number.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from metewand import markdown
from metewand.compare.cases import NO_SUCCESS
from metewand.compare.fmt import bytes_text, ns_text, rate_text, unavailable

SHOWN_METRICS = ("timed_wall_time_ns", "cpu_time_ns", "peak_rss_bytes")
PHASE_METRICS = (
    "worker_startup_time_ns",
    "prepare_time_ns",
    "execute_request_time_ns",
    "evaluation_time_ns",
)
CSV_COLUMNS = (
    "case",
    "implementation",
    "metric",
    "attempts",
    "accepted",
    "failed_by_code",
    "n",
    "median",
    "p95",
    "min",
    "median_ci95_low",
    "median_ci95_high",
    "note",
)


def short_label(case: Mapping[str, Any], without: str | None = None) -> str:
    """The case's parameters as ``distribution=uniform, size=2000`` (one axis left out)."""
    coords = case["coordinates"]
    parts = []
    for prefix, key in (("dataset", "dataset_parameters"), ("problem", "problem_parameters")):
        for name, value in sorted(coords[key].items()):
            if f"{prefix}.{name}" != without:
                parts.append(f"{name}={value}")
    return ", ".join(parts) or str(coords["case"])


def compact_cell(metric: str, block: Mapping[str, Any] | None) -> str:
    """``11.3 ms (11.1-11.4)`` for a terminal column: median, then its 95% CI."""
    if not block or not block.get("n"):
        return "not measured"
    scale, unit = (2**20, "MiB") if metric.endswith("_bytes") else (1e6, "ms")
    ci = block.get("median_ci95")
    digits = 1 if block["median"] / scale >= 10 else 2
    if not ci:  # too few launches for a CI: say so instead of a [min, max] "interval"
        return f"{block['median'] / scale:.{digits}f} {unit} (n={block['n']}, no CI)"
    return (
        f"{block['median'] / scale:.{digits}f} {unit} "
        f"({ci[0] / scale:.{digits}f}-{ci[1] / scale:.{digits}f})"
    )


def terminal_rows(summary: Mapping[str, Any], metrics: tuple[str, ...]) -> list[list[str]]:
    """Short rows for the end-of-run table: parameters only when the run has one experiment."""
    experiments = {c["coordinates"]["experiment"] for c in summary["cases"]}
    rows = []
    for case in summary["cases"]:
        label = short_label(case)
        if len(experiments) > 1:
            label = f"{case['coordinates']['experiment']}: {label}"
        for name, block in case["implementations"].items():
            cells = [label, name, f"{block['accepted']}/{block['attempts']}", failures_text(block)]
            cells += [block["note"] or compact_cell(m, block["metrics"].get(m)) for m in metrics]
            rows.append(cells)
    return rows


def value_text(metric: str, value: float | None) -> str:
    if value is None:
        return unavailable("not measured")
    return bytes_text(value) if metric.endswith("_bytes") else ns_text(value)


def metric_cell(metric: str, block: Mapping[str, Any] | None) -> str:
    """``11.27 ms [11.09–11.44] n=2`` or the reason there is no number."""
    if not block or not block.get("n"):
        reasons = (block or {}).get("unavailable") or {}
        why = ", ".join(f"{r} x{n}" for r, n in reasons.items())
        return unavailable(why or "no accepted attempt measured it")
    ci = block.get("median_ci95")
    span = f" [{value_text(metric, ci[0])} – {value_text(metric, ci[1])}]" if ci else ""
    if not ci and block.get("ci_note"):
        span = f" ({block['ci_note']})"
    return f"{value_text(metric, block['median'])}{span} n={block['n']}"


def ratio_cell(block: Mapping[str, Any] | None) -> str:
    if not block or block.get("ratio") is None:
        return (block or {}).get("note") or NO_SUCCESS
    ci = block.get("ratio_ci95")
    span = f" [{ci[0]:.3f} – {ci[1]:.3f}]" if ci else " (CI undefined)"
    return f"{block['ratio']:.3f}×{span}" + (" paired" if block.get("paired") else "")


def failures_text(block: Mapping[str, Any]) -> str:
    return ", ".join(f"{c} x{n}" for c, n in block["failed_by_code"].items()) or "none"


OUTCOME_HEADER = (
    "case",
    "implementation",
    "accepted (measured)",
    "failed by code",
    "warm-ups",
    "warm-up status",
)


def outcome_rows(summary: Mapping[str, Any]) -> list[list[Any]]:
    """One row per case x implementation: measured attempts accepted (with the rate), failures
    by code, and the warm-ups apart (counted, never in a rate)."""
    rows: list[list[Any]] = []
    for case in summary["cases"]:
        for name, block in case["implementations"].items():
            accepted, attempts = block["accepted"], block["attempts"]
            warm = block.get("warmups") or {"total": 0, "by_outcome": {}}
            rows.append(
                [
                    case["case"],
                    name,
                    rate_text(accepted, attempts),
                    failures_text(block),
                    warm["total"],
                    ", ".join(f"{s} x{n}" for s, n in warm["by_outcome"].items()) or "none",
                ]
            )
    return rows


def case_rows(summary: Mapping[str, Any], metrics: tuple[str, ...]) -> list[list[str]]:
    """One row per case x implementation: outcome counts, then one cell per metric."""
    rows = []
    for case in summary["cases"]:
        for name, block in case["implementations"].items():
            cells = [case["case"], name, f"{block['accepted']}/{block['attempts']}"]
            cells.append(failures_text(block))
            if block["note"]:
                cells += [block["note"]] * len(metrics)
            else:
                cells += [metric_cell(m, block["metrics"].get(m)) for m in metrics]
            rows.append(cells)
    return rows


def ratio_rows(summary: Mapping[str, Any]) -> list[list[str]]:
    reference = summary.get("reference")
    if not reference:
        return []
    rows = []
    for case in summary["cases"]:
        for name, block in case.get("ratios", {}).items():
            rows.append([case["case"], name, ratio_cell(block)])
    for name, gm in (summary.get("geometric_mean_ratio") or {}).items():
        if gm is None or gm.get("geometric_mean") is None:
            rows.append(["geometric mean ratio over cases", name, NO_SUCCESS])
            continue
        ci = gm.get("ci95")
        span = f" [{ci[0]:.3f} – {ci[1]:.3f}]" if ci else " (CI undefined)"
        rows.append(
            [
                "geometric mean ratio over cases",
                name,
                f"{gm['geometric_mean']:.3f}×{span} ({gm['cases']} cases)",
            ]
        )
    return rows


POOLED_CASES_NOTE = (
    "Cases whose measured rows ran on more than one Dask host: their medians pool those hosts "
    "(their paired ratios pair rows of one host):"
)


def pooled_case_lines(summary: Mapping[str, Any]) -> list[str]:
    """``case: pooled over 2 hosts (rows: a 3, b 3)`` for each case whose rows span hosts."""
    return [
        f"{case['case']}: {case['pooled_over_hosts']['statement']}"
        for case in summary["cases"]
        if case.get("pooled_over_hosts")
    ]


def cases_markdown(summary: Mapping[str, Any]) -> list[str]:
    boot = summary["bootstrap"]
    lines = [
        "## Per case",
        "",
        "Each row is one case x implementation (measured attempts only). Cells: median "
        f"[95% CI of the median, {boot['resamples']} hierarchical resamples of the attempts' "
        f"worker launches and the repetitions inside them, seed {boot['seed']}; no CI from "
        f"fewer than {boot.get('min_units', 5)} launches] n.",
        "",
    ]
    head = ["case", "implementation", "accepted", "failures by code"]
    lines += markdown.table(head + list(SHOWN_METRICS), case_rows(summary, SHOWN_METRICS))
    pooled = pooled_case_lines(summary)
    if pooled:
        lines += ["", POOLED_CASES_NOTE, "", *(f"- {line}" for line in pooled)]
    lines += ["", "## Phases per case", ""]
    lines += markdown.table(head + list(PHASE_METRICS), case_rows(summary, PHASE_METRICS))
    if summary.get("reference"):
        lines += [
            "",
            f"## Ratio to {summary['reference']} ({summary['ratio_metric']}, ratio of "
            "geometric means)",
            "",
            "Below 1 is faster than the reference. Paired: the ratio of each dataset instance's "
            "two attempts, resampled together (hierarchical bootstrap-t CI).",
            "",
        ]
        lines += markdown.table(["case", "implementation", "ratio [95% CI]"], ratio_rows(summary))
    return lines


def cases_csv(summary: Mapping[str, Any]) -> str:
    """One line per case x implementation x metric; an unmeasured figure is an empty cell."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for case in summary["cases"]:
        for name, block in case["implementations"].items():
            for metric in summary["metrics"]:
                stat = block["metrics"].get(metric) or {}
                ci = stat.get("median_ci95") or [None, None]
                figures = [stat.get(k) for k in ("n", "median", "p95", "min")] + ci
                writer.writerow(
                    [
                        case["case"],
                        name,
                        metric,
                        block["attempts"],
                        block["accepted"],
                        failures_text(block),
                    ]
                    + ["" if v is None else repr(v) if isinstance(v, float) else v for v in figures]
                    + [block["note"] or ("" if stat.get("n") else "not measured")]
                )
    return buffer.getvalue()
