"""The per-host section of scorecard.md and report.html (a Dask run's ``scores["hosts"]``).

Per host: units, attempts by status, lost tries, its workers (accepted, or refused with the
reason) and each worker's host telemetry with its pollution-gate verdict. A run whose figures
pool rows of several hosts says so here and in the warnings at the top. Absent for a local run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metewand import markdown
from metewand.compare.html_parts import paragraph, section, table

HOST_HEAD = ("host", "units", "attempts", "by status", "lost tries", "workers", "pollution gate")
WORKER_HEAD = (
    "host",
    "worker",
    "registration",
    "rows this session",
    "lost tries",
    "telemetry samples",
    "pollution gate",
    "triggered",
    "foreign CPU median / max (cores)",
)
NOTE = (
    "Each host's own rows, workers and host telemetry (a Dask worker samples its host while its "
    "slot is open). Units: the tries that produced rows (a unit runs whole on one host). Rows "
    "this session: a resumed run's earlier sessions are counted in attempts only."
)


def _gate_text(passed: bool | None) -> str:
    if passed is None:
        return "unavailable"
    return "passed" if passed else "did not pass"


def _statuses(by_status: Mapping[str, int]) -> str:
    return ", ".join(f"{s} {n}" for s, n in sorted(by_status.items())) or "none"


def host_rows(block: Mapping[str, Any]) -> list[list[str]]:
    return [
        [
            h["host"],
            str(h["units"]),
            str(h["attempts"]),
            _statuses(h["by_status"]),
            str(h["lost_tries"]),
            str(sum(1 for w in h["workers"] if w["accepted"]))
            + " accepted, "
            + str(sum(1 for w in h["workers"] if not w["accepted"]))
            + " refused",
            _gate_text(h["gate_passed"]),
        ]
        for h in block["per_host"]
    ]


def worker_rows(block: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for h in block["per_host"]:
        for w in h["workers"]:
            t = w["telemetry"]
            registration = "accepted" if w["accepted"] else f"refused: {w['reason']}"
            name = f"{w['worker_name']} ({w['worker']})"
            if "unavailable" in t:
                telemetry = [f"unavailable: {t['unavailable']}", "unavailable", "", ""]
            else:
                foreign = f"{t['foreign_cpu_median_cores']} / {t['foreign_cpu_max_cores']}"
                telemetry = [
                    str(t["sample_count"]),
                    _gate_text(t["gate_passed"]),
                    ", ".join(str(c) for c in t["gate_triggered"]) or "none",
                    foreign,
                ]
            rows.append(
                [h["host"], name, registration, str(w["rows"]), str(w["lost_tries"]), *telemetry]
            )
    return rows


def pooled_sentence(block: Mapping[str, Any]) -> str:
    pooled = block.get("pooled")
    if not pooled:
        hosts = len(block["per_host"])
        return f"Every figure of this run comes from {'one host' if hosts == 1 else 'no host'}."
    return (
        f"Medians and rates over all rows of this run are {pooled['statement']}. Paired work (a "
        "compute case's implementations for one repetition, a browser round) ran whole on one "
        "host, so a paired ratio compares rows of one host; a median over all rows mixes hosts."
    )


def hosts_markdown(block: Mapping[str, Any] | None) -> list[str]:
    """scorecard.md lines (empty for a local run)."""
    if not block:
        return []
    lines = ["", "## Per host (Dask)", "", NOTE, "", pooled_sentence(block), ""]
    lines += markdown.table(HOST_HEAD, host_rows(block))
    lines += ["", *markdown.table(WORKER_HEAD, worker_rows(block))]
    return lines


def hosts_html(block: Mapping[str, Any] | None) -> str | None:
    """report.html's section (None for a local run)."""
    if not block:
        return None
    return section(
        "hosts",
        "Per host (Dask)",
        paragraph(NOTE),
        paragraph(pooled_sentence(block), "bad" if block.get("pooled") else ""),
        table(list(HOST_HEAD), host_rows(block), (1, 2, 4)),
        table(list(WORKER_HEAD), worker_rows(block), (3, 4, 5)),
    )
