"""The peer benchmark's top-level ``run_manifest.json`` fields, for a browser run.

The run store keeps its own envelope (``schema``, ``state``, ``data``, ...); these fields sit
beside it at the top level under the peer's names and meanings, so the peer's ``report`` and its
users' scripts read our run directory. ``start_fields`` is written when the run is created,
``engine_fields`` as each engine is first launched, ``finish_fields`` when the run stops
(completion counts and the run provenance seed 002 lists: backend, sampling interval, sample
counts, sampler CPU, quality flags).
"""

from __future__ import annotations

import hashlib
import platform
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from metewand.runtime import rundir
from metewand.runtime.schedule import ROTATION_ALGORITHM
from metewand.suites.browser import event_loop
from metewand.suites.browser.driver_provenance import run_drivers
from metewand.suites.browser.engines import ENGINES
from metewand.suites.browser.resource_record import (
    CONTROL_PLANE_NOT_IMPLEMENTED,
    WIRE_NOT_IMPLEMENTED,
)
from metewand.suites.browser.rows import AXIS_BY_LAYER
from metewand.suites.browser.run_config import REUSE_POLICY
from metewand.version import tool_version

BENCH_ID = "metewand_browser"
RESOURCE_SCHEMA = "abb_engine_resources/1"
HOST_TELEMETRY_SCHEMA = "abb_host_telemetry/1"


def _host(host: Mapping[str, Any]) -> dict[str, Any]:
    """The peer's ``host`` object from our host facts (a fact we could not read is null)."""
    governor = host.get("cpu_governor")
    governors = sorted(set(governor.values())) if isinstance(governor, Mapping) else []
    if isinstance(governor, Mapping) and "unavailable" in governor:
        governors = []
    raw_layout = host.get("cgroup_layout")
    layout: Mapping[str, Any] = raw_layout if isinstance(raw_layout, Mapping) else {}
    raw_v2 = layout.get("v2")
    v2: Mapping[str, Any] = raw_v2 if isinstance(raw_v2, Mapping) else {}
    return {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "cpu_count": host.get("cpu_count"),
        "cpu_affinity": host.get("cpu_affinity"),
        "cpu_governors": governors,
        # hybrid hosts (v1 controllers beside a cgroup2 mount) are neither pure v1 nor v2
        "cgroup_version": "hybrid" if layout.get("v1") and v2 else ("2" if v2 else None),
        "cgroup_path": v2.get("mountpoint"),
        "cgroup_cpuset_effective": None,
        "procfs": "/proc",
    }


def _resolved_task(task: Any) -> dict[str, Any]:
    data = task.data
    return {
        "sha256": hashlib.sha256((task.root / task.path).read_bytes()).hexdigest(),
        "task_id": task.task_id,
        "task_version": data.get("task_version"),
        "layer": task.layer,
        "subset_id": task.subset_id,
        "path": task.path,
        "driver": task.driver_kind,
        "scene": (data.get("scene") or {}).get("kind"),
        "grader": (data.get("grader") or {}).get("kind"),
        "evaluation_axis": data.get("evaluation_axis") or AXIS_BY_LAYER.get(task.layer),
        "launch_profile": data.get("launch_profile", "default"),
        "features": list(data.get("features") or []),
        "tags": list(data.get("tags") or []),
        "description": data.get("description"),
    }


def score_eligibility(selected: Sequence[str]) -> dict[str, Any]:
    """The peer's rule: a run's scores are eligible only over the complete engine roster (its
    own two-engine run says "partial engine set"); the reasons are written beside the flag."""
    reasons = [] if set(selected) == set(ENGINES) else ["partial engine set"]
    return {"score_eligible": not reasons, "score_ineligible_reasons": reasons}


