"""Shipped schemas: discovery, cross-file $ref resolution, and `metewand schema/status/export`."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

from metewand import canonical
from metewand.runtime import schemas
from metewand.runtime.store import RunStore

SCHEMA_DIR = Path(schemas.__file__).resolve().parent.parent / "schemas"


def _metewand(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metewand", *args], capture_output=True, text=True, timeout=60
    )


def test_every_shipped_schema_file_is_listed_and_valid_2020_12() -> None:
    files = sorted(p.name.removesuffix(".schema.json") for p in SCHEMA_DIR.glob("*.schema.json"))
    assert schemas.list_schemas() == files
    for name in files:
        document = schemas.load_schema(name)
        assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        schemas.validator(name).check_schema(document)


def test_v1_schema_rejects_a_v2_payload_and_either_accepts_both() -> None:
    vector = json.loads(
        (
            Path(__file__).parent / "vectors/measurements/033_v2_prepare_and_execute_cgroup2.json"
        ).read_text()
    )["input"]
    assert schemas.is_valid("measurements-v2", vector)
    assert not schemas.is_valid("measurements-v1", vector)
    assert schemas.is_valid("measurements", vector)


def test_schema_command_lists_and_prints() -> None:
    listed = _metewand("schema")
    assert listed.returncode == 0 and "measurements-v2" in listed.stdout.split()
    machine = _metewand("schema", "--json")
    assert canonical.loads(machine.stdout) == schemas.list_schemas()
    pretty = _metewand("schema", "measurements-v1")
    assert json.loads(pretty.stdout) == schemas.load_schema("measurements-v1")
    exact = _metewand("schema", "measurement-form", "--canonical")
    assert exact.stdout.encode() == canonical.dumps(schemas.load_schema("measurement-form")) + b"\n"
    missing = _metewand("schema", "no-such-schema")
    assert missing.returncode == 2 and "unknown schema" in missing.stderr


def _sample_run(tmp_path: Path) -> Path:
    with RunStore.create(tmp_path, "r1", {"planned_keys": ["a/0", "a/1", "b/0"]}) as store:
        store.append(
            {
                "key": "a/0",
                "status": "pass",
                "attempt": 0,
                "cpu": {"status": "partial", "value": 7, "reason": "process_only"},
                "wall": {"status": "complete", "value": 0},
                "flags": ["x"],
            }
        )
        store.append(
            {
                "key": "b/0",
                "status": "fail",
                "attempt": 0,
                "cpu": {"status": "unavailable", "reason": "not_started"},
                "wall": {"status": "complete", "value": 9},
                "flags": [],
            }
        )
        store.set_state("interrupted")
    return tmp_path / "r1"


def test_status_reports_counts_and_unfinished(tmp_path: Path) -> None:
    run_dir = _sample_run(tmp_path)
    done = _metewand("status", str(run_dir), "--json")
    assert done.returncode == 0, done.stderr
    summary = canonical.loads(done.stdout)
    assert summary["state"] == "interrupted"
    assert summary["by_status"] == {"fail": 1, "pass": 1}
    assert summary["unfinished_keys"] == ["a/1"] and summary["planned"] == 3
    human = _metewand("status", str(run_dir))
    assert "2 finished of 3 planned, 1 unfinished" in human.stdout
    assert _metewand("status", str(tmp_path / "nope")).returncode == 2


def test_export_csv_flattens_measurement_forms(tmp_path: Path) -> None:
    run_dir = _sample_run(tmp_path)
    done = _metewand("export", str(run_dir), "--format", "csv")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    header = done.stdout.splitlines()[0].split(",")
    assert header[:3] == ["key", "status", "attempt"]
    assert {"cpu.status", "cpu.value", "cpu.reason", "wall.value"} <= set(header)
    assert rows[0]["cpu.value"] == "7" and rows[0]["cpu.reason"] == "process_only"
    assert rows[1]["cpu.value"] == "" and rows[1]["cpu.reason"] == "not_started"
    assert rows[0]["wall.value"] == "0"  # zero is a value, distinct from the empty cell
    assert rows[0]["flags"] == '["x"]'


def test_export_json_and_jsonl_round_trip(tmp_path: Path) -> None:
    run_dir = _sample_run(tmp_path)
    as_json = _metewand("export", str(run_dir), "--format", "json")
    rows = canonical.loads(as_json.stdout)
    assert [r["key"] for r in rows] == ["a/0", "b/0"]
    out = tmp_path / "rows.jsonl"
    _metewand("export", str(run_dir), "--format", "jsonl", "-o", str(out))
    assert out.read_bytes() == (run_dir / "results.jsonl").read_bytes()
