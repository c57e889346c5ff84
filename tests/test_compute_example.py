"""The shipped sorting example end to end: every row validates; status and CSV export read it."""

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

from metewand import canonical
from metewand.runtime import schemas

METEWAND = Path(sys.executable).parent / "metewand"


def _cli(*args: str) -> str:
    done = subprocess.run([str(METEWAND), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_sorting_example_rows_validate_and_export(tmp_path: Path, short_sorting: Path) -> None:
    # the shipped example with 2 repetitions instead of its 8 (the rows' shape is the point)
    _cli("run", str(short_sorting), "--out", str(tmp_path), "--run-id", "example")
    run_dir = tmp_path / "example"
    lines = (run_dir / "results.jsonl").read_bytes().splitlines()
    rows = [canonical.loads(line.decode()) for line in lines]
    # 2 sizes x 2 distributions x 3 implementations x 2 repetitions, plus the nearly sorted
    # dataset transformed from the 20000 uniform integers x 3 implementations x 2 repetitions.
    assert len(rows) == 30 and all(r["status"] == "accepted" for r in rows), [
        r["message"] for r in rows if r["status"] != "accepted"
    ]
    for row in rows:
        record = row["record"]
        assert schemas.violations("attempt", record) == []
        assert schemas.violations("observation", row["observation"]) == []
        receipt = record["provenance"]["data"]["context"]["dataset_materialization"]
        assert schemas.violations("dataset-materialization-receipt", receipt) == []

    def receipt(row: dict) -> dict:
        return row["record"]["provenance"]["data"]["context"]["dataset_materialization"]

    (transformed,) = {receipt(r)["derivation_id"]: receipt(r) for r in rows if r["dataset"] == "nearly-sorted"}.values()  # fmt: skip
    assert transformed["kind"] == "transformed"
    # Its source is a configuration the scaling experiment uses too: built once, shared.
    integers = {receipt(r)["derivation_id"] for r in rows if r["dataset"] == "integers"}
    assert transformed["source_derivation_id"] in integers
    status = _cli("status", str(run_dir))
    assert "complete" in status and "30" in status
    table = list(csv.DictReader(io.StringIO(_cli("export", str(run_dir), "--format", "csv"))))
    assert sorted(r["key"] for r in table) == sorted(r["key"] for r in rows)
    assert {r["status"] for r in table} == {"accepted"}
