"""The peer benchmark's own artifacts (../shared/reference/lexbench-run-sample) validate against
the schemas metewand ships for the peer's layouts; a real profiled run of ours is checked against
the same schemas in test_browser_run_profile.py (``assert_peer_layouts``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metewand.runtime.schemas import violations
from peer_layouts import assert_peer_layouts

SAMPLE = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference" / "lexbench-run-sample"


@pytest.mark.parametrize("name", ["functional", "profiled_off_baseline", "profiled_on"])
def test_the_peers_own_artifacts_validate(name: str) -> None:
    run_dir = SAMPLE / name
    if not run_dir.is_dir():
        pytest.skip(f"{run_dir} not present")
    assert_peer_layouts(run_dir)


def test_peer_schemas_reject_our_form_objects() -> None:
    """A peer schema id means the peer's layout: a measurement form where the peer writes a
    plain number is refused."""
    row = json.loads((SAMPLE / "profiled_on" / "results.jsonl").read_text().splitlines()[0])
    resource = dict(row["resource"], cpu_total_ms={"status": "complete", "value": 130})
    assert violations("abb_engine_resources-1", resource) != []
