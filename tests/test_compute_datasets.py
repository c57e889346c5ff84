"""Derived datasets: a transformation of a generated dataset (its own derivation identity, cached
and reused) and a local source acquired and checked by sha256; a materializer whose output fails
validation keeps its measured request duration. Real workers, real files, the real CLI."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compute_helpers import WORKERS, measurements, problem, python_impl, run, write_manifest

DATASETS = WORKERS / "dataset_worker.py"
METEWAND = Path(sys.executable).parent / "metewand"


def _receipt(row: dict) -> dict:
    return row["record"]["provenance"]["data"]["context"]["dataset_materialization"]


def _experiment(dataset: str) -> str:
    return f"""
[[experiments]]
name = "derived"
problem = "answer"
datasets = ["{dataset}"]
implementations = ["a"]
"""


def _transformed_manifest(
    tmp_path: Path, gen_mode: str = "ok", xform_mode: str = "ok", dataset: str = "scaled"
) -> Path:
    return write_manifest(
        tmp_path,
        f"""
[datasets.base]
kind = "generated"
materializer = {{ runner = "python", entrypoint = "{DATASETS}", args = ["gen"], env = {{ METEWAND_TEST_MODE = "{gen_mode}" }} }}
parameter_defaults = {{ size = 3 }}
parameter_schema = {{ type = "object", properties = {{ size = {{ type = "integer" }} }} }}

[datasets.scaled]
kind = "transformed"
source = "base"
source_parameters = {{ size = 4 }}
transformer = {{ runner = "python", entrypoint = "{DATASETS}", args = ["xform"], env = {{ METEWAND_TEST_MODE = "{xform_mode}" }} }}
parameter_defaults = {{ factor = 10 }}
"""
        + problem()
        + python_impl("a", "ok")
        + _experiment(dataset),
    )


def test_a_transformation_is_derived_cached_and_reused(tmp_path: Path) -> None:
    manifest = _transformed_manifest(tmp_path)
    first = run(manifest, tmp_path, run_id="one")
    (row,) = first.rows
    assert row["status"] == "accepted", row["message"]
    receipt = _receipt(row)
    assert receipt["kind"] == "transformed" and receipt["origin"] == "constructed"
    assert receipt["source_derivation_id"] != receipt["derivation_id"]
    assert measurements(row)["materialization_time_ns"]["status"] == "complete"
    data = Path(receipt["path"])
    seed_digit = int((data / "values.txt").read_text().split()[0]) // 10 - 1
    expected = [(seed_digit + v) * 10 for v in (1, 2, 3, 4)]  # the source had size 4, sorted
    assert [int(v) for v in (data / "values.txt").read_text().split()] == expected
    source_dir = Path(tmp_path / "cache" / "datasets" / receipt["source_derivation_id"] / "data")
    assert len((source_dir / "values.txt").read_text().split()) == 4

    second = run(manifest, tmp_path, run_id="two")
    (again,) = second.rows
    reused = _receipt(again)
    assert reused["origin"] == "cache_hit"
    assert reused["derivation_id"] == receipt["derivation_id"]
    assert reused["materialization_time_ns"] == receipt["materialization_time_ns"]
    assert measurements(again)["materialization_time_ns"] == {
        "status": "unavailable",
        "reason": "cache_hit",
    }


def test_other_source_parameters_are_another_derivation(tmp_path: Path) -> None:
    from metewand.suites.compute.manifest_load import load
    from metewand.suites.compute.plan_expand import build_plan

    manifest = _transformed_manifest(tmp_path)
    first = build_plan(load(str(manifest))).dataset_configs()[0]
    manifest.write_text(manifest.read_text().replace("size = 4", "size = 5"))
    second = build_plan(load(str(manifest))).dataset_configs()[0]
    assert first.identity != second.identity
    assert first.source is not None and second.source is not None
    assert first.source.identity != second.source.identity


def test_a_transformer_that_changes_its_source_is_refused(tmp_path: Path) -> None:
    summary = run(_transformed_manifest(tmp_path, xform_mode="modify_source"), tmp_path)
    (row,) = summary.rows
    assert row["status"] == "failed" and row["code"] == "setup_failure"
    assert "modified its source dataset base" in row["message"]


def test_invalid_materializer_output_keeps_the_measured_request(tmp_path: Path) -> None:
    summary = run(_transformed_manifest(tmp_path, gen_mode="invalid"), tmp_path)
    (row,) = summary.rows
    assert row["code"] == "setup_failure"
    assert "never-written.json was not written" in row["message"]
    # The transformed dataset never ran: its own request is not_started; the failed generator's
    # request ran through its response, so the base dataset's failure is not "not_started".
    assert measurements(row)["materialization_time_ns"]["reason"] == "not_started"
    base = _transformed_manifest(tmp_path, gen_mode="invalid", dataset="base")
    (base_row,) = run(base, tmp_path, run_id="base").rows
    assert base_row["code"] == "setup_failure"
    assert measurements(base_row)["materialization_time_ns"]["status"] == "complete"


def _acquired_manifest(tmp_path: Path, source: str, sha256: str) -> Path:
    return write_manifest(
        tmp_path,
        f"""
