"""Checks a run directory against the schemas of the peer benchmark's layouts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from metewand.runtime.schemas import violations


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _ok(schema: str, obj: Any) -> None:
    found = violations(schema, obj)
    assert found == [], (schema, [str(v) for v in found[:5]])


def assert_peer_layouts(run_dir: Path) -> None:
    """Every artifact the peer's readers open, checked against the peer-layout schemas."""
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    _ok("peer_run_manifest-1", manifest)
    _ok("abb_runner_source-1", manifest["runner"]["source"])
    rows = _lines(run_dir / "results.jsonl")
    assert rows
    for row in rows:
        _ok("peer_result_row-1", row)
        if row.get("resource") is not None:
            _ok("abb_engine_resources-1", row["resource"])
            traffic = row["resource"].get("fixture_traffic")
            if traffic is not None:
                _ok("abb_fixture_traffic-1", traffic)
    _ok("peer_scores-1", json.loads((run_dir / "scores.json").read_text()))
    host_summary = json.loads((run_dir / "host_summary.json").read_text())
    _ok("peer_host_summary-1", host_summary)
    for sample in _lines(run_dir / "host_telemetry.jsonl"):
        _ok("abb_host_telemetry-1", sample)
    if (run_dir / "cold_start.jsonl").exists():
        for record in _lines(run_dir / "cold_start.jsonl"):
            _ok("abb_engine_resources-1", record)
    if (run_dir / "resource_summary.json").exists():
        summary = json.loads((run_dir / "resource_summary.json").read_text())
        _ok("abb_resource_summary-1", summary)
    for path in sorted((run_dir / "artifacts").rglob("resource.jsonl")):
        for line in _lines(path):
            _ok("peer_resource_sample-1", line)
