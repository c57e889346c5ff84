"""Synthetic run directories for report tests and benchmarks/report_speed.py (test code only).

The rows follow the documented browser result row (docs/DESIGN.md) and the compute attempt record
(outcome + provenance.data.measurements); values are drawn from a seeded generator, so a given seed
always writes the same bytes. Nothing here is ever presented as a measurement of a real engine.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metewand import canonical
from metewand.measure.accounting import CpuReading
from metewand.measure.forms import Measurement, Status
from metewand.measure.phases import Counters, PhaseClock
from metewand.runtime import rundir
from metewand.runtime.store import RunStore

STATUS_WEIGHTS = {"pass": 90, "fail": 5, "unsupported": 2, "timeout": 1, "crash": 1, "infra": 1}
FAILURE_CLASS = {
    "pass": None,
    "fail": "check_failed",
    "unsupported": "cdp_method_not_found",
    "timeout": "step_timeout",
    "crash": "engine_died",
    "infra": "harness_error",
}
PHASES = (
    "worker_startup_time_ns",
    "prepare_time_ns",
    "execute_request_time_ns",
    "timed_wall_time_ns",
    "evaluation_time_ns",
)


def _form(value: int | None, reason: str = "accounting_unavailable") -> dict[str, Any]:
    if value is None:
        return {"status": "unavailable", "reason": reason}
    return {"status": "complete", "value": value}


def _resource(rng: random.Random, scale: float, engine: str) -> dict[str, Any]:
    peak = int(rng.lognormvariate(0, 0.2) * scale * 200 * 2**20)
    cpu = int(rng.lognormvariate(0, 0.3) * scale * 300)
    pss_missing = rng.random() < 0.01
    return {
        "schema": "abb_engine_resources/1",
        "engine": engine,
        "cpu_total_ms": _form(cpu),
        "cpu_user_ms": _form(int(cpu * 0.7)),
        "cpu_system_ms": _form(cpu - int(cpu * 0.7)),
        "pss_baseline_bytes": _form(peak // 2),
        "pss_peak_bytes": _form(None, "pss_unavailable") if pss_missing else _form(peak),
        "pss_end_bytes": _form(int(peak * 0.8)),
        "quality_flags": ["baseline_end_only"] if rng.random() < 0.05 else [],
    }


def browser_row(
    rng: random.Random, run_id: str, task: tuple[str, str, str, str], engine: str, attempt: int
) -> dict[str, Any]:
    layer, subset, task_id, _title = task
    status = rng.choices(list(STATUS_WEIGHTS), weights=list(STATUS_WEIGHTS.values()))[0]
    scale = 1.0 if engine == "chrome" else 0.35
    duration = int(rng.lognormvariate(0, 0.4) * 400 * scale) + 5
    start = 1_700_000_000_000 + attempt * 1000
    key = f"{layer}/{subset}/{task_id}/{engine}/{attempt}"
    return {
        "key": key,
        "run_id": run_id,
        "layer": layer,
        "subset": subset,
        "task_id": task_id,
        "engine": engine,
        "attempt": attempt,
        "status": status,
        "failure_class": FAILURE_CLASS[status],
        "origin": None if status == "pass" else ("engine" if status != "infra" else "harness"),
        "secondary_status": None,
        "reason": None if status == "pass" else f"synthetic {status} on {task_id}",
        "duration_ms": duration,
        "started_at": start,
        "finished_at": start + duration,
        "isolation": "shared",
        "order": {"round": attempt - 1, "position": 0 if engine == "chrome" else 1},
        "checks": [{"kind": "equals", "passed": status == "pass"}],
        "traffic": None,
        "resource": _resource(rng, scale, engine),
        "artifacts": {"cdp_log": f"artifacts/{key}/cdp.jsonl"},
    }


def browser_tasks(
    n_tasks: int, titles: dict[str, str] | None = None
) -> list[tuple[str, str, str, str]]:
    tasks: list[tuple[str, str, str, str]] = []
    for i in range(n_tasks):
        layer = "l1" if i % 3 else "l2"
        subset = "l1.raw_cdp" if layer == "l1" else "l2.web_platform"
        task_id = f"task_{i:05d}"
        title = (titles or {}).get(task_id, f"Synthetic task {i}")
        tasks.append((layer, subset, task_id, title))
    return tasks


def write_browser_run(
    path: Path,
    n_tasks: int = 20,
    k: int = 5,
    engines: tuple[str, ...] = ("chrome", "lightpanda"),
    seed: int = 7,
    titles: dict[str, str] | None = None,
    telemetry: bool = True,
) -> Path:
    rng = random.Random(seed)
    run_id = path.name
    tasks = browser_tasks(n_tasks, titles)
    manifest = {
        "suite": "browser",
        "selected_engines": list(engines),
        "k": k,
        "seed": str(seed),
        "jobs": 1,
        "resource_profile": "engine",
        "score_mode": "independent",
        "backend": "cgroup2",
        "host": {"hostname": "synthetic-host", "kernel": "6.1.0", "governor": "performance"},
        "engines": {
            e: {"version": f"{e}/1.0", "sha256": f"{i:064x}", "path": f"/opt/{e}"}
            for i, e in enumerate(engines)
        },
        "tasks": {t[2]: {"title": t[3], "layer": t[0], "subset": t[1]} for t in tasks},
    }
    _create(path, manifest)
    with (path / rundir.RESULTS).open("ab") as out:  # bulk write: a synthetic run needs no fsync
        for attempt in range(1, k + 1):  # numbered from 1, as browser runs number them
            for task in tasks:
                for engine in engines:
                    out.write(canonical.line(browser_row(rng, run_id, task, engine, attempt)))
    if telemetry:
        with (path / rundir.HOST_TELEMETRY).open("wb") as out:
            for i in range(60):
                out.write(canonical.line(telemetry_sample(rng, i)))
    return path


def _psi(rng: random.Random, busy: bool) -> dict[str, Any]:
    avg = round(rng.random() * 3 + (40 if busy else 0), 2)
    return {"some": {"avg10": avg, "avg60": avg, "avg300": avg, "total": 1000}}


def telemetry_sample(rng: random.Random, seq: int) -> dict[str, Any]:
    """One abb_host_telemetry/1 line; samples 20-22 show a polluted host (PSI, load)."""
    busy = 20 <= seq <= 22
    return {
        "schema": "abb_host_telemetry/1",
        "seq": seq,
        "timestamp": f"2024-01-01T00:{seq // 30:02d}:{seq * 2 % 60:02d}Z",
        "monotonic_ns": seq * 2_000_000_000,
        "root_pid": 4242,
        "loadavg": {
            "one": round(0.5 + rng.random() + (3 if busy else 0), 2),
            "five": 1.0,
            "fifteen": 1.0,
        },
        "memory": {
            "total_bytes": 8 * 2**30,
            "available_bytes": int(5 * 2**30 - rng.random() * 2**28),
            "swap_total_bytes": 0,
            "swap_free_bytes": 0,
            "swap_used_bytes": 0,
        },
        "vmstat": {"pswpin_pages": 0, "pswpout_pages": 0},
        "swap_activity": None if seq == 0 else {"pswpin_delta_pages": 0, "pswpout_delta_pages": 0},
        "psi": {"cpu": _psi(rng, busy), "memory": _psi(rng, False), "io": _psi(rng, False)},
        "bench_descendant_process_count": 12,
        "unavailable": {},
    }


def _measurements(rng: random.Random, scale: float, accepted: bool) -> dict[str, Any]:
    """An execution-measurements payload (version 2), as the compute executor writes it."""
    payload: dict[str, Any] = {"version": 2, "accounting_backend": "cgroup2"}
    for name in PHASES:
        payload[name] = _form(int(rng.lognormvariate(0, 0.3) * scale * 5e7))
    payload["evaluator_startup_time_ns"] = _form(int(6e7 * scale))
    if not accepted:
        payload["evaluation_time_ns"] = {"status": "unavailable", "reason": "not_started"}
    payload["cpu_time_ns"] = {
        "status": "partial",
        "value": int(4e7 * scale),
        "reason": "process_only",
    }
    payload["cpu_time_scope"] = "prepare_and_execute"
    payload["peak_rss_bytes"] = {
        "status": "partial",
        "value": int(3e7 * scale),
        "reason": "process_only",
    }
    payload["peak_rss_scope"] = "worker_lifetime_through_execute"
    payload["materialization_time_ns"] = {"status": "unavailable", "reason": "provided_dataset"}
    payload["timed_wall_includes"] = ["integrity_checks"]
    return payload


def _compute_provenance(measurements: dict[str, Any]) -> dict[str, Any]:
    high_water: dict[str, Any] = {"status": "complete", "value": 1 << 25}
    if measurements["evaluation_time_ns"]["status"] == "unavailable":  # a failed attempt
        high_water = {**high_water, "status": "partial", "reason": "interrupted"}
    return {
        "tool_version": "0.0.0-synthetic",
        "public_schema_version": 1,
        "identity_version": 1,
        "identity_recipe": 2,
        "manifest_version": 1,
        "wire_protocol_version": 1,
        "execution_semantics_version": 2,
        "data": {
            "measurements": measurements,
            "tree_memory": {  # the kernel's tree high-water beside the payload, as real rows
                "version": 1,
                "kernel_tree_memory_high_water_bytes": high_water,
                "scope": "worker_lifetime_through_execute",
                "charged": ["anon", "page_cache", "kernel"],
                "accounting_backend": "cgroup2",
            },
            "context": {
                "dataset_materialization": {"origin": "provided"},
                "worker": {"accounting_backend": "cgroup2", "pid": 1},
                "evaluator": {"pid": 2, "reused": False},
                "logs": {},
                "concurrency": {"jobs": 1},
                "timing_scope": "prepare_and_execute",
                "resolved": {"specification": _ident("resolved-specification", "synthetic")},
            },
        },
    }


def _ident(kind: str, *parts: object) -> str:
    return f"mw1-{kind}-synthetic-" + "-".join(str(p) for p in parts)


def _compute_observation(slot: str, attempt_id: str, rel: str, prov: dict[str, Any]) -> Any:
    timing = {k: v["value"] for k, v in prov["data"]["measurements"].items() if k in PHASES}
    body = {
        "slot_id": slot,
        "attempt_id": attempt_id,
        "result": {"id": _ident("artifact", rel), "path": f"{rel}/result", "sha256": "0" * 64},
        "metrics": {
            "id": _ident("artifact", rel, "m"),
            "path": f"{rel}/metrics/metrics.json",
            "sha256": "0" * 64,
        },
        "timing": {**timing, "primary_time": "timed_wall_time"},
        "validity": {"valid": True, "completion": "not_required"},
    }
    return {"schema_version": 1, "id": _ident("observation", rel), **body, "provenance": prov}


PHASE_GROUPS = {
    "implementation": ("worker_startup", "prepare", "integrity_check", "execute"),
    "evaluator": ("evaluator_startup", "evaluation"),
}


def _phases(rng: random.Random, scale: float) -> dict[str, Any]:
    """A ``phases`` field as compute attempts write it, built by the real phase arithmetic from
    made-up cgroup readings (clocks that advance a random step per reading)."""
    out: dict[str, Any] = {"schema": "metewand_attempt_phases/1"}
    for role, names in PHASE_GROUPS.items():
        clock = PhaseClock(_made_up_reader(rng, scale), "compute_attempt")
        clock.peak_method = "cgroup1:memory.max_usage_in_bytes restarted at each mark"
        clock.begin()
        for name in names:
            clock.mark(name)
        clock.finish()
        out[role] = clock.record()
    return out


def _made_up_reader(rng: random.Random, scale: float) -> Callable[[], Counters]:
    now = {"ns": 1_000_000_000, "cpu": 0}

    def read() -> Counters:
        now["ns"] += int(rng.uniform(1e6, 5e6) * scale)
        now["cpu"] += int(rng.uniform(5e5, 4e6) * scale)
        cpu = Measurement(Status.COMPLETE, now["cpu"])
        half = Measurement(Status.COMPLETE, now["cpu"] // 2)
        memory, processes = Measurement(Status.COMPLETE, 8 << 20), Measurement(Status.COMPLETE, 1)
        peak = Measurement(Status.COMPLETE, (8 << 20) + int(rng.uniform(0, 4 << 20)))
        return Counters(now["ns"], CpuReading(cpu, half, half), memory, processes, peak)

    return read


def compute_row(
    rng: random.Random, impl: str, repetition: int, role: str = "measured", size: int = 1000
) -> dict[str, Any]:
    """One row of the shape ``suites/compute/records.build_row`` writes (a test pins this)."""
    accepted = rng.random() > 0.1
    scale = (1.0 if impl == "python" else 0.4) * size / 1000
    tail = f"r{repetition}" if role == "measured" else f"w{repetition}"
    dataset = "0000000000" if size == 1000 else f"{size:010d}"  # the first case keeps old keys
    key = f"sorting/default/integers@{dataset}/{impl}@0000000000/{tail}"
    slot, rel = _ident("logical-attempt-slot", key), f"artifacts/{key}"
    attempt_id = _ident("attempt", key)
    prov = _compute_provenance(_measurements(rng, scale, accepted))
    observation = _compute_observation(slot, attempt_id, rel, prov) if accepted else None
    code, message = (None, None) if accepted else ("result_invalid", "synthetic invalid result")
    outcome: dict[str, Any] = {"kind": "accepted"}
    if not accepted:
        details = {"measurements": prov["data"]["measurements"]}
        outcome = {
            "kind": "failed",
            "diagnostic": {"code": code, "message": message, "details": details},
        }
    record = {
        "schema_version": 1,
        "id": attempt_id,
        "slot_id": slot,
        "retry_index": 0,
        "outcome": outcome,
        "observations": [observation["id"]] if observation else [],
        "started_at": "2024-01-01T00:00:00.000Z",
        "finished_at": "2024-01-01T00:00:01.000Z",
        "provenance": prov,
    }
    return {
        "key": key,
        "slot_id": slot,
        "experiment": "sorting",
        "case": "default",
        "dataset": "integers",
        "dataset_parameters": {"size": size},
        "dataset_configuration": _ident("dataset-configuration", "integers"),
        "problem": "sort",
        "problem_parameters": {},
        "problem_configuration": _ident("problem-configuration", "sort"),
        "implementation": impl,
        "implementation_parameters": {},
        "implementation_configuration": _ident("implementation-configuration", impl),
        "candidate": _ident("logical-candidate", f"{impl}/{size}"),
        "specification": _ident("logical-specification", f"{impl}/{size}/{repetition}"),
        "observation_slot": _ident("logical-observation-slot", key) if role == "measured" else None,
        "repetition": repetition if role == "measured" else 0,
        "measurement_index": 0 if role == "measured" else None,
        "role": role,
        "timing_scope": "prepare_and_execute",
        "status": "accepted" if accepted else "failed",
        "attempt": 0,
        "code": code,
        "message": message,
        "metrics": {"sorted": True} if accepted else None,
        "statistics": {},
        "record": record,
        "observation": observation,
        "artifacts": rel,
        "phases": _phases(rng, scale),
    }


def write_compute_run(
    path: Path, attempts: int = 10, seed: int = 3, warmups: int = 0, cases: int = 1
) -> Path:
    """Per case (dataset size 1000, 2000, ...): ``warmups`` warm-up rows then ``attempts``
    measured rows per implementation."""
    rng = random.Random(seed)
    impls = ("python", "numpy")
    _create(path, {"benchmark": "sorting", "jobs": 1})
    with (path / rundir.RESULTS).open("ab") as out:
        for case in range(cases):
            size = 1000 * (case + 1)
            for impl in impls:
                for w in range(warmups):
                    out.write(canonical.line(compute_row(rng, impl, w, "warmup", size)))
            for i in range(attempts):
                for impl in impls:
                    out.write(canonical.line(compute_row(rng, impl, i, size=size)))
    return path


def _create(path: Path, settings: dict[str, Any]) -> None:
    """Create the run through the run store (its manifest layout), then close it complete."""
    store = RunStore.create(path.parent, path.name, settings)
    store.set_state("complete")
    store.close()
