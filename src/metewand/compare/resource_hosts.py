"""A profiled Dask run's resource comparison host by host, pooled only when the hosts are
equivalent (``compare.host_homogeneity``).

Each *place* (a host; or, when the run's workers shared one host, a worker of it:
``placement.place``) is judged on its own: the seven conditions over its rows with its own host
telemetry summary (``dask_hosts.json``) and its own observer calibration (interleaved: the
twins of its rows, which ran in the same rounds on the same engine processes; separate: the
baseline's same attempts), plus ``one_host``, which one place's rows pass. Beside the verdict:
its engines' medians over its own all-pass intersection, its cold starts, its fingerprint (CPU
model, usable cores, memory, kernel, the engine binaries its rows name).

The pooled level is the run's: its ``one_host`` passes for one place's rows, or for several
places that passed the homogeneity test; its host gate is every place's gate (the Dask client's
own telemetry is not where the engines ran); its calibration is the pooled pairs' with each
place's own verdict added as a check (a place whose observer cost is out of bounds is not
hidden by a pool that is in them).

A local run (no row names a place) has no host levels: its derived files are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from metewand.compare import eligibility, host_homogeneity
from metewand.compare.intersection import Intersection, all_pass_intersection, task_attempt
from metewand.compare.resource_summary import cold_start_summary, describe_metrics
from metewand.compare.run_facts import latest_rows, read_facts

HOSTS_SCHEMA = "metewand_resource_hosts/1"
PLACE_METRICS = ("cpu_total_ms", "pss_peak_bytes", "avg_cores")
Row = Mapping[str, Any]
# (a place's rows, its calibration twins) -> its calibration record, or None (none possible)
Calibrator = Callable[[Sequence[Row], Sequence[Row]], Mapping[str, Any] | None]
ONE_HOST_TITLE = (
    "every row from one host, or from hosts shown equivalent (homogeneity test); otherwise "
    "each host is judged on its own"
)


def place_of(row: Row) -> str | None:
    """Where a row was measured: ``placement.place`` (a worker of a shared host), else its
    host; None for a local run's row."""
    where = row.get("placement")
    if not isinstance(where, Mapping):
        return None
    place = where.get("place") or where.get("host")
    return str(place) if isinstance(place, str) and place else None


