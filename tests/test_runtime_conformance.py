"""Conformance vectors: the Python parser and the JSON Schema must reach the same verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metewand import canonical
from metewand.measure import forms
from metewand.runtime import schemas
from metewand.suites.compute.payload import ExecutionMeasurements, PayloadError
from metewand.suites.compute.tree_memory import TreeMemory

VECTOR_DIR = Path(__file__).parent / "vectors" / "measurements"
VECTORS = sorted(VECTOR_DIR.glob("*.json"))
DEFAULT_SCHEMA = {
    "form": "measurement-form",
    "canonical_form": "measurement-form",
    "payload": "measurements",
    "tree_memory": "tree-memory",
}


def _load(path: Path) -> dict[str, Any]:
    vector = json.loads(path.read_text("utf-8"))
    assert set(vector) <= {
        "description",
        "kind",
        "input",
        "valid",
        "schema",
        "error_path",
        "canonical",
    }
    return vector


def _python_verdict(kind: str, value: Any) -> tuple[bool, str | None]:
    """(accepted, error path) from the Python parser."""
    try:
        if kind == "payload":
            ExecutionMeasurements.from_json(value)
        elif kind == "tree_memory":
            TreeMemory.from_json(value)
        else:
            forms.from_json(value)
    except PayloadError as exc:
        return False, exc.path
    except forms.FormError:
        return False, None
    return True, None


def test_enough_vectors_cover_the_contract() -> None:
    vectors = [_load(p) for p in VECTORS]
    assert len(vectors) >= 40
    kinds = {v["kind"] for v in vectors}
    assert kinds == {"form", "canonical_form", "payload", "tree_memory"}
    payloads = [v["input"] for v in vectors if v["kind"] == "payload" and v["valid"]]
    assert {p["version"] for p in payloads} == {1, 2}
    assert {p["cpu_time_scope"] for p in payloads} == {
        "worker_lifetime_through_execute",
        "prepare_and_execute",
        "execute_only",
    }
    statuses = {v["input"]["status"] for v in vectors if v["kind"] == "form" and v["valid"]}
    assert statuses == {"complete", "partial", "unavailable"}
    assert sum(1 for v in vectors if not v["valid"]) >= 20


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_vector(path: Path) -> None:
    vector = _load(path)
    kind, value, expected = vector["kind"], vector["input"], vector["valid"]
    schema_name = vector.get("schema", DEFAULT_SCHEMA[kind])

    accepted, error_path = _python_verdict(kind, value)
    schema_ok = schemas.is_valid(schema_name, value)
    assert accepted is expected, f"python parser: {vector['description']} ({error_path})"
    assert schema_ok is expected, (
        f"schema {schema_name}: {vector['description']}: "
        f"{[str(v) for v in schemas.violations(schema_name, value)]}"
    )
    if "error_path" in vector:
        assert error_path == vector["error_path"]
    if kind == "canonical_form":
        parsed = forms.from_json(value)
        assert canonical.dumps(parsed.to_json()) == vector["canonical"].encode("utf-8")
    if kind == "payload" and expected:
        parsed_payload = ExecutionMeasurements.from_json(value)
        assert parsed_payload.to_json() == value  # round trip keeps every key and value
        again = ExecutionMeasurements.loads(parsed_payload.canonical_bytes())
        assert again == parsed_payload
    if kind == "tree_memory" and expected:
        assert TreeMemory.from_json(value).to_json() == value
