"""Which host each row ran on, and what a run's per-host record (``dask_hosts.json``) says.

A row run through ``--executor dask`` names its host in ``placement.host``; a local run's rows
name none (they all ran beside the run's own host telemetry). Rows of different hosts saw
different machines: a median over them answers a question about no machine in particular, so
every figure that pools them says so (``pooling``), and a resource comparison is judged per host.

A local run (no ``placement``, no ``dask_hosts.json``) gets nothing added to its derived files:
they stay byte-identical to what they were before hosts were read. A Dask run on one host gets
its per-host section and no pooling statement (``pooling`` is None: nothing is pooled).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def host_of(row: Mapping[str, Any]) -> str | None:
    """The host a row ran on (``placement.host``), or None for a local run's row."""
    placement = row.get("placement")
    if isinstance(placement, Mapping) and isinstance(placement.get("host"), str):
        return str(placement["host"])
    return None


def rows_by_host(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Rows per named host, sorted by host name (rows without a host are not counted)."""
    counts = Counter(host for host in map(host_of, rows) if host is not None)
    return dict(sorted(counts.items()))


def pooling(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """``{hosts, rows_by_host, statement}`` when ``rows`` come from more than one host, else
    None (one host, or a local run: nothing is pooled)."""
    counts = rows_by_host(rows)
    if len(counts) < 2:
        return None
    return {"hosts": len(counts), "rows_by_host": counts, "statement": pooled_text(counts)}


def pooled_text(counts: Mapping[str, int]) -> str:
    listed = ", ".join(f"{host} {n}" for host, n in counts.items())
    return f"pooled over {len(counts)} hosts (rows: {listed})"


def split_by_host(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Rows per named host, hosts sorted."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        host = host_of(row)
        if host is not None:
            out.setdefault(host, []).append(row)
    return dict(sorted(out.items()))


def host_summaries(dask_hosts: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    """Each host's telemetry summary from ``dask_hosts.json``. A host runs one worker by the
    docs' rule; with several (``--dask-local N``) the first whose gate did not pass stands for
    the host, else the first. Hosts without a summary are absent."""
    out: dict[str, Mapping[str, Any]] = {}
    for worker in (dask_hosts or {}).get("workers") or []:
        summary = worker.get("host_summary")
        host = _worker_host(worker)
        if not host or not isinstance(summary, Mapping) or "unavailable" in summary:
            continue
        if host not in out or (_gate_passed(out[host]) and not _gate_passed(summary)):
            out[host] = summary
    return out


def _gate_passed(summary: Mapping[str, Any]) -> bool:
    return bool(_mapping(summary.get("gate")).get("passed"))


def _worker_host(worker: Mapping[str, Any]) -> str | None:
    host = worker.get("host")
    return str(host) if isinstance(host, str) and host else None


def per_host_records(
    rows: Iterable[Mapping[str, Any]],
    dask_hosts: Mapping[str, Any] | None,
    lost_tries: Iterable[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """One record per host of a Dask run: its rows by status, its workers (accepted or refused
    with the reason), lost tries, and its telemetry summary with the pollution-gate verdict.

    Empty for a local run (no ``dask_hosts.json`` and no row names a host)."""
    if dask_hosts is None and not rows_by_host(rows):
        return []
    records: dict[str, dict[str, Any]] = {}

    def record(host: str) -> dict[str, Any]:
        return records.setdefault(
            host,
            {
                "host": host,
                "units": set(),
                "attempts": 0,
                "by_status": Counter(),
                "lost_tries": 0,
                "workers": [],
            },
        )

    for row in rows:
        host = host_of(row)
        if host is None:
            continue
        entry = record(host)
        entry["attempts"] += 1
        entry["by_status"][str(row.get("status"))] += 1
        placement = row.get("placement") or {}
        entry["units"].add(placement.get("try"))  # one try runs one unit whole
    for lost in lost_tries:
        if isinstance(lost.get("host"), str):
            record(str(lost["host"]))["lost_tries"] += 1
    for worker in (dask_hosts or {}).get("workers") or []:
        record(_worker_host(worker) or "(unknown host)")["workers"].append(_worker_brief(worker))
    out = []
    for host in sorted(records):
        entry = records[host]
        entry["gate_passed"] = _host_gate(entry["workers"])
        out.append({**entry, "units": len(entry["units"]), "by_status": dict(entry["by_status"])})
    return out


def _host_gate(workers: Sequence[Mapping[str, Any]]) -> bool | None:
    """A host's pollution gate: failed when any accepted worker's failed, passed when every
    accepted worker's passed, None (not known) otherwise."""
    gates = [w["telemetry"].get("gate_passed") for w in workers if w["accepted"]]
    if False in gates:
        return False
    return True if gates and None not in gates else None


def _worker_brief(worker: Mapping[str, Any]) -> dict[str, Any]:
    summary = worker.get("host_summary")
    return {
        "worker": worker.get("worker"),
        "worker_name": worker.get("worker_name"),
        "accepted": bool(worker.get("accepted")),
        "reason": worker.get("reason"),
        "rows": worker.get("rows", 0),
        "lost_tries": worker.get("lost_tries", 0),
        "telemetry": _telemetry_brief(summary if isinstance(summary, Mapping) else {}),
    }


def _telemetry_brief(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What the report shows of a host's telemetry (``abb_host_summary/1``): samples, the
    pollution flags, the gate verdict with what triggered it, and the foreign CPU figures."""
    if "unavailable" in summary or "gate" not in summary:
        return {"unavailable": summary.get("unavailable", "no host telemetry summary recorded")}
    gate = _mapping(summary.get("gate"))
    foreign = _mapping(summary.get("foreign_cpu"))
    return {
        "started_at": summary.get("started_at"),
        "ended_at": summary.get("ended_at"),
        "sample_count": summary.get("sample_count"),
        "sampler_cpu_ms": summary.get("sampler_cpu_ms"),
        "flags": list(summary.get("flags") or []),
        "gate_passed": gate.get("passed"),
        "gate_triggered": [t.get("condition") for t in gate.get("triggered") or []],
        "foreign_cpu_median_cores": foreign.get("median_cores"),
        "foreign_cpu_max_cores": foreign.get("max_cores"),
    }


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def hosts_block(
    rows: Sequence[Mapping[str, Any]],
    dask_hosts: Mapping[str, Any] | None,
    lost_tries: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any] | None:
    """scores.json's ``hosts`` for a Dask run: each host's record, and whether the run's figures
    pool rows of several hosts. None for a local run (its derived files stay as they were)."""
    per_host = per_host_records(rows, dask_hosts, lost_tries)
    if not per_host:
        return None
    return {
        "per_host": per_host,
        "pooled": pooling(rows),
        "scheduler": (dask_hosts or {}).get("scheduler"),
        "lost_tries": len(lost_tries),
    }
