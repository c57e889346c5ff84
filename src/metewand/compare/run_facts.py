"""The run-manifest facts the fair-comparison checks read, in one place.

A manifest is the run store's ``run_manifest.json`` (facts under ``data``) or the bare ``data``
object. Each fact lists the dotted paths it may live at, first match wins: the first path is
metewand's own name, later ones accept the peer benchmark's spelling (``k_runs``,
``resource_profile.mode``, ``runner.jobs``), so a comparison can read either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MISSING = object()
# What pins an engine: its binary and the version it reports. Launch details (argv with a fresh
# port and profile dir, the DevTools URL) change on every launch and say nothing about the engine.
ENGINE_PIN_FIELDS = ("found", "binary_path", "binary_sha256", "version_output", "cdp_product")

FACT_PATHS: dict[str, tuple[str, ...]] = {
    "selected_engines": ("selected_engines",),
    "k": ("k", "k_runs"),
    "seed": ("seed",),
    "jobs": ("jobs", "runner.jobs"),
    "score_mode": ("score_mode",),
    "resource_profile": ("resource_profile.mode", "resource_profile"),
    "sample_interval_ms": ("resource_profile.sample_interval_ms", "sample_interval_ms"),
    "settle_limit_ms": ("resource_profile.settle_limit_ms",),
    "engine_order": ("engine_order", "resource_profile.engine_order"),
    "engine_order_algorithm": (
        "engine_order_algorithm",
        "resource_profile.engine_order_algorithm",
    ),
    "corpus": ("corpus", "tasks", "resolved_tasks"),
    "engine_pins": ("engines",),
    # the peer's pins; ours is the source tree's hash (runs before 2026-12 also wrote harness_pin)
    "harness_pins": (
        "harness_pins",
        "runner.harness_pins",
        "harness_pin",
        "runner.source.tree_sha256",
    ),
    "runner_source": ("runner.source.tree_sha256", "runner_source.tree_sha256"),
    "host": ("host",),
    "reuse": ("reuse", "browser_reuse", "runner.browser_reuse"),
    "calibration_baseline": ("resource_profile.calibration_baseline", "calibration_baseline"),
    # metewand's own: phase marks read counters in every attempt (absent: a run without them)
    "phase_marks": ("phase_marks",),
}


def manifest_data(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    data = manifest.get("data")
    return data if isinstance(data, Mapping) else manifest


def lookup(data: Mapping[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return MISSING
        node = node[part]
    return node


@dataclass(frozen=True)
class RunFacts:
    run_id: str | None
    values: dict[str, Any]  # fact name → value (MISSING when absent)
    paths: dict[str, str | None]  # fact name → the path it was read from

    def get(self, name: str, default: Any = None) -> Any:
        value = self.values.get(name, MISSING)
        return default if value is MISSING else value

    def has(self, name: str) -> bool:
        return self.values.get(name, MISSING) is not MISSING

    @property
    def engines(self) -> list[str]:
        return list(self.get("selected_engines") or [])


def read_facts(manifest: Mapping[str, Any]) -> RunFacts:
    data = manifest_data(manifest)
    values: dict[str, Any] = {}
    paths: dict[str, str | None] = {}
    for name, candidates in FACT_PATHS.items():
        values[name], paths[name] = MISSING, None
        for dotted in candidates:
            found = lookup(data, dotted)
            if found is not MISSING and not (
                name == "resource_profile" and isinstance(found, dict)
            ):
                values[name], paths[name] = _normalized(name, found), dotted
                break
    run_id = manifest.get("run_id") or data.get("run_id")
    return RunFacts(str(run_id) if run_id is not None else None, values, paths)


def _normalized(name: str, value: Any) -> Any:
    if name != "engine_pins" or not isinstance(value, Mapping):
        return value
    return {
        engine: {f: facts[f] for f in ENGINE_PIN_FIELDS if f in facts}
        if isinstance(facts, Mapping)
        else facts
        for engine, facts in value.items()
    }


def latest_rows(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One row per attempt key (the last one written wins, as after a resume)."""
    by_key: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        by_key[str(row["key"])] = row
    return list(by_key.values())
