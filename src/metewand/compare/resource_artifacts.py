"""Run-end resource artifacts, regenerated from the run directory alone.

``finalize_resource_artifacts(run_dir)`` reads ``run_manifest.json``, ``results.jsonl``,
``host_summary.json`` and ``cold_start.jsonl`` (and the profiler-off baseline run named by
``--resource-calibration-baseline``), then writes ``resource_summary.json`` and
``resource-card.md``. Running it again on the same directory gives the same bytes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from metewand.compare import resource_card
from metewand.compare.calibration import CalibrationThresholds, calibrate
from metewand.compare.resource_summary import summarize
from metewand.compare.run_facts import read_facts
from metewand.compare.stats import DEFAULT_BOOTSTRAP_SEED, DEFAULT_RESAMPLES
from metewand.runtime import rundir
from metewand.runtime.rundir import read_json, write_json_atomic, write_text_atomic
from metewand.runtime.store import RunView

HOST_SUMMARY = rundir.HOST_SUMMARY
HOST_TELEMETRY = rundir.HOST_TELEMETRY
COLD_START = rundir.COLD_START
RESOURCE_SUMMARY = rundir.RESOURCE_SUMMARY
RESOURCE_CARD = rundir.RESOURCE_CARD


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Whole rows by ``rundir.read_jsonl``'s rule (a torn final line ignored)."""
    return rundir.read_jsonl(path).rows


def _baseline_dir(run_dir: Path, manifest: dict[str, Any], given: Path | None) -> Path | None:
    if given is not None:
        return Path(given)
    named = read_facts(manifest).get("calibration_baseline")
    if not named:
        return None
    return rundir.recorded_run_dir(run_dir, str(named))


def calibration_for(
    run_dir: Path,
    baseline_run_dir: Path | None = None,
    thresholds: CalibrationThresholds | None = None,
) -> dict[str, Any] | None:
    view = RunView(run_dir)
    manifest = view.manifest
    baseline = _baseline_dir(run_dir, manifest, baseline_run_dir)
    if baseline is None:
        return None
    base_view = RunView(baseline)
    result = calibrate(base_view.manifest, base_view.rows(), manifest, view.rows(), thresholds)
    result["baseline_run_dir"] = os.fspath(baseline)
    return result


def finalize_resource_artifacts(
    run_dir: Path | str,
    baseline_run_dir: Path | str | None = None,
    reference_engine: str | None = None,
    thresholds: CalibrationThresholds | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    bootstrap_seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Write ``resource_summary.json`` and ``resource-card.md``; return the summary."""
    run_dir = Path(run_dir)
    view = RunView(run_dir)
    baseline = Path(baseline_run_dir) if baseline_run_dir is not None else None
    summary = summarize(
        view.manifest,
        view.rows(),
        host_summary=read_json(run_dir / HOST_SUMMARY),
        calibration=calibration_for(run_dir, baseline, thresholds),
        cold_start_rows=read_jsonl(run_dir / COLD_START),
        reference_engine=reference_engine,
        resamples=resamples,
        bootstrap_seed=bootstrap_seed,
    )
    write_json_atomic(run_dir / RESOURCE_SUMMARY, summary)
    write_text_atomic(run_dir / RESOURCE_CARD, resource_card.render(summary))
    return summary