[datasets.words]
kind = "acquired"
path = "{source}"
sha256 = "{sha256}"
"""
        + problem()
        + python_impl("a", "ok")
        + _experiment("words"),
    )


def test_an_acquired_file_with_a_wrong_sha256_is_refused(tmp_path: Path) -> None:
    (tmp_path / "words.txt").write_text("alpha\nbeta\n")
    wrong = hashlib.sha256(b"something else").hexdigest()
    manifest = _acquired_manifest(tmp_path, "words.txt", wrong)
    for command in (["plan"], ["run", "--out", str(tmp_path / "runs")]):
        done = subprocess.run(
            [str(METEWAND), *command, str(manifest)],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,
            env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
        )
        assert done.returncode == 2, done.stderr
        assert "metewand.toml: datasets.words.sha256: words.txt has sha256" in done.stderr
        assert f"not the declared {wrong}" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_an_acquired_source_is_copied_verified_and_reused(tmp_path: Path) -> None:
    source = tmp_path / "corpus"
    (source / "sub").mkdir(parents=True)
    (source / "a.txt").write_text("one\n")
    (source / "sub" / "b.txt").write_text("two\n")
    from metewand.suites.compute.validate import tree_sha256

    manifest = _acquired_manifest(tmp_path, "corpus", tree_sha256(str(source)))
    (row,) = run(manifest, tmp_path, run_id="one").rows
    assert row["status"] == "accepted", row["message"]
    receipt = _receipt(row)
    assert receipt["kind"] == "acquired" and receipt["origin"] == "acquired"
    assert receipt["acquisition_time_ns"]["status"] == "complete"
    assert measurements(row)["materialization_time_ns"] == {
        "status": "unavailable",
        "reason": "provided_dataset",
    }
    copy = Path(receipt["path"])
    assert copy != source and (copy / "sub" / "b.txt").read_text() == "two\n"
    (again,) = run(manifest, tmp_path, run_id="two").rows
    assert _receipt(again)["origin"] == "cache_hit"
    assert _receipt(again)["acquisition_time_ns"] == {
        "status": "unavailable",
        "reason": "cache_hit",
    }


def _errors(tmp_path: Path, datasets: str) -> list[str]:
    from metewand.suites.compute.manifest import ManifestError
    from metewand.suites.compute.manifest_load import load

    manifest = write_manifest(
        tmp_path, datasets + problem() + python_impl("a", "ok") + _experiment("x")
    )
    try:
        load(str(manifest))
    except ManifestError as exc:
        return exc.errors
    raise AssertionError("the manifest was accepted")


def test_derived_dataset_entries_are_checked_key_by_key(tmp_path: Path) -> None:
    gen = f'{{ runner = "python", entrypoint = "{DATASETS}", args = ["xform"] }}'
    errors = _errors(
        tmp_path,
        f"""