def start_fields(
    plan: Any, run_id: str, facts: Mapping[str, Any], now: str, baseline_dir: str | None = None
) -> dict[str, Any]:
    """What is known when the run starts. ``facts`` is ``provenance.collect(list_files=True)``;
    ``baseline_dir``: the calibration baseline's directory, absolute, so a reader that resolves
    it from anywhere else (the peer's ``report`` resolves relative paths from its own root)
    finds the same run."""
    config = plan.config
    res = config.resource
    tasks = plan.tasks
    return {
        "run_id": run_id,
        "bench_id": BENCH_ID,
        "bench_version": plan.corpus.manifest.bench_version if plan.corpus.manifest else None,
        "harness_version": tool_version(),
        "argv": list(sys.argv),
        "started_at": now,
        "completion_status": "running",
        "selected_engines": list(config.engines),
        # metewand scores every selected engine on its own attempts
        "scored_engines": list(config.engines),
        "score_mode": config.score_mode,
        **score_eligibility(config.engines),
        "seed": config.seed,
        "k_runs": config.k,
        "selected_layers": sorted({t.layer for t in tasks}),
        "enabled_subsets": sorted({t.subset_id for t in tasks}),
        "expected_result_rows": len(plan.attempts),
        "completed_result_rows": 0,
        "resolved_tasks": [_resolved_task(t) for t in tasks],
        "engines": {},
        "host": _host(facts["host"]),
        "runner": {
            "jobs": config.jobs,
            "python": sys.version.split()[0],
            "event_loop": event_loop.describe(),
            "browser_reuse": REUSE_POLICY,
            "artifact_write_order": "artifact_then_results_jsonl",
            "source": facts["runner"]["source"],
            # metewand's own source tree, and every driver path the run's tasks use
            "harness_pins": {
                "manifest": None,
                "metewand": tool_version(),
                "drivers": run_drivers(dict(t.driver) for t in tasks),
            },
        },
        "resource_profile": {
            "mode": res.profile,
            "schema": RESOURCE_SCHEMA,
            "sample_interval_ms": res.sample_interval_ms,
            "calibration_baseline": baseline_dir or res.calibration_baseline,
            # ours: "interleaved" pairs each attempt with an unprofiled twin in this run
            "calibration": res.calibration_mode,
            "max_observer_effect_pct": res.max_observer_effect_pct,
            "cold_start_samples": res.cold_start_samples if res.profile == "engine" else 0,
            "cold_start_artifact": rundir.COLD_START if res.profile == "engine" else None,
            "engine_order": "balanced_rotation",
            "engine_order_algorithm": ROTATION_ALGORITHM,
            "engine_scope": "engine root plus all descendants (one accounting group per engine)",
            "harness_scope": "this process's CPU minus the sampler's threads; reported apart "
            "and excluded from engine comparison",
            "fixture_traffic_semantics": "application headers+bodies; grader/event endpoints "
            "excluded",
            "control_plane_traffic": CONTROL_PLANE_NOT_IMPLEMENTED["reason"],
            "wire_traffic": WIRE_NOT_IMPLEMENTED["reason"],
            "affects_functional_score": False,
        },
        "host_telemetry": {
            "enabled": res.host_telemetry,
            "schema": HOST_TELEMETRY_SCHEMA,
            "scope": "host_scope",
            "artifact": rundir.HOST_TELEMETRY if res.host_telemetry else None,
            "sample_interval_s": res.host_sample_interval_s,
            "affects_functional_score": False,
        },
    }


def engine_fields(identity: Mapping[str, Any]) -> dict[str, Any]:
    """One entry of the peer's ``engines`` map from our launch identity."""
    sha = identity.get("binary_sha256")
    return {
        "binary": identity.get("binary_path"),
        "sha256": sha,
        "sha256_12": sha[:12] if isinstance(sha, str) else None,
        "version": identity.get("version_output") or identity.get("cdp_product"),
        "role": "engine_under_test",
    }


def resource_provenance(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Seed 002's run provenance gathered from the rows: backends, sampling interval, sample
    counts, sampler CPU and quality flags, per engine."""
    out: dict[str, Any] = {}
    for row in rows:
        res = row.get("resource")
        if not isinstance(res, Mapping):
            continue
        entry = out.setdefault(
            str(row.get("engine")),
            {
                "attempts": 0,
                "backends": Counter(),
                "sample_interval_ms": set(),
                "samples_seen": 0,
                "sampler_cpu_ms": 0.0,
                "quality_flags": Counter(),
            },
        )
        entry["attempts"] += 1
        backend = res.get("measurement_backend") or {}
        entry["backends"][
            f"cpu={backend.get('cpu')};memory={backend.get('memory_accounting')}"
        ] += 1
        if res.get("sample_interval_ms") is not None:
            entry["sample_interval_ms"].add(res["sample_interval_ms"])
        if isinstance(res.get("samples_seen"), int):
            entry["samples_seen"] += res["samples_seen"]
        if isinstance(res.get("sampler_cpu_ms"), int | float):
            entry["sampler_cpu_ms"] += res["sampler_cpu_ms"]
        entry["quality_flags"].update(str(f) for f in res.get("quality_flags") or [])
    return {
        engine: {
            "attempts": e["attempts"],
            "backends": dict(sorted(e["backends"].items())),
            "sample_interval_ms": sorted(e["sample_interval_ms"]),
            "samples_seen_total": e["samples_seen"],
            "sampler_cpu_ms_total": round(e["sampler_cpu_ms"], 3),
            "quality_flags": dict(sorted(e["quality_flags"].items())),
        }
        for engine, e in sorted(out.items())
    }


def finish_fields(
    rows: Sequence[Mapping[str, Any]],
    status: str,
    now: str,
    host_telemetry: Mapping[str, Any],
    host_summary: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """``completion_status`` is ``completed`` or ``interrupted``, as the peer writes it."""
    return {
        "completed_at": now,
        "completion_status": status,
        "completed_result_rows": len(rows),
        "resource_provenance": resource_provenance(rows),
        "host_telemetry": {**host_telemetry, "summary": host_summary},
    }
