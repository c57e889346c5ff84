"""The adapter attempt's row fields about its driver: which path and version ran, how its
adapter ended and in which mode, and what the adapter's own process tree cost (harness scope,
laid out as the peer's engine ``resource`` record)."""

from __future__ import annotations

from typing import Any, Final

from metewand.suites.browser import adapter_targets
from metewand.suites.browser.adapter_server import AdapterRunner, LongLivedAdapter
from metewand.suites.browser.adapters import AdapterRun
from metewand.suites.browser.driver_registry import DriverMissing, DriverPath
from metewand.suites.browser.run_config import PAGE_PLACES

DRIVER_RESOURCES_SCHEMA: Final = "metewand_driver_resources/1"
# an adapter that ended without a result (or one from before adapters said) did not say where
# its pages were
ADAPTER_ISOLATION: Final = "adapter_managed"


def adapter_isolation(run: AdapterRun | None) -> str:
    """Where the adapter says it opened the attempt's pages: ``context`` (a browser context of
    the attempt's own) or ``shared`` (the engine's default context)."""
    said = (run.result or {}).get("isolation") if run is not None else None
    return said if said in PAGE_PLACES else ADAPTER_ISOLATION


def driver_block(
    path: DriverPath,
    found: Any,
    run: AdapterRun | None,
    runner: AdapterRunner | None = None,
    mode: str | None = None,
    cleanup: adapter_targets.TargetCleanup | None = None,
    isolation_asked: str | None = None,
) -> dict[str, Any]:
    """The row's driver fields: which path, which version, how its adapter ended (in which
    mode, served by which process, leaving which pages to close), its cost."""
    version = None if isinstance(found, DriverMissing) else found.version
    return {
        # what --driver-isolation asked (the row's isolation is where the adapter says its pages
        # were: a library that opens pages one way only says so whatever was asked)
        "driver_isolation_asked": isolation_asked,
        "driver_path": path.key,
        "driver_language": path.language,
        "driver_library": path.library.name,
        "driver_version": version,
        "driver_pinned_version": path.version,
        "driver_source": None if isinstance(found, DriverMissing) else found.source,
        "adapter": run.to_json() if run is not None else None,
        "driver_resources": driver_resources(run, found),
        "adapter_cleanup": cleanup.to_json() if cleanup is not None else None,
        "adapter_mode": mode,  # None: no adapter ran
        "adapter_served": _served_facts(runner) if run is not None else None,
    }


def driver_resources(run: AdapterRun | None, found: Any) -> dict[str, Any]:
    """The adapter tree's CPU and peak memory as plain numbers beside an ``unavailable`` map,
    the way the peer's engine ``resource`` record is laid out, in harness scope."""
    record: dict[str, Any] = {
        "schema": DRIVER_RESOURCES_SCHEMA,
        "scope": "harness_scope",
        "process": "adapter",
        "cpu_total_ms": None,
        "peak_memory_bytes": None,
        "wall_ms": None,
        "accounting_backend": None,
        "quality_flags": [],
        "unavailable": {},
    }
    if run is None:
        why = "driver_unavailable" if isinstance(found, DriverMissing) else "adapter_not_started"
        record["unavailable"] = {"cpu": why, "memory": why}
        return record
    record["wall_ms"] = round(run.wall_ns / 1e6, 3)
    record["accounting_backend"] = run.accounting_backend
    for field, measurement, scale in (
        ("cpu_total_ms", run.cpu_ns, 1e-6),
        ("peak_memory_bytes", run.peak_memory_bytes, 1),
    ):
        key = "cpu" if field.startswith("cpu") else "memory"
        if measurement is None:
            record["unavailable"][key] = "no_accounting_group"
        elif measurement.value is None:
            reason = measurement.reason.value if measurement.reason else "unavailable"
            record["unavailable"][key] = reason
        else:
            record[field] = round(measurement.value * scale, 3) if scale != 1 else measurement.value
            if not measurement.is_complete:
                reason = measurement.reason.value if measurement.reason else "partial"
                record["quality_flags"].append(f"{key}_partial:{reason}")
    return record


def _served_facts(runner: AdapterRunner | None) -> dict[str, Any] | None:
    """Which served adapter process answered (long-lived mode): its pid once the attempt is
    over (None: the attempt broke it and it was discarded) and how many this runner started."""
    if not isinstance(runner, LongLivedAdapter):
        return None
    pid = runner.process.pid if runner.process is not None else None
    return {"pid": pid, "starts": runner.starts, "stray_output_restarts": runner.stray_restarts}
