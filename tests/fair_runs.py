"""Synthetic profiled runs for the fair-comparison tests (rows, manifests, records).

Values are drawn from a seeded generator with a known structure (chrome ~10x lightpanda CPU),
so tests can assert on the statistics; nothing here is a measurement of a real engine.
"""

from __future__ import annotations

import random
from typing import Any

from metewand.runtime.schedule import Rotation

HOST = {"kernel": "6.1.0-test", "machine": "x86_64", "cpu_count": 2, "cgroup": {"version": "v2"}}
SCALE = {"chrome": 10.0, "lightpanda": 1.0, "moli": 3.0}


def form(value: int | None, reason: str = "accounting_unavailable") -> dict[str, Any]:
    if value is None:
        return {"status": "unavailable", "reason": reason}
    return {"status": "complete", "value": int(value)}


def traffic(tx_body: int = 1598, available: bool = True) -> dict[str, Any]:
    return {
        "schema": "abb_fixture_traffic/1",
        "available": available,
        "reason": None if available else "ambiguous_attribution",
        "byte_semantics": "app_layer_v1",
        "fixture_app_rx_body_bytes": 0 if available else None,
        "fixture_app_tx_body_bytes": tx_body if available else None,
        "fixture_app_rx_header_bytes": 410 if available else None,
        "fixture_app_tx_header_bytes": 220 if available else None,
        "fixture_request_count": 2 if available else None,
        "excluded_harness_rx_body_bytes": 0,
        "excluded_harness_tx_body_bytes": 0,
        "excluded_harness_rx_header_bytes": 0,
        "excluded_harness_tx_header_bytes": 0,
        "excluded_harness_request_count": 0,
        "ambiguous_request_count": 0 if available else 1,
        "inflight_request_count": 0,
    }


def resource(
    cpu_ms: int | None,
    pss_peak: int,
    duration_ms: float,
    wall_ms: float,
    flags: list[str] | None = None,
    cgroup_peak: int | None = None,
) -> dict[str, Any]:
    baseline = pss_peak * 9 // 10
    return {
        "schema": "metewand_engine_resources/1",
        "scope": "engine_scope",
        "backend": "cgroup2",
        "measurement_backend": {
            "cpu": "cgroup2:cpu.stat",
            "memory_pss": "proc_smaps_rollup",
            "memory_accounting": "cgroup1:memory",
        },
        "interval_ms": 500,
        "cpu_total_ms": form(cpu_ms),
        "cpu_user_ms": form(None if cpu_ms is None else cpu_ms * 7 // 10),
        "cpu_system_ms": form(None if cpu_ms is None else cpu_ms - cpu_ms * 7 // 10),
        "avg_cores": None if cpu_ms is None else round(cpu_ms / duration_ms, 4),
        "pss_baseline_bytes": form(baseline),
        "pss_peak_bytes": form(pss_peak),
        "pss_end_bytes": form(baseline + 4096),
        "pss_peak_delta_bytes": form(pss_peak - baseline),
        "process_count_baseline": form(3),
        "process_count_peak": form(4),
        "process_count_end": form(3),
        "cgroup_memory_current_bytes": form(pss_peak),
        "cgroup_memory_peak_bytes": form(cgroup_peak if cgroup_peak is not None else pss_peak),
        "sample_counts": {"ticks": 4, "pss_samples": 3, "pss_every": 1},
        "sampler_cpu_ms": 1.25,
        "quality_flags": flags or [],
        "collection_wall_ms": wall_ms,
        "duration_ms": duration_ms,
        "fault": None,
    }


def manifest(run_id: str = "run_b", **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "suite": "browser",
        "selected_engines": ["chrome", "lightpanda"],
        "k": 5,
        "seed": "resource-calibration-v1",
        "jobs": 1,
        "score_mode": "independent",
        "resource_profile": {
            "mode": "engine",
            "sample_interval_ms": 500,
            "settle_limit_ms": 1000,
            "engine_order": "balanced_rotation",
            "engine_order_algorithm": "cyclic_task_attempt_seed_offset_v1",
        },
        "corpus": {"tasks_sha256": "ab" * 32, "task_count": 6},
        "engines": {"chrome": {"sha256": "1" * 64}, "lightpanda": {"sha256": "2" * 64}},
        "harness_pins": {"python": "3.11"},
        "runner": {"source": {"schema": "abb_runner_source/1", "tree_sha256": "c" * 64}},
        "host": HOST,
        "reuse": "per_run",
    }
    for key, value in overrides.items():
        if key == "mode":
            data["resource_profile"] = {**data["resource_profile"], "mode": value}
        else:
            data[key] = value
    return {"schema": "metewand_run_manifest/1", "run_id": run_id, "data": data}


def rows(
    engines: tuple[str, ...] = ("chrome", "lightpanda"),
    n_tasks: int = 6,
    k: int = 5,
    seed: str = "resource-calibration-v1",
    statuses: dict[tuple[str, str, int], str] | None = None,
    profiled: bool = True,
    slowdown: float = 1.0,
    wall_overhead: float = 1.03,
    rng_seed: int = 1,
) -> list[dict[str, Any]]:
    """One row per task x engine x attempt in balanced-rotation order."""
    rng = random.Random(rng_seed)
    rotation = Rotation(engines, seed)
    tasks = [f"task_{i:03d}" for i in range(n_tasks)]
    plan = [(t, a) for t in tasks for a in range(k)]
    out = []
    for index, (task, attempt) in enumerate(plan):
        for position, engine in enumerate(rotation.order(index)):
            size = (1 + tasks.index(task)) * SCALE.get(engine, 2.0)
            duration = round(100.0 * size * rng.uniform(0.98, 1.02), 3)
            cpu = int(50 * size * rng.uniform(0.9, 1.1))  # drawn in both runs: same durations
            peak = int(size * 2**20 * rng.uniform(0.95, 1.05))
            status = (statuses or {}).get((task, engine, attempt), "pass")
            row: dict[str, Any] = {
                "key": f"l1/l1.raw_cdp/{task}/{engine}/{attempt}",
                "run_id": "run",
                "layer": "l1",
                "subset": "l1.raw_cdp",
                "task_id": task,
                "engine": engine,
                "attempt": attempt,
                "status": status,
                "duration_ms": round(duration * slowdown, 3),
                "order": {"round": index, "position": position},
                "traffic": traffic() if profiled else None,
                "collection_wall_ms": round(duration * (wall_overhead if profiled else 1.0), 3),
            }
            if profiled:
                row["resource"] = resource(cpu, peak, row["duration_ms"], row["collection_wall_ms"])
            out.append(row)
    return out


def baseline_pair(**overrides: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The profiler-off run A matching ``manifest()`` / ``rows()``."""
    return manifest("run_a", mode="baseline", **overrides), rows(profiled=False)


def cold_start_rows(engines: tuple[str, ...] = ("chrome", "lightpanda"), n: int = 5) -> list:
    out = []
    for engine in engines:
        for i in range(n):
            scale = SCALE.get(engine, 2.0)
            out.append(
                {
                    "schema": "abb_engine_resources/1",
                    "phase": "cold_start",
                    "engine": engine,
                    "sample": i,
                    "ready_ms": 100.0 * scale + i,
                    "launch_cpu_ms": float(int(80 * scale) + i),
                    "launch_peak_pss_bytes": int(scale * 30 * 2**20),
                }
            )
    return out
