"""Interchangeable with the Rust metewand: every vector of its fixtures, family by family.

``tests/vectors/rust`` holds the Rust project's conformance fixtures (copied as data) and the
vectors its tests pin (restated as data); SOURCES.md there names each source and commit. The
runner (``suites.compute.conformance``) is the one ``metewand conformance`` uses; the planted
differences below prove it reports a vector it does not reproduce. The worker-protocol family
runs a Rust-dialect manifest end to end on real processes (our raw worker, the Rust fixture's
fixed dataset and schemas).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from metewand.suites.compute.conformance import repository
from metewand.suites.compute.conformance.core import FAMILIES, Outcome, table
from metewand.suites.compute.conformance.runner import run
from metewand.suites.compute.manifest import ManifestError
from metewand.suites.compute.manifest_load import load
from metewand.suites.compute.plan_expand import build_plan

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "tests" / "vectors" / "rust"
EXAMPLE = ROOT / "examples" / "rust-dialect"
WORKER = EXAMPLE / "workers" / "sum_worker.py"
# Vectors per family: a vector file that silently lost cases would fail here.
COUNTS = {
    "canonical JSON": 22,
    "identity recipes": 33,
    "identities as the planner builds them": 13,
    "seeds": 3,
    "schema validation": 18,
    "local-tree hash": 2,
    "manifest": 29,
    "problem contracts": 20,
    "worker protocol": 4,
    "measurements payload": 11,
}


@pytest.fixture(scope="module")
def outcomes() -> list[Outcome]:
    return run(VECTORS, WORKER)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_vector_of_the_family_agrees(outcomes: list[Outcome], family: str) -> None:
    mine = [o for o in outcomes if o.family == family]
    assert len(mine) == COUNTS[family]
    assert [f"{o.name}: {o.detail}" for o in mine if not o.same] == []


def _planted(tmp_path: Path, rel: str, edit: Any) -> Path:
    """A copy of the vectors with one file edited (``edit(data) -> data``)."""
    copy = tmp_path / "vectors"
    shutil.copytree(VECTORS, copy)
    path = copy / rel
    path.write_text(json.dumps(edit(json.loads(path.read_text("utf-8")))), "utf-8")
    return copy


def _different(vectors: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for family, _, _, diffs in table(run(vectors, runs=False)):
        if diffs:
            found[family] = diffs
    return found


def test_planted_differences_are_reported(tmp_path: Path) -> None:
    def canonical_json(d: Any) -> Any:
        d["accepted"][2]["canonical"] = d["accepted"][2]["canonical"].replace("1000", "1e3")
        d["rejected"][4]["kind"] = "invalid_json"
        return d

    def identity(d: Any) -> Any:
        body = json.loads(d["vectors"]["execution-policy"]["canonical"])
        body["warmup_runs"] = 2
        d["vectors"]["execution-policy"]["canonical"] = json.dumps(body, separators=(",", ":"))
        d["vectors"]["logical-attempt-slot"]["canonical"] = '{"version":1}'
        return d

    def planner(d: Any) -> Any:
        ids = d["cases"][0]["expect"]["ids_of_first_candidate"]
        ids[3] = ids[3][:-1] + ("0" if ids[3][-1] != "0" else "1")
        d["cases"][0]["expect"]["scheduling_seed_value"] += 1
        return d

    found = _different(_planted(tmp_path / "a", "fixtures/canonical-json/v1.json", canonical_json))
    assert len(found["canonical JSON"]) == 2
    found = _different(_planted(tmp_path / "b", "fixtures/identities/v1.json", identity))
    assert len(found["identity recipes"]) == 2, found
    assert any("missing" in line for line in found["identity recipes"])  # the field-set check
    found = _different(_planted(tmp_path / "c", "derived/logical-planning-v1.json", planner))
    assert len(found["identities as the planner builds them"]) == 2


def test_planted_verdicts_are_reported(tmp_path: Path) -> None:
    def manifest(d: Any) -> Any:
        d["cases"][0]["expect"]["counts"]["environments"] = 4
        d["cases"][-1]["expect"]["accepted"] = True
        return d

    def contracts(d: Any) -> Any:
        d["cases"][7]["expect"]["error"] = "parse"
        d["cases"][1]["expect"]["dataset_schemas"] = 1
        return d

    def schemas(d: Any) -> Any:
        d["cases"][0]["instance"] = {"mode": "approximate"}
        return d

    found = _different(_planted(tmp_path / "a", "derived/manifest-parsing-v1.json", manifest))
    assert len(found["manifest"]) == 2
    found = _different(_planted(tmp_path / "b", "derived/problem-contracts-v1.json", contracts))
    assert len(found["problem contracts"]) == 2
    found = _different(_planted(tmp_path / "c", "derived/schema-validation-v1.json", schemas))
    assert len(found["schema validation"]) == 1


def _metewand(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metewand", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_conformance_command_prints_the_table(tmp_path: Path) -> None:
    done = _metewand("conformance", "--no-runs")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "| family | vectors | same | different |"
    assert "| canonical JSON | 22 | 22 | — |" in lines
    assert "| identity recipes | 33 | 33 | — |" in lines
    planted = _planted(tmp_path, "fixtures/seeds/v1.json", _bump_seed)
    done = _metewand("conformance", "--no-runs", "--vectors", str(planted))
    assert done.returncode == 1
    assert "| seeds | 3 | 2 | implementation: third implementation replication" in done.stdout
    done = _metewand("conformance", "--vectors", str(tmp_path / "absent"))
    assert done.returncode == 2 and "no fixtures/ directory" in done.stderr


def _bump_seed(d: Any) -> Any:
    d["implementation"][0]["value"] += 1
    return d


@pytest.fixture()
def complete_repository(tmp_path: Path) -> Path:
    return repository.complete(VECTORS, tmp_path)


def test_the_complete_fixture_is_refused_like_rust(complete_repository: Path) -> None:
    with pytest.raises(ManifestError) as info:
        build_plan(load(str(complete_repository)))
    assert info.value.errors == [
        "metewand.toml: execution_policies.controlled: execution policy 'controlled' requests "
        "1 warm-up runs with worker_reuse = false"
    ]


def test_the_complete_fixture_with_reuse_plans_and_is_refused_to_run(
    complete_repository: Path, tmp_path: Path
) -> None:
    text = complete_repository.read_text().replace("worker_reuse = false", "worker_reuse = true")
    complete_repository.write_text(text)
    done = _metewand("plan", str(complete_repository), "--explain")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "dialect: rust (Rust metewand keys:" in out
    # C = 3 dataset configurations x 2 implementations; I = 2, M = 3, W = 1
    assert "6 candidates, 12 specifications, 36 observation slots, 48 attempt slots" in out
    assert "observation policy final: mw1-observation-policy-7ab610c9" in out  # the Rust vector
    assert "environment 'python' (uv) cannot run here" in out
    runs = tmp_path / "runs"
    done = _metewand("run", str(complete_repository), "--out", str(runs), "--run-id", "x")
    assert done.returncode == 3
    for name in ("'native' (nix)", "'python' (uv)", "'r' (renv)", "'julia' (oci)"):
        assert f"environment {name} cannot run here" in done.stderr
    assert "https://example.org/source.tar.zst is not fetched" in done.stderr
    assert not runs.exists()  # refused before anything is created


def test_both_dialects_say_which_they_are(tmp_path: Path) -> None:
    done = _metewand("plan", "examples/sorting/metewand.toml", "--explain")
    assert done.returncode == 0
    assert "dialect: metewand (metewand keys:" in done.stdout
    assert "runnable here: yes" in done.stdout
    mixed = tmp_path / "metewand.toml"
    mixed.write_text("reference_implementation = 'x'\n" + (EXAMPLE / "metewand.toml").read_text())
    done = _metewand("plan", str(mixed))
    assert done.returncode == 2
    assert "mixes the two manifest dialects" in done.stderr
    assert "reference_implementation" in done.stderr


def test_reference_cases_catch_a_wrong_expectation(tmp_path: Path) -> None:
    copy = tmp_path / "example"
    shutil.copytree(EXAMPLE, copy)
    done = _metewand("reference-cases", str(copy / "metewand.toml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sum case 0: ok" in done.stdout
    (copy / "reference" / "metrics.json").write_text(
        '{"data":{"absolute_error":1},"schema":"schemas/metrics.json","schema_version":1}\n'
    )
    done = _metewand("reference-cases", str(copy / "metewand.toml"))
    assert done.returncode == 1
    assert '"absolute_error":0' in done.stdout and "FAILED" in done.stdout


def test_legacy_rows_read_as_the_older_recipe() -> None:
    import random

    from metewand.suites.compute.records import identity_recipe
    from synthetic_runs import compute_row

    row = compute_row(random.Random(3), "python", 0)
    assert identity_recipe(row) == 2
    del row["record"]["provenance"]["identity_recipe"]  # as every row written before
    assert identity_recipe(row) == 1


@pytest.mark.skipif(
    shutil.which("Rscript") is None and os.environ.get("CI") != "true",
    reason="no Rscript (make install puts r-base-core and r-cran-jsonlite in; CI must have it)",
)
def test_the_r_runner_runs_an_r_worker(tmp_path: Path) -> None:
    done = _metewand(
        "run",
        "examples/rust-dialect/metewand-r.toml",
        "--out",
        str(tmp_path / "runs"),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--run-id",
        "r",
        "--no-progress",
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    rows = [
        json.loads(line) for line in (tmp_path / "runs/r/results.jsonl").read_text().splitlines()
    ]
    r_rows = [row for row in rows if row["implementation"] == "sum-r"]
    assert len(r_rows) == 3 and all(row["status"] == "accepted" for row in r_rows)
    assert all(row["statistics"]["language"] == "R" for row in r_rows)
    assert all(row["metrics"] == {"absolute_error": 0} for row in r_rows)
    worker = r_rows[0]["record"]["provenance"]["data"]["context"]["worker"]
    assert worker["sdk"] is None and worker["capabilities"] == ["one_shot"]


def test_a_run_of_the_older_recipe_reads_but_is_not_resumed(tmp_path: Path) -> None:
    """A run planned before the Rust field sets has other attempt keys: resuming it would run
    every attempt again beside the old rows, so it is refused (its rows stay readable)."""
    runs = tmp_path / "runs"
    args = ("--out", str(runs), "--cache-dir", str(tmp_path / "cache"), "--no-progress")
    done = _metewand("run", "examples/rust-dialect/metewand.toml", "--run-id", "old", *args)
    assert done.returncode == 0, done.stderr
    manifest_path = runs / "old" / "run_manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["data"]["versions"]["identity_recipe"] == 2
    del manifest["data"]["versions"]["identity_recipe"]  # as every run written before
    manifest_path.write_text(json.dumps(manifest))
    done = _metewand("run", "--resume", "old", *args)
    assert done.returncode == 2
    assert "planned with identity recipe 1" in done.stderr
    assert "cannot be resumed" in done.stderr
    done = _metewand("status", str(runs / "old"))
    assert done.returncode == 0, done.stderr  # still readable
