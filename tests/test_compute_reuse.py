"""Warm-ups and worker reuse: roles, one process across a unit, cold timing refuses reuse."""

from pathlib import Path

import pytest

from compute_helpers import alive, measurements, problem, python_impl, run, write_manifest
from metewand import canonical
from metewand.suites.compute.manifest import ManifestError
from metewand.suites.compute.manifest_load import load
from metewand.suites.compute.plan_expand import build_plan

UNIT = """
[datasets.fixed]
kind = "unit"

[execution_policies.warm]
timing_scope = "{scope}"
worker_reuse = {reuse}
warmup_runs = {warmups}

[[experiments]]
name = "e"
problem = "answer"
datasets = ["fixed"]
implementations = ["a"]
repetitions = 2
execution_policy = "warm"
"""


def _manifest(tmp_path: Path, scope: str, reuse: bool, warmups: int) -> Path:
    policy = UNIT.format(scope=scope, reuse=str(reuse).lower(), warmups=warmups)
    return write_manifest(tmp_path, problem() + python_impl("a", "ok") + policy)


def _context(row: dict) -> dict:
    return row["record"]["provenance"]["data"]["context"]


def test_warmups_are_published_with_role_warmup_on_one_reused_worker(tmp_path: Path) -> None:
    summary = run(_manifest(tmp_path, "prepare_and_execute", True, 2), tmp_path)
    rows = sorted(summary.rows, key=lambda r: r["key"])
    assert sorted(r["role"] for r in rows) == ["measured", "measured", "warmup", "warmup"]
    assert all(r["status"] == "accepted" for r in rows)
    # warm-ups reach results.jsonl like any attempt (they are not dropped before publication)
    lines = (Path(summary.run_dir) / "results.jsonl").read_bytes().splitlines()
    published = [canonical.loads(line.decode()) for line in lines]
    assert sorted(r["role"] for r in published) == sorted(r["role"] for r in rows)
    pids = {_context(r)["worker"]["pid"] for r in rows}
    assert len(pids) == 1  # one implementation process served the whole unit
    reused = sorted(_context(r)["worker"]["reused"] for r in rows)
    assert reused == [False, True, True, True]
    # the startup belongs to the worker: measured once and carried by every attempt it served
    startups = {canonical.dumps(measurements(r)["worker_startup_time_ns"]) for r in rows}
    assert len(startups) == 1
    # each attempt has its own (fresh) evaluator, and none outlives the run
    evaluator_pids = {_context(r)["evaluator"]["pid"] for r in rows}
    assert len(evaluator_pids) == 4
    assert not any(alive(pid) for pid in pids | evaluator_pids)


def test_without_reuse_every_attempt_gets_a_fresh_worker(tmp_path: Path) -> None:
    summary = run(_manifest(tmp_path, "prepare_and_execute", False, 0), tmp_path)
    rows = summary.rows
    assert [r["role"] for r in rows] == ["measured", "measured"]
    pids = [_context(r)["worker"]["pid"] for r in rows]
    assert len(set(pids)) == 2
    assert all(_context(r)["worker"]["reused"] is False for r in rows)
    assert not any(alive(pid) for pid in pids)


@pytest.mark.parametrize(("reuse", "warmups"), [(True, 0), (True, 1)])
def test_cold_end_to_end_with_reuse_is_rejected(tmp_path: Path, reuse: bool, warmups: int) -> None:
    manifest = _manifest(tmp_path, "cold_end_to_end", reuse, warmups)
    with pytest.raises(ManifestError) as info:
        build_plan(load(str(manifest)))
    text = "\n".join(info.value.errors)
    assert (
        "metewand.toml: execution_policies.warm.timing_scope: cold_end_to_end needs a fresh worker"
        in text
    )


def test_warmups_without_reuse_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as info:
        build_plan(load(str(_manifest(tmp_path, "prepare_and_execute", False, 1))))
    assert any("warmup_runs: warm-up runs need worker_reuse = true" in e for e in info.value.errors)
