"""The worker-protocol family: a Rust-dialect manifest run end to end on real processes.

The manifest (``repository.RAW_MANIFEST``) runs our raw fixture worker — the behaviour of the
Rust project's raw fixture workers, written by us (``examples/rust-dialect/workers/sum_worker.py``) —
in all three roles: the implementation on the protocol descriptors, the evaluator on
stdin/stdout (``protocol_transport = "stdio"``), a materializer for the generated dataset, and
the Rust fixture's fixed dataset. Each dataset configuration is one vector: both measurement
repetitions accepted, with the answer the Rust fixture expects and zero absolute error. The
contract's reference case, run through the evaluator, is one more.
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from metewand.suites.compute.conformance import repository
from metewand.suites.compute.conformance.core import Outcome, check

FAMILY = "worker protocol"
EXPECTED = {"fixed": ({}, 8), "generated [4, 5]": ({"values": [4, 5]}, 11)}
EXPECTED["generated [1, 2, 3]"] = ({"values": [1, 2, 3]}, 8)


def runs(vectors: Path, worker: Path | None) -> list[Outcome]:
    if worker is None or not worker.is_file():
        detail = f"no raw fixture worker at {worker}: the runs cannot start"
        return [Outcome(FAMILY, name, False, detail) for name in EXPECTED]
    from metewand.suites.compute import runner

    with tempfile.TemporaryDirectory(prefix="mw-rust-run-") as tmp:
        manifest = repository.raw_fixtures(vectors, Path(tmp) / "repo", worker)
        options = runner.RunOptions(
            out_dir=f"{tmp}/runs", cache_dir=f"{tmp}/cache", host_sample_interval_s=None
        )
        summary = runner.run(str(manifest), options)
        out = [
            check(FAMILY, name, partial(_rows, summary.rows, summary.run_dir, params, answer))
            for name, (params, answer) in EXPECTED.items()
        ]
        out.append(check(FAMILY, "the contract's reference case", lambda: _reference(manifest)))
    return out


def _rows(
    rows: list[dict[str, Any]], run_dir: str, params: dict[str, Any], answer: int
) -> str | None:
    mine = [r for r in rows if r["dataset_parameters"] == params]
    if len(mine) != 2:
        return f"{len(mine)} attempts, not 2"
    for row in mine:
        if row["status"] != "accepted":
            return f"{row['code']}: {row['message']}"
        record = row["record"]
        result = row["observation"]
        if row["metrics"] != {"absolute_error": 0} or row["statistics"].get("input_count") is None:
            return f"metrics {row['metrics']}, statistics {row['statistics']}"
        if not record["slot_id"].startswith("mw1-resolved-attempt-slot-") or result is None:
            return "no resolved attempt slot or observation"
        got = _answer(run_dir, result)
        if got != answer:
            return f"answer {got}, not {answer}"
    return None


def _answer(run_dir: str, observation: dict[str, Any]) -> Any:
    from metewand import canonical

    path = Path(run_dir) / observation["result"]["path"] / "result.json"
    return canonical.loads(path.read_bytes())["data"]["answer"]


def _reference(manifest: Path) -> str | None:
    from metewand.suites.compute import definitions_build
    from metewand.suites.compute.manifest_load import load
    from metewand.suites.compute.reference_cases import run_reference_cases

    loaded = load(str(manifest))
    results = run_reference_cases(loaded, definitions_build.build(loaded))
    bad = [r.detail for r in results if not r.ok]
    return None if results and not bad else "; ".join(bad) or "no reference case ran"
