"""The compute report read against rows a REAL compute run wrote (fault workers), and the
synthetic generator pinned to that same row shape."""

from __future__ import annotations

import copy
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import synthetic_runs as synthetic
from compute_helpers import problem, python_impl, run, write_manifest
from metewand import canonical
from metewand.compare import compute_rows
from metewand.compare.fmt import ns_text
from metewand.compare.generate import generate

POLICY = """
[datasets.fixed]
kind = "unit"

[execution_policies.warm]
worker_reuse = true
warmup_runs = 1

[[experiments]]
name = "e"
problem = "answer"
datasets = ["fixed"]
implementations = ["good", "bad"]
repetitions = 3
execution_policy = "warm"
"""


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("compute_report")
    body = problem() + python_impl("good", "ok") + python_impl("bad", "crash") + POLICY
    summary = run(write_manifest(tmp, body), tmp)
    return Path(summary.run_dir), summary.rows


def _section(html: str, ident: str) -> str:
    match = re.search(rf'<section id="{ident}">(.*?)</section>', html, re.S)
    assert match, ident
    return match.group(1)


def test_scores_match_the_rows(real_run: tuple[Path, list[dict[str, Any]]]) -> None:
    run_dir, rows = real_run
    assert {r["role"] for r in rows} == {"measured", "warmup"}
    assert {r["status"] for r in rows} == {"accepted", "failed"}
    scores = canonical.loads(generate(run_dir, ["json"])["json"].read_bytes())
    for impl in ("good", "bad"):
        mine = [r for r in rows if r["implementation"] == impl]
        measured = [r for r in mine if r["role"] == "measured"]
        block = scores["by_implementation"][impl]
        assert block["total"] == len(measured) == 3
        assert block["accepted"] == sum(r["status"] == "accepted" for r in measured)
        assert block["warmups"]["total"] == sum(r["role"] == "warmup" for r in mine) == 1
        failed_codes = [r["code"] for r in measured if r["status"] != "accepted"]
        assert sum(block["diagnostics"].values()) == len(failed_codes)
    assert scores["by_implementation"]["good"]["accepted"] == 3
    assert scores["by_implementation"]["bad"]["accepted"] == 0
    assert scores["warmup_rows"] == 2


def test_phase_median_and_failed_list_match_the_rows(
    real_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    run_dir, rows = real_run
    html = generate(run_dir, ["html"])["html"].read_text()
    accepted = [r for r in rows if r["role"] == "measured" and r["status"] == "accepted"]
    values = [
        r["observation"]["provenance"]["data"]["measurements"]["execute_request_time_ns"]["value"]
        for r in accepted
        if r["implementation"] == "good"
    ]
    expected = ns_text(float(np.median(values)))
    phases = _section(html, "phases")
    # the median, then its CI, or with fewer than 5 launches the reason there is none
    n = len(values)
    after = "[" if n >= 5 else f"(n={n} &lt; 5: no CI)"
    assert (
        f'<td>good</td><td>execute_request_time_ns</td><td class="num">{n}</td>'
        f"<td>{expected} {after}" in phases
    )
    assert "not_profiled" not in phases
    failed = _section(html, "excluded")
    for row in rows:
        assert (row["key"] in failed) == (row["status"] != "accepted"), row["key"]


def test_one_reader_finds_measurements_of_accepted_and_failed_rows(
    real_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, rows = real_run
    for row in rows:
        found = compute_rows.measurements_of(row)
        assert found is not None and found.get("version") == 2
        if row["status"] == "accepted":
            assert found is row["observation"]["provenance"]["data"]["measurements"]
        else:
            diag = row["record"]["outcome"]["diagnostic"]
            assert found is diag["details"]["measurements"]
            assert compute_rows.diagnostic_of(row) == {
                "code": row["code"],
                "message": row["message"],
            }


def _shape(value: Any, depth: int) -> Any:
    """Nested key structure down to ``depth`` levels (values dropped)."""
    if isinstance(value, dict) and depth > 0:
        return {k: _shape(v, depth - 1) for k, v in value.items()}
    return type(value).__name__ if value is not None else "null"


FREE_FORM = ("dataset_parameters", "problem_parameters", "implementation_parameters", "metrics")


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in copy.deepcopy(row).items() if k not in FREE_FORM + ("statistics",)}
    for part in (out.get("record"), out.get("observation")):
        if isinstance(part, dict):
            data = part["provenance"]["data"]
            data["context"] = sorted(data["context"])
            data["measurements"] = sorted(
                k for k in data["measurements"] if k in compute_rows_fields()
            )
    if isinstance(out.get("observation"), dict):
        out["observation"]["timing"] = "timing"
    diag = out["record"]["outcome"].get("diagnostic")
    if isinstance(diag, dict):
        diag["details"]["measurements"] = "payload"
    return out


def compute_rows_fields() -> tuple[str, ...]:
    from metewand.compare.columns import COMPUTE_PHASES

    return (*COMPUTE_PHASES, "version")


def test_synthetic_rows_have_the_real_shape(real_run: tuple[Path, list[dict[str, Any]]]) -> None:
    _, rows = real_run
    real = {r["status"]: r for r in rows}
    rng = random.Random(1)
    fake = {}
    while len(fake) < 2:
        row = synthetic.compute_row(rng, "python", len(fake))
        fake.setdefault(row["status"], row)
    for status in ("accepted", "failed"):
        assert _shape(_comparable(fake[status]), 8) == _shape(_comparable(real[status]), 8)
