"""The shipped sorting example end to end: every row validates; status and CSV export read it;
its terminal output piped through ``cat`` (a CI log) shows every name whole."""

import csv
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from compare_helpers import sorting_copy
from metewand import canonical
from metewand.runtime import schemas

ROOT = Path(__file__).resolve().parent.parent
METEWAND = Path(sys.executable).parent / "metewand"


def _cli(*args: str) -> str:
    done = subprocess.run([str(METEWAND), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


@dataclass(frozen=True)
class PipedRun:
    run_dir: Path
    output: str  # stdout and stderr as `cat` passed them on


@pytest.fixture(scope="module")
def piped_run(tmp_path_factory: pytest.TempPathFactory) -> PipedRun:
    """The README's command as a CI log sees it: output through a pipe, a narrow COLUMNS; on
    the example with 2 repetitions instead of its 20 and 10 (the rows' shape is the point)."""
    out = tmp_path_factory.mktemp("piped")
    manifest = sorting_copy(tmp_path_factory.mktemp("example"), repetitions=2)
    command = f"{METEWAND} run {manifest} --out {out} --run-id example 2>&1 | cat"
    env = {**os.environ, "COLUMNS": "60"}
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    return PipedRun(out / "example", done.stdout)


@pytest.mark.slow
def test_sorting_example_rows_validate_and_export(piped_run: PipedRun) -> None:
    run_dir = piped_run.run_dir
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

    (transformed,) = {
        receipt(r)["derivation_id"]: receipt(r) for r in rows if r["dataset"] == "nearly-sorted"
    }.values()
    assert transformed["kind"] == "transformed"
    # Its source is a configuration the scaling experiment uses too: built once, shared.
    integers = {receipt(r)["derivation_id"] for r in rows if r["dataset"] == "integers"}
    assert transformed["source_derivation_id"] in integers
    status = _cli("status", str(run_dir))
    assert "complete" in status and "30" in status
    table = list(csv.DictReader(io.StringIO(_cli("export", str(run_dir), "--format", "csv"))))
    assert sorted(r["key"] for r in table) == sorted(r["key"] for r in rows)
    assert {r["status"] for r in table} == {"accepted"}


@pytest.mark.slow
def test_piped_output_shows_every_name_whole(piped_run: PipedRun) -> None:
    """Issue #30: off a terminal no table cell is cut (`c-merges…`), whatever COLUMNS says."""
    rows = [
        canonical.loads(line)
        for line in (piped_run.run_dir / "results.jsonl").read_text().splitlines()
    ]
    # "scaling: distribution=reversed, size=20000": the experiment, then the dataset's parameters
    cases = {
        row["experiment"]
        + ": "
        + ", ".join(f"{k}={v}" for k, v in sorted(row["dataset_parameters"].items()))
        for row in rows
    }
    implementations = {str(row["implementation"]) for row in rows}
    assert len(cases) == 5 and implementations == {
        "c-mergesort",
        "python-builtin",
        "python-heapsort",
    }
    table_lines = [line for line in piped_run.output.splitlines() if line.startswith("│")]
    cells = [[cell.strip() for cell in line.strip("│").split("│")] for line in table_lines]
    case_rows = [row for row in cells if len(row) == 7]  # case, implementation, ok, ... peak RSS
    assert {row[0] for row in case_rows} == cases, piped_run.output[-3000:]
    assert {row[1] for row in case_rows} == implementations
    assert "…" not in piped_run.output
