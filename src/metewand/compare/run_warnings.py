"""What a user must not miss about a run, in a few lines: said at the end of the run in the
terminal and at the top of scorecard.md and report.html (not only deep in the page).

- attempts that failed, counted by code (compute) or by status (browser);
- a failed host pollution gate and the conditions that tripped it;
- a profiled browser run whose resource comparison is not eligible, with the reasons;
- rows of several Dask hosts pooled into one median, a Dask worker's failed pollution gate;
- a torn final line of a side file (host telemetry, cold starts) that was ignored; a torn
  final line of results.jsonl is said where the rows are counted (status, report.html).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from metewand import markdown
from metewand.compare import hosts
from metewand.compare.rundir import RunData
from metewand.compare.suite_registry import suite_kind
from metewand.runtime import rundir

BROWSER_OK = frozenset({"pass"})


def _counted(counts: Counter[str]) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))


def browser_failed_attempts(rows: Sequence[Mapping[str, Any]]) -> str | None:
    statuses = Counter(str(r.get("status")) for r in rows if r.get("status") not in BROWSER_OK)
    if not statuses:
        return None
    return f"{sum(statuses.values())} of {len(rows)} attempts did not pass: {_counted(statuses)}"


def compute_failed_attempts(rows: Sequence[Mapping[str, Any]]) -> str | None:
    codes = Counter(str(r.get("code") or "unknown") for r in rows if r.get("status") == "failed")
    if not codes:
        return None
    return f"{sum(codes.values())} of {len(rows)} attempts failed: {_counted(codes)}"


def host_gate(summary: Mapping[str, Any] | None) -> str | None:
    if not summary:
        return None
    gate = summary.get("gate")
    if not isinstance(gate, Mapping) or gate.get("passed") is not False:
        return None
    details = [str(t.get("detail") or t.get("condition")) for t in gate.get("triggered", [])]
    return "host pollution gate failed: " + ("; ".join(details) or "no host samples")


def eligibility(summary: Mapping[str, Any] | None) -> str | None:
    if not summary or summary.get("resource_comparison_eligible") is not False:
        return None
    reasons = [str(r) for r in summary.get("ineligibility_reasons", [])]
    return "resource comparison not eligible: " + "; ".join(reasons)


# said the same way at a run's start (cli.browser_preflight) and in its reports
SEPARATE_DRIFT_WARNING = (
    "observer calibrated against a separate profiler-off run (the peer's A/B): its overhead "
    "figure includes whatever changed on the host between the two runs, so its verdict can flip "
    "from one pair of runs to the next; --resource-calibration interleaved (the default) pairs "
    "each attempt with an unprofiled twin on the same engine process"
)


def calibration_drift(summary: Mapping[str, Any] | None) -> str | None:
    """A separate A/B's figure carries the drift between its two runs: say so beside it."""
    observer = (summary or {}).get("observer_effect")
    if not isinstance(observer, Mapping) or observer.get("calibration_mode") != "separate":
        return None
    return SEPARATE_DRIFT_WARNING


def torn_side_files(torn_tails: Mapping[str, int]) -> str | None:
    torn = [
        f"{name} ({size} bytes)"
        for name, size in sorted(torn_tails.items())
        if name != rundir.RESULTS
    ]
    if not torn:
        return None
    return "a torn final line was ignored (a write cut short by a kill) in " + ", ".join(torn)


def pooled_hosts(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """Rows of several Dask hosts: every median over all rows pools them, and says so."""
    pooled = hosts.pooling(rows)
    if pooled is None:
        return None
    return (
        f"rows from {pooled['hosts']} hosts: medians over all rows are {pooled['statement']}; "
        "paired ratios compare rows of one host"
    )


def worker_gates(dask_hosts: Mapping[str, Any] | None) -> str | None:
    """A Dask worker whose host pollution gate did not pass (each worker samples its host)."""
    failed = []
    for worker in (dask_hosts or {}).get("workers") or []:
        gate = (worker.get("host_summary") or {}).get("gate")
        if isinstance(gate, Mapping) and gate.get("passed") is False:
            flags = ", ".join(str(t.get("condition")) for t in gate.get("triggered", []))
            failed.append(f"{worker.get('host')}/{worker.get('worker_name')} ({flags})")
    if not failed:
        return None
    return "host pollution gate failed on Dask worker(s): " + "; ".join(failed)


def run_warnings(run: RunData, resource_summary: Mapping[str, Any] | None = None) -> list[str]:
    """``resource_summary``: a regenerated summary (e.g. with another baseline) instead of the
    run's own resource_summary.json."""
    found = (
        suite_kind(run.kind).failed_attempts(run.rows),
        host_gate(run.host_summary),
        eligibility(resource_summary or run.resource_summary),
        calibration_drift(resource_summary or run.resource_summary),
        torn_side_files(run.torn_tails),
        pooled_hosts(run.rows),
        worker_gates(run.dask_hosts),
    )
    return [line for line in found if line]


def markdown_block(lines: Sequence[str]) -> str:
    """A scorecard's opening lines: each warning as a bold-labelled list item."""
    text = "".join(f"- **warning:** {markdown.text(line)}\n" for line in lines)
    return text + ("\n" if lines else "")
