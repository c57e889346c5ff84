"""The per-host level of a resource summary (``hosts``, ``compare.resource_hosts``) as titled
tables: the card (Markdown) and report.html render the same data, each with its own table
writer, so the two never say different things.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from metewand.compare.fmt import bytes_text, ms_text

NA = "unavailable"
CARD_METRICS = (("cpu_total_ms", "CPU ms"), ("pss_peak_bytes", "peak PSS"), ("avg_cores", "cores"))
COLD_METRICS = (
    ("ready_ms", "ready"),
    ("launch_cpu_ms", "launch CPU"),
    ("launch_peak_pss_bytes", "launch peak PSS"),
)


@dataclass(frozen=True)
class HostTable:
    title: str
    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    note: str = ""


def _value(metric: str, value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return NA
    if metric.endswith("_bytes"):
        return bytes_text(value)
    if metric.endswith("_ms"):
        return ms_text(value)
    return f"{value:.3f}"


def _with_ci(metric: str, described: Mapping[str, Any] | None) -> str:
    if not described or described.get("median") is None:
        return NA
    text = _value(metric, described["median"])
    ci = described.get("median_ci95")
    if ci:
        text += f" [{_value(metric, ci[0])}, {_value(metric, ci[1])}]"
    return f"{text} (n={described.get('n')})"


def _pct(value: Any) -> str:
    return f"{value:+.1f}%" if isinstance(value, int | float) else NA


def headline(hosts: Mapping[str, Any]) -> list[str]:
    """What a reader must see first: pooled or not, and why."""
    places = hosts.get("places") or []
    if len(places) < 2:
        return [f"Rows from one host: {', '.join(places)}."]
    if hosts.get("pooled"):
        return [f"Hosts pooled: {hosts['statement']}."]
    return [
        f"Hosts NOT pooled: {hosts['statement']}.",
        "The pooled medians in this document mix hosts that are not shown equivalent: the "
        "per-host verdicts and medians below are the comparison.",
    ]


def _verdicts(hosts: Mapping[str, Any]) -> HostTable:
    rows = []
    for place, r in hosts["per_host"].items():
        fp, cal, gate = r.get("fingerprint") or {}, r.get("calibration"), r.get("host_gate") or {}
        cal_text = NA
        if cal:
            overall = cal.get("overall") or {}
            cal_text = (
                f"{cal['mode']}: {'acceptable' if cal['acceptable'] else 'FAILED'} "
                f"({overall.get('pairs')} pairs, duration "
                f"{_pct(overall.get('median_duration_overhead_pct'))}, collection wall "
                f"{_pct(overall.get('median_collection_wall_overhead_pct'))})"
            )
        gate_text = {True: "passed", False: "FAILED", None: NA}[gate.get("passed")]
        if gate.get("triggered"):
            gate_text += " (" + ", ".join(gate["triggered"]) + ")"
        rows.append(
            [
                place,
                str(r["rows"]),
                str(fp.get("cpu_model") or NA),
                f"{fp.get('usable_cores', NA)} of {fp.get('cpu_count', NA)}",
                "**eligible**" if r["resource_comparison_eligible"] else "not eligible",
                cal_text,
                gate_text,
                "; ".join(r["ineligibility_reasons"]) or "none",
            ]
        )
    header = [
        "host",
        "rows",
        "CPU model",
        "usable cores",
        "verdict",
        "own calibration",
        "own pollution gate",
        "why not eligible",
    ]
    note = (
        "Each host judged on its own rows: the seven conditions plus one_host, with its own "
        "host telemetry and its own observer calibration."
    )
    return HostTable("Per-host verdicts", header, rows, note)


def _medians(hosts: Mapping[str, Any]) -> HostTable:
    places = list(hosts["per_host"])
    engines = sorted({e for r in hosts["per_host"].values() for e in r.get("by_engine") or {}})
    rows = []
    for engine in engines:
        for metric, label in CARD_METRICS:
            cells = [
                _with_ci(
                    metric,
                    ((hosts["per_host"][p].get("by_engine") or {}).get(engine) or {})
                    .get("metrics", {})
                    .get(metric),
                )
                for p in places
            ]
            rows.append([engine, label, *cells])
    note = (
        "Medians over each host's own all-pass intersection, with the task-bootstrap 95% "
        "CI; hosts run different task mixes, so compare them through the homogeneity test "
        "(paired by task), not by these medians alone."
    )
    return HostTable("Per-host medians", ["engine", "metric", *places], rows, note)


def _homogeneity(hosts: Mapping[str, Any]) -> HostTable | None:
    test = hosts.get("homogeneity") or {}
    if not test.get("tested"):
        return None
    rows = []
    for c in (test.get("medians") or {}).get("comparisons") or []:
        interval = c.get("ratio_interval")
        verdict = {True: "agrees", False: "**differs**", None: "not testable"}[c.get("agrees")]
        rows.append(
            [
                c["engine"],
                c["metric"],
                f"{c['host']} vs {c['against']}",
                str(c["tasks"]),
                f"{c['median_ratio']:.3f}" if c.get("median_ratio") is not None else NA,
                f"{interval[0]:.3f}-{interval[1]:.3f} ({c['level'] * 100:.2f}%)"
                if interval
                else c.get("reason", NA),
                verdict,
            ]
        )
    fingerprints = test.get("fingerprints") or {}
    same = "same" if fingerprints.get("equal") else "; ".join(fingerprints.get("problems") or [])
    note = (
        f"Test: {test['statement']}. Fingerprints (engine binaries, CPU model, usable cores): "
        f"{same}. Homogeneous: {'yes' if test.get('homogeneous') else 'no'}."
    )
    header = [
        "engine",
        "metric",
        "host vs",
        "shared tasks",
        "median ratio",
        "interval (level)",
        "result",
    ]
    return HostTable("Homogeneity test", header, rows, note)


def _fingerprints(hosts: Mapping[str, Any]) -> HostTable:
    rows = []
    for place, r in hosts["per_host"].items():
        fp = r.get("fingerprint") or {}
        engines = ", ".join(
            f"{e} {' '.join(s[:12] for s in shas)}" for e, shas in (fp.get("engines") or {}).items()
        )
        memory = fp.get("memory_bytes")
        rows.append(
            [
                place,
                str(fp.get("kernel") or NA),
                bytes_text(memory) if isinstance(memory, int) else NA,
                engines or NA,
            ]
        )
    note = "The run manifest's host_fingerprints list every host that registered."
    return HostTable("Host fingerprints", ["host", "kernel", "memory", "engine sha256"], rows, note)


def _cold_starts(hosts: Mapping[str, Any]) -> HostTable:
    rows = []
    for place, r in hosts["per_host"].items():
        by_engine = (r.get("cold_start") or {}).get("by_engine") or {}
        for engine, entry in by_engine.items():
            metrics = entry.get("metrics") or {}
            rows.append(
                [
                    place,
                    engine,
                    str(entry.get("samples", 0)),
                    *(_with_ci(m, metrics.get(m)) for m, _ in COLD_METRICS),
                ]
            )
    note = "Each host's own engine launches before its first round, outside every warm figure."
    header = ["host", "engine", "launches", *(label for _, label in COLD_METRICS)]
    return HostTable("Cold starts per host", header, rows, note)


def host_tables(hosts: Mapping[str, Any]) -> list[HostTable]:
    """The per-host level as tables, in reading order."""
    tables = [
        _verdicts(hosts),
        _homogeneity(hosts),
        _medians(hosts),
        _cold_starts(hosts),
        _fingerprints(hosts),
    ]
    return [t for t in tables if t is not None]
