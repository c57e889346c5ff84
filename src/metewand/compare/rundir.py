"""Read a run directory as the reports see it: manifest, result rows and optional side files.

Reports are regenerated from these files alone, so this reader is the only way into a run for
``compare``. A torn last line of a JSON-Lines file (a run killed mid-write) is ignored, as the
run store does on read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metewand import canonical
from metewand.errors import InvalidInput
from metewand.runtime.store import StoreError, read_results

MANIFEST = "run_manifest.json"
RESULTS = "results.jsonl"
HOST_TELEMETRY = "host_telemetry.jsonl"
HOST_SUMMARY = "host_summary.json"
COLD_START = "cold_start.jsonl"
RESOURCE_SUMMARY = "resource_summary.json"


class RunDirError(InvalidInput, ValueError):
    """The directory is not a readable run (missing manifest or results)."""


@dataclass
class RunData:
    path: Path
    manifest: dict[str, Any]  # the run settings: run_manifest.json's ``data`` plus run_id, state
    rows: list[dict[str, Any]]
    host_telemetry: list[dict[str, Any]] = field(default_factory=list)
    host_summary: dict[str, Any] | None = None
    cold_start: list[dict[str, Any]] = field(default_factory=list)
    resource_summary: dict[str, Any] | None = None
    torn_lines: int = 0

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


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Rows of a JSON-Lines file and the number of torn (unparseable final) lines skipped."""
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    lines = data.split(b"\n")
    rows: list[dict[str, Any]] = []
    torn = 0
    last = len(lines) - 1
    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            obj = canonical.loads(raw)
        except ValueError:
            if index == last:  # a kill -9 mid-write leaves only the tail torn
                torn += 1
                continue
            raise RunDirError(f"{path}:{index + 1}: not a JSON line") from None
        if isinstance(obj, dict):
            rows.append(obj)
    return rows, torn


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        obj = canonical.loads(path.read_bytes())
    except (ValueError, RecursionError, OSError) as exc:
        raise RunDirError(f"{path}: not valid JSON ({str(exc)[:120]})") from None
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


def load_run(path: str | Path) -> RunData:
    run_path = Path(path)
    if not (run_path / RESULTS).exists():
        raise RunDirError(f"{run_path}: no {RESULTS} (is this a run directory?)")
    manifest = _settings(_read_json(run_path / MANIFEST))
    try:
        read = read_results(run_path / RESULTS)  # the store's one reading rule
    except StoreError as exc:
        raise RunDirError(str(exc)) from None
    rows, torn = read.rows, int(read.torn_tail_bytes > 0)
    telemetry, _ = read_jsonl(run_path / HOST_TELEMETRY)
    cold, _ = read_jsonl(run_path / COLD_START)
    return RunData(
        path=run_path,
        manifest=manifest,
        rows=rows,
        host_telemetry=telemetry,
        host_summary=_read_json(run_path / HOST_SUMMARY),
        cold_start=cold,
        resource_summary=_read_json(run_path / RESOURCE_SUMMARY),
        torn_lines=torn,
    )
