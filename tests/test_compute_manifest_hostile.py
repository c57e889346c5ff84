"""Issue 12 items 7, 8, 9, compute side: hostile manifests and flags are refused by ``metewand
plan`` and ``metewand run`` with exit 2, naming the file and the key, before anything exists (no
run directory, no cache), and never with a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_compute_hostile import hostile_manifest

NAME = 'name = "hostile"'
IMPL_ARGS = 'args = ["impl"]'
LAST = 'execution_policy = "short"\n'  # the experiment's last key: tables may follow it


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


# mutation id -> (old text, new text, what stderr must name)
EDITS: dict[str, tuple[str, str, str]] = {
    "name_dotdot": (NAME, 'name = ".."', "experiments[0].name"),
    "name_script": (NAME, 'name = "<script>alert(1)</script>"', "experiments[0].name"),
    "name_newline": (NAME, 'name = "a\\nb"', "experiments[0].name"),
    "case_dotdot": (NAME, NAME + '\n[[experiments.cases]]\nname = ".."', "cases[0].name"),
    "args_nul": (IMPL_ARGS, 'args = ["impl", "a\\u0000b"]', "implementations.subject.args[1]"),
    "env_key_equals": (
        "env = { METEWAND_TEST_MODE",
        'env = { "A=B" = "x", METEWAND_TEST_MODE',
        "evaluator.env.'A=B'",
    ),
    "env_value_nul": (
        "env = { METEWAND_TEST_MODE",
        'env = { A = "x\\u0000y", METEWAND_TEST_MODE',
        "evaluator.env.'A'",
    ),
    "schema_not_schema": (
        "[problems.answer]",
        "[problems.answer]\nresult_schema = { type = 12 }",
        "problems.answer.result_schema",
    ),
    "schema_is_directory": (
        "[problems.answer]",
        '[problems.answer]\nresult_schema = "."',
        "problems.answer.result_schema",
    ),
    "schema_bad_ref": (
        "[problems.answer]",
        '[problems.answer]\nmetric_schema = { "$ref" = "#/$defs/nowhere" }',
        "problems.answer.metric_schema",
    ),
    "schema_remote_ref": (
        "[problems.answer]",
        '[problems.answer]\nmetric_schema = { "$ref" = "http://example.com/s" }',
        "problems.answer.metric_schema",
    ),
    "entrypoint_directory": ('args = ["impl"]', 'args = ["impl"]\n', "entrypoint"),
    "seed_inf": (NAME, NAME + "\nseed = inf", "experiments[0].seed"),
    "repetitions_inf": (NAME, NAME + "\nrepetitions = inf", "experiments[0].repetitions"),
    "timeout_inf": ('timeout = "20 s"', "timeout = inf", "execution_policies.short.timeout"),
    "timeout_huge": ('timeout = "20 s"', "timeout = 1e300", "execution_policies.short.timeout"),
    "parameter_defaults_string": (
        "[problems.answer]",
        '[problems.answer]\nparameter_defaults = "x"',
        "problems.answer.parameter_defaults",
    ),
    "deep_toml_array": (
        LAST,
        LAST + f"[experiments.problem_parameters]\nx = {_deep(5000)}\n",
        "metewand.toml",
    ),
    "fixed_proc_self": (
        "[problems.answer]",
        '[datasets.fx]\nkind = "fixed"\npath = "/proc/self"\n\n[problems.answer]',
        "datasets.fx.path",
    ),
    "acquired_dev_zero": (
        "[problems.answer]",
        '[datasets.acq]\nkind = "acquired"\npath = "/dev/zero"\nsha256 = "'
        + "0" * 64
        + '"\n\n[problems.answer]',
        "datasets.acq.path",
    ),
    "acquired_proc": (
        "[problems.answer]",
        '[datasets.acq]\nkind = "acquired"\npath = "/proc/self"\nsha256 = "'
        + "0" * 64
        + '"\n\n[problems.answer]',
        "datasets.acq.path",
    ),
    "repetitions_ten_million": (NAME, NAME + "\nrepetitions = 10000000", "--max-attempts"),
    "grid_thousand_squared": (
        LAST,
        LAST
        + "[experiments.problem_parameters]\na = { grid = ["
        + ", ".join(map(str, range(1000)))
        + "] }\nb = { grid = ["
        + ", ".join(map(str, range(1000)))
        + "] }\n",
        "--max-attempts",
    ),
}


def _edited(tmp_path: Path, edit: str) -> Path:
    manifest = hostile_manifest(tmp_path)
    old, new, _ = EDITS[edit]
    text = manifest.read_text()
    assert old in text, edit
    if edit == "entrypoint_directory":  # the implementation's entrypoint becomes a directory
        text = text.replace(
            f'entrypoint = "{Path(__file__).parent / "workers" / "hostile_worker.py"}"\nargs = ["impl"]',
            f'entrypoint = "{tmp_path}"\nargs = ["impl"]',
        )
    else:
        text = text.replace(old, new, 1)
    manifest.write_text(text)
    return manifest


def _refused(tmp_path: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "metewand", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2, (done.stdout[-500:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    return done


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_hostile_manifest_is_refused_before_anything_exists(tmp_path: Path, edit: str) -> None:
    manifest = _edited(tmp_path, edit)
    must_name = EDITS[edit][2]
    planned = _refused(tmp_path, ["plan", str(manifest)])
    assert must_name in planned.stderr and "metewand.toml" in planned.stderr, planned.stderr
    out, cache = tmp_path / "out", tmp_path / "cache"
    ran = _refused(tmp_path, ["run", str(manifest), "--out", str(out), "--cache-dir", str(cache)])
    assert must_name in ran.stderr, ran.stderr
    assert not out.exists() and not cache.exists()


def test_the_plan_limit_is_overridable(tmp_path: Path) -> None:
    manifest = hostile_manifest(tmp_path)
    manifest.write_text(manifest.read_text().replace(NAME, NAME + "\nrepetitions = 3"))
    refused = _refused(tmp_path, ["plan", str(manifest), "--max-attempts", "2"])
    assert "3 attempts" in refused.stderr
    done = subprocess.run(
        [sys.executable, "-m", "metewand", "plan", str(manifest), "--max-attempts", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("flags", "must_name"),
    [
        (["--host-sample-interval-s", "0"], "--host-sample-interval-s"),
        (["--host-sample-interval-s", "-1"], "--host-sample-interval-s"),
        (["--host-sample-interval-s", "0.05"], "--host-sample-interval-s"),
        (["--host-sample-interval-s", "nan"], "--host-sample-interval-s"),
        (["--out", "{file}"], "--out"),
        (["--out", "/proc/metewand-out"], "--out"),
        (["--cache-dir", "{file}"], "--cache-dir"),
    ],
)
def test_hostile_run_flags_are_refused_before_anything_exists(
    tmp_path: Path, flags: list[str], must_name: str
) -> None:
    manifest = hostile_manifest(tmp_path)
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory\n")
    flags = [f.replace("{file}", str(a_file)) for f in flags]
    defaults = {"--out": str(tmp_path / "out"), "--cache-dir": str(tmp_path / "cache")}
    for flag, value in defaults.items():
        if flag not in flags:
            flags += [flag, value]
    ran = _refused(tmp_path, ["run", str(manifest), *flags])
    assert must_name in ran.stderr, ran.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()
    assert a_file.read_text() == "not a directory\n"


def test_non_utf8_manifest_is_named(tmp_path: Path) -> None:
    manifest = hostile_manifest(tmp_path)
    manifest.write_bytes(b"# caf\xe9\n" + manifest.read_bytes())
    refused = _refused(tmp_path, ["run", str(manifest), "--out", str(tmp_path / "out")])
    assert "metewand.toml" in refused.stderr and "UTF-8" in refused.stderr
    assert not (tmp_path / "out").exists()


def _fixed_dataset_manifest(tmp_path: Path) -> Path:
    manifest = hostile_manifest(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "values.txt").write_text("1\n")
    text = manifest.read_text().replace(
        "[problems.answer]", '[datasets.fx]\nkind = "fixed"\npath = "data"\n\n[problems.answer]'
    )
    manifest.write_text(text.replace(LAST, LAST + 'datasets = ["fx"]\n'))
    return manifest


def test_fixed_dataset_holding_a_named_pipe_is_refused(tmp_path: Path) -> None:
    manifest = _fixed_dataset_manifest(tmp_path)
    os.mkfifo(tmp_path / "data" / "pipe")
    ran = _refused(tmp_path, ["run", str(manifest), "--out", str(tmp_path / "out")])
    assert "datasets.fx.path" in ran.stderr and "pipe" in ran.stderr
    assert not (tmp_path / "out").exists()


def test_fixed_dataset_spoiled_after_validation_fails_its_attempts(tmp_path: Path) -> None:
    """A pipe that appears after validation: the dataset's attempts fail, the run goes on."""
    from metewand.suites.compute.manifest_load import load
    from metewand.suites.compute.materialize import DatasetCache
    from metewand.suites.compute.plan_expand import build_plan

    plan = build_plan(load(str(_fixed_dataset_manifest(tmp_path))))
    os.mkfifo(tmp_path / "data" / "pipe")
    cache = DatasetCache(str(tmp_path / "cache"), str(tmp_path / "work"), builder=None)  # type: ignore[arg-type]
    dataset = cache.get(plan.attempts[0].dataset)
    assert dataset.directory is None
    assert dataset.error is not None and "pipe" in dataset.error


def test_the_cli_default_plan_limit_is_the_suites() -> None:
    """The CLI keeps its own copy (so --help imports no suite); it must not drift."""
    from metewand.cli import compute_cmd
    from metewand.suites.compute import manifest_guard

    assert compute_cmd.DEFAULT_MAX_ATTEMPTS == manifest_guard.DEFAULT_MAX_ATTEMPTS
