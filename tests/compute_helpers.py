"""Shared helpers for the compute-suite tests: manifests built around tests/workers."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from metewand.runtime import schemas
from metewand.suites.compute import runner

WORKERS = Path(__file__).parent / "workers"
FAULT = WORKERS / "fault_worker.py"


def python_impl(name: str, mode: str, problem: str = "answer") -> str:
    return f"""
[implementations.{name}]
runner = "python"
entrypoint = "{FAULT}"
args = ["impl"]
env = {{ METEWAND_TEST_MODE = "{mode}" }}
problems = ["{problem}"]
"""


def problem(name: str = "answer", mode: str = "ok") -> str:
    return f"""
[problems.{name}]
evaluator = {{ runner = "python", entrypoint = "{FAULT}", args = ["eval"], env = {{ METEWAND_TEST_MODE = "{mode}" }} }}
result_schema = {{ type = "object", required = ["answer"] }}
metric_schema = {{ type = "object", required = ["correct"] }}
"""


def write_manifest(directory: Path, body: str) -> Path:
    path = directory / "metewand.toml"
    path.write_text('version = 1\nname = "test"\n' + body)
    return path


def run(manifest: Path, tmp: Path, **kwargs: Any) -> runner.RunSummary:
    options = runner.RunOptions(out_dir=str(tmp / "runs"), cache_dir=str(tmp / "cache"), **kwargs)
    summary = runner.run(str(manifest), options)
    for row in summary.rows:
        assert schemas.violations("attempt", row["record"]) == []
        if row["observation"] is not None:
            assert schemas.violations("observation", row["observation"]) == []
        receipt = row["record"]["provenance"]["data"]["context"]["dataset_materialization"]
        assert schemas.violations("dataset-materialization-receipt", receipt) == []
    return summary


def measurements(row: dict[str, Any]) -> dict[str, Any]:
    return row["record"]["provenance"]["data"]["measurements"]


def compile_c(source: Path, out_dir: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler, "a C compiler is needed for the neutrality tests"
    binary = out_dir / source.stem
    subprocess.run([compiler, "-O2", "-o", str(binary), str(source)], check=True)
    return binary


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def by_impl(summary: runner.RunSummary) -> dict[str, dict[str, Any]]:
    return {row["implementation"]: row for row in summary.rows}


__all__ = ["os"]
