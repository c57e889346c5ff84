"""Read a run directory as the reports see it: manifest, result rows and optional side files.

Reports are regenerated from these files alone, so this reader is the only way into a run for
``compare``. Names and the reading rule are ``runtime.rundir``'s: a torn last line of a JSON-Lines
file (a run killed mid-write) is ignored and counted in ``torn_tails``; any other damaged line is a
``RunDirError`` naming the file and line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metewand.runtime import rundir
from metewand.runtime.rundir import RunDirError as RunDirError
from metewand.runtime.store import read_results


@dataclass
class RunData:
    path: Path
    manifest: dict[str, Any]  # the run settings: run_manifest.json's ``data`` plus run_id, state
    rows: list[dict[str, Any]]  # every row but an interleaved calibration's unprofiled twins
    host_telemetry: list[dict[str, Any]] = field(default_factory=list)
    host_summary: dict[str, Any] | None = None
    cold_start: list[dict[str, Any]] = field(default_factory=list)
    resource_summary: dict[str, Any] | None = None
    torn_lines: int = 0  # results.jsonl's torn tail (0 or 1 line)
    torn_tails: dict[str, int] = field(default_factory=dict)  # file name -> torn tail bytes
    # ``--resource-calibration interleaved``: the unprofiled twins, read by the calibration only
    # (never by scores, resource medians or the intersection)
    calibration_twins: list[dict[str, Any]] = field(default_factory=list)
    # ``--executor dask``: workers, refusals and per-host telemetry; the tries lost with a worker
    dask_hosts: dict[str, Any] | None = None
    lost_tries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """``browser`` when rows name engines and tasks, else ``compute``."""
        suite = self.manifest.get("suite")
        if isinstance(suite, str) and suite in ("browser", "compute"):
            return suite
        if self.rows and all("engine" in r and "task_id" in r for r in self.rows[:50]):
            return "browser"
        return "compute"

    @property
    def run_id(self) -> str:
        rid = self.manifest.get("run_id")
        return str(rid) if rid is not None else self.path.name


def _read_json(path: Path) -> dict[str, Any] | None:
    obj = rundir.read_json(path)
    return obj if isinstance(obj, dict) else None


def _settings(raw: dict[str, Any] | None) -> dict[str, Any]:
    """The store's manifest keeps run settings under ``data``; lift them with run_id and state."""
    if raw is None:
        return {}
    data = raw.get("data")
    settings = dict(data) if isinstance(data, dict) else dict(raw)
    for key in ("run_id", "state"):
        if key in raw:
            settings[key] = raw[key]
    # the peer benchmark's fields a browser run writes beside the store's envelope
    if isinstance(data, dict):
        settings["peer_manifest"] = {k: v for k, v in raw.items() if k != "data"}
    for key in ("bench_id", "bench_version", "harness_version", "score_eligible"):
        if key in raw and key not in settings:
            settings[key] = raw[key]
    return settings


# The settings reports read, with the JSON type each must have when present (a list's items:
# strings). A hand-edited or damaged manifest is named here, not met as a traceback mid-report.
SETTING_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "suite": (str,),
    "benchmark": (str,),
    "seed": (str, int),
    "k": (int,),
    "jobs": (int,),
    "planned_attempts": (int,),
    "selected_engines": (list,),
    "planned_keys": (list,),
    "engines": (dict,),
    "tasks": (dict,),
    "host": (dict,),
    "versions": (dict,),
    "resource_profile": (str, dict),
    "score_mode": (str,),
    "reference_implementation": (str,),
    "phase_marks": (bool,),
}
STRING_LISTS = ("selected_engines", "planned_keys")


def _check_settings(path: Path, settings: dict[str, Any]) -> None:
    for key, types in SETTING_TYPES.items():
        value = settings.get(key)
        if value is None:
            continue
        wrong = not isinstance(value, types) or (
            isinstance(value, bool) and bool not in types  # True is an int to Python
        )
        if not wrong and key in STRING_LISTS:
            wrong = not all(isinstance(item, str) for item in value)
        if wrong:
            want = (
                "a list of strings"
                if key in STRING_LISTS
                else " or ".join(
                    {
                        str: "a string",
                        int: "an integer",
                        list: "a list",
                        dict: "an object",
                        bool: "true or false",
                    }[t]
                    for t in types
                )
            )
            raise RunDirError(f"{path}: '{key}' must be {want}, not {json.dumps(value)[:80]}")


def load_run(path: str | Path) -> RunData:
    run_path = Path(path)
    if not (run_path / rundir.RESULTS).exists():
        raise RunDirError(f"{run_path}: no {rundir.RESULTS} (is this a run directory?)")
    raw = rundir.read_json(run_path / rundir.MANIFEST)  # None: a peer's run may have none
    if raw is not None and not (isinstance(raw, dict) and isinstance(raw.get("data", {}), dict)):
        raise RunDirError(
            f"{run_path / rundir.MANIFEST}: not a run manifest (an object whose "
            "'data', if any, is an object)"
        )
    manifest = _settings(raw)
    _check_settings(run_path / rundir.MANIFEST, manifest)
    read = read_results(run_path / rundir.RESULTS)  # raises RunDirError naming file and line
    telemetry = rundir.read_jsonl(run_path / rundir.HOST_TELEMETRY)
    cold = rundir.read_jsonl(run_path / rundir.COLD_START)
    lost = rundir.read_jsonl(run_path / rundir.LOST_TRIES)
    torn = {
        name: part.torn_tail_bytes
        for name, part in (
            (rundir.RESULTS, read),
            (rundir.HOST_TELEMETRY, telemetry),
            (rundir.COLD_START, cold),
            (rundir.LOST_TRIES, lost),
        )
        if part.torn_tail_bytes
    }
    twins = [row for row in read.rows if row.get("calibration_twin") is True]
    return RunData(
        path=run_path,
        manifest=manifest,
        rows=[row for row in read.rows if row.get("calibration_twin") is not True],
        host_telemetry=telemetry.rows,
        host_summary=_read_json(run_path / rundir.HOST_SUMMARY),
        cold_start=cold.rows,
        resource_summary=_read_json(run_path / rundir.RESOURCE_SUMMARY),
        torn_lines=int(read.torn_tail_bytes > 0),
        torn_tails=torn,
        calibration_twins=twins,
        dask_hosts=_read_json(run_path / rundir.DASK_HOSTS),
        lost_tries=lost.rows,
    )