[datasets.x]
kind = "transformed"
source = "y"
transformer = {gen}
[datasets.y]
kind = "transformed"
source = "x"
transformer = {gen}
materializer = {gen}
[datasets.z]
kind = "transformed"
source = "nowhere"
transformer = {gen}
[datasets.w]
kind = "acquired"
path = "missing.txt"
sha256 = "ABC"
""",
    )
    assert (
        "metewand.toml: datasets.y.materializer: transformed datasets take no materializer"
        in errors
    )
    assert "metewand.toml: datasets.x.source: sources form a loop: x -> y -> x" in errors
    assert "metewand.toml: datasets.z.source: no dataset named 'nowhere'" in errors
    assert "metewand.toml: datasets.w.path: no such file: missing.txt" in errors
    assert "metewand.toml: datasets.w.sha256: must be 64 lowercase hex digits" in errors


def test_an_acquired_directory_with_a_symlink_is_refused_by_key(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("one\n")
    (corpus / "link").symlink_to(corpus / "a.txt")
    errors = _errors(
        tmp_path, f'[datasets.x]\nkind = "acquired"\npath = "corpus"\nsha256 = "{"0" * 64}"\n'
    )
    assert errors == [
        "metewand.toml: datasets.x.path: cannot read corpus: "
        "link: symbolic links are not allowed in outputs"
    ]


def test_a_transformation_of_an_acquired_source_keeps_acquisition_apart(tmp_path: Path) -> None:
    import json

    from metewand.runtime import schemas

    (tmp_path / "values.txt").write_text("3\n1\n2\n")
    digest = hashlib.sha256(b"3\n1\n2\n").hexdigest()
    xform = f'{{ runner = "python", entrypoint = "{DATASETS}", args = ["xform"] }}'
    manifest = write_manifest(
        tmp_path,
        f"""
[datasets.raw]
kind = "acquired"
path = "values.txt"
sha256 = "{digest}"

[datasets.scaled]
kind = "transformed"
source = "raw"
transformer = {xform}
parameter_defaults = {{ factor = 2 }}
"""
        + problem()
        + python_impl("a", "ok")
        + _experiment("scaled"),
    )
    summary = run(manifest, tmp_path, run_id="one")
    (row,) = summary.rows
    assert row["status"] == "accepted", row["message"]
    scaled = _receipt(row)
    assert (Path(scaled["path"]) / "values.txt").read_text() == "2\n4\n6\n"
    assert measurements(row)["materialization_time_ns"]["status"] == "complete"
    # The source's receipt is in the run manifest: acquisition timed apart, never materialization.
    run_manifest = json.loads((Path(summary.run_dir) / "run_manifest.json").read_text())
    receipts = {r["derivation_id"]: r for r in run_manifest["data"]["dataset_materializations"]}
    raw = receipts[scaled["source_derivation_id"]]
    assert raw["kind"] == "acquired" and raw["origin"] == "acquired"
    assert raw["acquisition_time_ns"]["status"] == "complete"
    assert "materialization_time_ns" not in raw
    for receipt in receipts.values():
        assert schemas.violations("dataset-materialization-receipt", receipt) == []


def test_a_source_changed_after_the_manifest_was_read_fails_its_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from metewand.suites.compute import runner

    source = tmp_path / "words.txt"
    source.write_text("alpha\n")
    manifest = _acquired_manifest(tmp_path, "words.txt", hashlib.sha256(b"alpha\n").hexdigest())
    loaded = runner.load(str(manifest))  # checked here: the digest matches

    def load_then_change(path: str) -> object:
        source.write_text("beta\n")  # the bytes change between the check and the copy
        return loaded

    monkeypatch.setattr(runner, "load", load_then_change)
    (row,) = run(manifest, tmp_path).rows
    assert row["code"] == "setup_failure"
    assert "words.txt has sha256 " + hashlib.sha256(b"beta\n").hexdigest() in row["message"]
    leftovers = [p.name for p in (tmp_path / "cache" / "datasets").iterdir()]
    assert not any(name.startswith("acquire-") for name in leftovers)


@pytest.mark.slow
def test_a_dask_worker_sends_back_the_receipt_of_a_source_no_row_names(tmp_path: Path) -> None:
    """On ``--executor dask`` the worker materializes the transformed dataset and its source; no
    row names the source, so its receipt reaches the client's manifest only as a worker's fact."""
    import json

    from metewand.runtime.run import ExecutorChoice

    manifest = _transformed_manifest(tmp_path)
    dask = ExecutorChoice("dask", local_workers=1)
    summary = run(manifest, tmp_path, run_id="d", executor=dask)
    (row,) = summary.rows
    assert row["status"] == "accepted", row["message"]
    assert row["placement"]["executor"] == "dask"
    scaled = _receipt(row)
    run_manifest = json.loads((Path(summary.run_dir) / "run_manifest.json").read_text())
    receipts = {r["derivation_id"]: r for r in run_manifest["data"]["dataset_materializations"]}
    assert set(receipts) == {scaled["derivation_id"], scaled["source_derivation_id"]}
    assert receipts[scaled["source_derivation_id"]]["kind"] == "generated"