def split_by_place(rows: Sequence[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for row in rows:
        place = place_of(row)
        if place is not None:
            out.setdefault(place, []).append(row)
    return dict(sorted(out.items()))


def _workers(dask_hosts: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """Every worker record of every Dask session of the run (latest first)."""
    if not dask_hosts:
        return []
    sessions = [dask_hosts, *reversed(dask_hosts.get("earlier_dask_sessions") or [])]
    return [w for s in sessions for w in s.get("workers") or [] if isinstance(w, Mapping)]


def _worker_place(worker: Mapping[str, Any]) -> str | None:
    place = worker.get("place") or worker.get("host")
    return str(place) if isinstance(place, str) and place else None


def place_summaries(dask_hosts: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    """Each place's host telemetry summary: one whose gate failed wins (a place polluted in
    any session is polluted), else the latest with a gate."""
    out: dict[str, Mapping[str, Any]] = {}
    for worker in _workers(dask_hosts):
        place, summary = _worker_place(worker), worker.get("host_summary")
        if place is None or not isinstance(summary, Mapping) or "gate" not in summary:
            continue
        if place not in out or (_gate_passed(out[place]) and not _gate_passed(summary)):
            out[place] = summary
    return out


def _gate_passed(summary: Mapping[str, Any]) -> bool:
    gate = summary.get("gate")
    return bool(gate.get("passed")) if isinstance(gate, Mapping) else False


def place_fingerprints(
    manifest: Mapping[str, Any], dask_hosts: Mapping[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """Each place's fingerprint: the manifest's ``host_fingerprints`` (every session), else the
    registrations in ``dask_hosts.json``."""
    recorded = manifest.get("host_fingerprints")
    out = {str(p): dict(f) for p, f in (recorded or {}).items() if isinstance(f, Mapping)}
    for worker in _workers(dask_hosts):
        place, facts = _worker_place(worker), worker.get("host_facts")
        if place is None or place in out or not isinstance(facts, Mapping):
            continue
        affinity = facts.get("cpu_affinity")
        out[place] = {
            "host": worker.get("host"),
            "cpu_model": facts.get("cpu_model"),
            "cpu_count": facts.get("cpu_count"),
            "usable_cores": len(affinity) if isinstance(affinity, list) else None,
            "memory_bytes": facts.get("memory_bytes"),
            "kernel": facts.get("kernel"),
        }
    return out


def engine_shas(rows: Sequence[Row]) -> dict[str, list[str]]:
    """Engine -> the distinct binary sha256 the rows name (sorted)."""
    found: dict[str, set[str]] = {}
    for row in rows:
        provenance = row.get("engine_provenance")
        sha = provenance.get("binary_sha256") if isinstance(provenance, Mapping) else None
        if isinstance(sha, str) and sha:
            found.setdefault(str(row["engine"]), set()).add(sha)
    return {engine: sorted(shas) for engine, shas in sorted(found.items())}


def _gate_brief(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    if not summary:
        return {"passed": None, "triggered": [], "reason": "no host telemetry summary recorded"}
    found = summary.get("gate")
    gate: Mapping[str, Any] = found if isinstance(found, Mapping) else summary
    triggered = [t.get("condition") for t in gate.get("triggered") or []]
    return {"passed": bool(gate.get("passed")), "triggered": triggered}


def combined_gate(summaries: Mapping[str, Mapping[str, Any] | None]) -> dict[str, Any]:
    """The pooled host gate: passed when every place's passed; what tripped, named by place."""
    triggered, passed = [], True
    for place, summary in sorted(summaries.items()):
        brief = _gate_brief(summary)
        if brief["passed"] is None:
            passed = False
            triggered.append({"condition": f"{place}: no host telemetry summary"})
        elif not brief["passed"]:
            passed = False
            triggered += [{"condition": f"{place}: {c}"} for c in brief["triggered"]]
    return {"polluted": not passed, "gate": {"passed": passed, "triggered": triggered}}


def _calibration_brief(calibration: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not calibration:
        return None
    overall = calibration.get("overall") or {}
    keep = (
        "pairs",
        "median_duration_overhead_pct",
        "median_collection_wall_overhead_pct",
        "status_mismatch_rate",
    )
    return {
        "mode": calibration.get("mode", "separate"),
        "acceptable": bool(calibration.get("acceptable")),
        "failed_checks": list(calibration.get("failed_checks") or []),
        "overall": {k: overall.get(k) for k in keep},
        "by_engine": {
            engine: {k: (figures or {}).get(k) for k in keep}
            for engine, figures in (calibration.get("by_engine") or {}).items()
        },
        "not_same_process_pairs": (calibration.get("not_same_process") or {}).get("pairs"),
        "first_on_launch_pairs": (calibration.get("first_on_launch") or {}).get("pairs"),
    }


def one_place_condition(place: str) -> dict[str, Any]:
    return {
        "id": "one_host",
        "title": ONE_HOST_TITLE,
        "passed": True,
        "reason": f"every row from one host: {place}",
        "figures": {"hosts": [place]},
    }


@dataclass(frozen=True)
class PlaceInputs:
    manifest: Mapping[str, Any]
    engines: Sequence[str]
    rows: Sequence[Row]
    summary: Mapping[str, Any] | None
    calibration: Mapping[str, Any] | None
    cold_start: Sequence[Row]
    fingerprint: Mapping[str, Any]
    resamples: int
    seed: int


def _place_values(inter: Intersection) -> dict[str, dict[str, dict[tuple[str, int], float]]]:
    """engine -> metric -> (task_id, attempt) -> value, over the place's intersection rows."""
    out: dict[str, dict[str, dict[tuple[str, int], float]]] = {}
    for engine, rows in inter.rows_by_engine.items():
        columns = inter.metric_columns(engine)
        out[engine] = {
            metric: {
                task_attempt(row): float(value)
                for row, value in zip(rows, columns[metric], strict=True)
                if value is not None
            }
            for metric in host_homogeneity.METRICS
        }
    return out


def place_record(place: str, inp: PlaceInputs) -> tuple[dict[str, Any], dict[str, Any]]:
    """One place's level (its verdict, medians, cold starts, fingerprint), and its values for
    the homogeneity test."""
    inter = all_pass_intersection(inp.rows, inp.engines)
    verdict = eligibility.evaluate(
        inp.manifest, inp.rows, inp.summary, inp.calibration, inter, one_place_condition(place)
    )
    first = inp.rows[0].get("placement") if inp.rows else None
    record = {
        "place": place,
        "host": first.get("host") if isinstance(first, Mapping) else place,
        "rows": len(inp.rows),
        "fingerprint": {**dict(inp.fingerprint), "engines": engine_shas(inp.rows)},
        "resource_comparison_eligible": verdict["resource_comparison_eligible"],
        "ineligibility_reasons": verdict["ineligibility_reasons"],
        "eligibility_conditions": verdict["conditions"],
        "host_gate": _gate_brief(inp.summary),
        "calibration": _calibration_brief(inp.calibration),
        "all_pass_intersection": {
            "attempts": len(inter.keys),
            "tasks": len({t for t, _ in inter.keys}),
        },
        "by_engine": {
            engine: {
                "intersection_attempts": len(inter.rows_by_engine.get(engine, [])),
                "metrics": describe_metrics(
                    inter.rows_by_engine.get(engine, []),
                    inter.metric_columns(engine),
                    PLACE_METRICS,
                    inp.resamples,
                    inp.seed,
                ),
            }
            for engine in inp.engines
        },
        "cold_start": cold_start_summary(inp.cold_start, inp.engines, inp.resamples, inp.seed),
    }
    return record, _place_values(inter)


@dataclass(frozen=True)
class HostLevels:
    per_host: dict[str, dict[str, Any]]
    homogeneity: dict[str, Any]
    one_host: dict[str, Any]  # the pooled level's eighth condition
    gate: dict[str, Any]  # the pooled level's host gate (every place's)

    @property
    def pooled(self) -> bool:
        return bool(self.one_host["passed"])

    def pooled_calibration(self, pooled: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The pooled pairs' calibration with each place's own verdict as a check of its own."""
        if pooled is None:
            return None
        checks = list(pooled.get("checks") or [])
        for place, record in self.per_host.items():
            own = record["calibration"]
            ok = bool(own and own["acceptable"])
            why = (
                "acceptable"
                if ok
                else "missing"
                if own is None
                else "failed: " + ", ".join(own["failed_checks"])
            )
            checks.append(
                {
                    "name": f"host_calibration[{place}]",
                    "passed": ok,
                    "reason": f"{place}'s own calibration {why}",
                    "figures": {},
                }
            )
        failed = [c["name"] for c in checks if not c["passed"]]
        return {**pooled, "checks": checks, "failed_checks": failed, "acceptable": not failed}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": HOSTS_SCHEMA,
            "places": list(self.per_host),
            "per_host": self.per_host,
            "homogeneity": self.homogeneity,
            "pooled": self.pooled,
            "statement": self.one_host["reason"],
        }


def host_levels(
    manifest: Mapping[str, Any],
    rows: Sequence[Row],
    twins: Sequence[Row],
    cold_start_rows: Sequence[Row],
    dask_hosts: Mapping[str, Any] | None,
    calibrator: Calibrator | None,
    resamples: int,
    seed: int,
) -> HostLevels | None:
    """Each place's level and the pooling decision; None for a local run."""
    by_place = split_by_place(latest_rows(rows))
    if not by_place:
        return None
    engines = read_facts(manifest).engines
    summaries = place_summaries(dask_hosts)
    fingerprints = place_fingerprints(manifest, dask_hosts)
    twins_by_place = split_by_place(twins)
    cold_by_place = split_by_place(cold_start_rows)
    per_host, values = {}, {}
    for place, place_rows in by_place.items():
        own_twins = twins_by_place.get(place, [])
        inputs = PlaceInputs(
            manifest,
            engines,
            place_rows,
            summaries.get(place),
            calibrator(place_rows, own_twins) if calibrator else None,
            cold_by_place.get(place, []),
            fingerprints.get(place, {}),
            resamples,
            seed,
        )
        per_host[place], values[place] = place_record(place, inputs)
    homogeneity = _homogeneity(per_host, values)
    gate = combined_gate({place: summaries.get(place) for place in by_place})
    return HostLevels(per_host, homogeneity, _one_host(per_host, homogeneity), gate)


def _homogeneity(
    per_host: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any]
) -> dict[str, Any]:
    if len(per_host) < 2:
        return {
            "tested": False,
            "reason": "one host: nothing to pool",
            "statement": host_homogeneity.STATEMENT,
        }
    prints = {place: record["fingerprint"] for place, record in per_host.items()}
    shas = {place: record["fingerprint"]["engines"] for place, record in per_host.items()}
    same = host_homogeneity.same_fingerprints(prints, shas)
    medians = host_homogeneity.median_agreement(values)
    reasons = list(same["problems"])
    if medians["disagreeing"]:
        reasons.append(
            "medians differ beyond their intervals: " + "; ".join(medians["disagreeing"])
        )
    if medians["undecided"]:
        reasons.append("too few shared tasks to test: " + "; ".join(medians["undecided"]))
    if not medians["comparisons"]:
        reasons.append("no engine passed a task on two hosts: no median to compare")
    return {
        "tested": True,
        "statement": host_homogeneity.STATEMENT,
        "fingerprints": same,
        "medians": medians,
        "homogeneous": not reasons,
        "reasons": reasons,
    }


def _one_host(
    per_host: Mapping[str, Mapping[str, Any]], homogeneity: Mapping[str, Any]
) -> dict[str, Any]:
    places = list(per_host)
    figures = {
        "hosts": places,
        "per_host": {
            place: {
                "rows": r["rows"],
                "resource_comparison_eligible": r["resource_comparison_eligible"],
                "ineligibility_reasons": r["ineligibility_reasons"],
            }
            for place, r in per_host.items()
        },
        "homogeneous": homogeneity.get("homogeneous"),
    }
    if len(places) == 1:
        return {**one_place_condition(places[0]), "figures": figures}
    eligible = [p for p, r in per_host.items() if r["resource_comparison_eligible"]]
    listed = f"rows from {len(places)} hosts ({', '.join(places)})"
    if homogeneity["homogeneous"]:
        reason = (
            f"{listed} pooled: same engine binaries, CPU model and usable cores, and "
            f"medians agreeing in all {homogeneity['medians']['comparisons_made']} "
            "comparisons of the homogeneity test"
        )
    else:
        reason = (
            f"{listed} not pooled ({'; '.join(homogeneity['reasons'])}); judged per "
            f"host, eligible: {', '.join(eligible) or 'none'}"
        )
    return {
        "id": "one_host",
        "title": ONE_HOST_TITLE,
        "passed": bool(homogeneity["homogeneous"]),
        "reason": reason,
        "figures": figures,
    }
