"""Manifest validation: errors name the file and key path; unknown keys are rejected."""

from pathlib import Path

import pytest

from compute_helpers import FAULT, problem, python_impl, write_manifest
from metewand.suites.compute.manifest import ManifestError
from metewand.suites.compute.manifest_load import load
from metewand.suites.compute.plan_expand import build_plan


def _errors(tmp_path: Path, body: str) -> list[str]:
    with pytest.raises(ManifestError) as info:
        build_plan(load(str(write_manifest(tmp_path, body))))
    return info.value.errors


EXPERIMENT = """
[[experiments]]
name = "e"
problem = "answer"
implementations = ["a"]
"""


def test_unknown_keys_and_bad_values_name_their_path(tmp_path: Path) -> None:
    body = problem() + python_impl("a", "ok") + "colour = 1\n" + EXPERIMENT
    body += '[execution_policies.default]\ntiming_scope = "fast"\nwarmup_runs = 2\n'
    errors = _errors(
        tmp_path, body.replace('problems = ["answer"]', 'problems = ["answer"]\nspeed = 3')
    )
    text = "\n".join(errors)
    assert "metewand.toml: implementations.a.speed: unknown key" in text
    assert "execution_policies.default.timing_scope: must be one of" in text
    assert "execution_policies.default.warmup_runs: warm-up runs need worker_reuse" in text


def test_references_and_grids_are_checked(tmp_path: Path) -> None:
    body = (
        problem()
        + python_impl("a", "ok")
        + """
[[experiments]]
name = "e"
problem = "nope"
implementations = ["a", "ghost"]
[experiments.implementation_parameters.a]
n = { grid = [] }
"""
    )
    text = "\n".join(_errors(tmp_path, body))
    assert "experiments[0].problem: no problem named 'nope'" in text
    assert "experiments[0].implementations[1]: no implementation named 'ghost'" in text
    assert "experiments[0].implementation_parameters.a.n.grid: must be a nonempty array" in text


def test_cold_scope_refuses_reuse(tmp_path: Path) -> None:
    body = problem() + python_impl("a", "ok") + EXPERIMENT
    body += '[execution_policies.default]\ntiming_scope = "cold_end_to_end"\nworker_reuse = true\n'
    assert any("cold_end_to_end needs a fresh worker" in e for e in _errors(tmp_path, body))


def test_grid_cartesian_and_cases_union(tmp_path: Path) -> None:
    body = (
        problem()
        + python_impl("a", "ok")
        + EXPERIMENT
        + """
repetitions = 2
[experiments.implementation_parameters.a]
x = { grid = [1, 2, 3] }
y = { grid = ["p", "q"] }
"""
    )
    plan = build_plan(load(str(write_manifest(tmp_path, body))))
    assert len(plan.attempts) == 3 * 2 * 2
    assert len({a.key for a in plan.attempts}) == 12
    cases = (
        body
        + """
[[experiments.cases]]
name = "small"
implementation_parameters = { a = { x = { value = 9 } } }
[[experiments.cases]]
name = "big"
implementation_parameters = { a = { x = { grid = [10, 11] } } }
"""
    )
    plan = build_plan(load(str(write_manifest(tmp_path, cases))))
    # cases are unioned; each case replaces x and keeps the experiment's y grid
    assert len(plan.attempts) == (1 * 2 + 2 * 2) * 2


def test_source_files_must_be_files_inside_the_manifests_directory(tmp_path: Path) -> None:
    (tmp_path / "impl.py").write_text("pass\n")
    (tmp_path / "helper.py").write_text("X = 1\n")
    (tmp_path / "sub").mkdir()
    outside = tmp_path.parent / f"{tmp_path.name}-outside.py"
    outside.write_text("Y = 2\n")
    here = problem() + python_impl("a", "ok").replace(str(FAULT), "impl.py") + EXPERIMENT

    def declared(files: str, body: str = here) -> str:
        return body.replace("problems = [", f"source_files = {files}\nproblems = [", 1)

    errors = "\n".join(_errors(tmp_path, declared('["helper.py", 3]')))
    assert "implementations.a.source_files: must be an array of strings" in errors, errors
    bad = f'["helper.py", "nope.py", "sub", "../{outside.name}"]'
    errors = "\n".join(_errors(tmp_path, declared(bad)))
    assert "implementations.a.source_files[1]: no such file: nope.py" in errors, errors
    assert "implementations.a.source_files[2]: sub is not a regular file" in errors, errors
    assert f"source_files[3]: ../{outside.name} is outside the manifest's directory" in errors
    assert "source_files[0]" not in errors, errors
    away = problem() + python_impl("a", "ok") + EXPERIMENT  # its entrypoint lies elsewhere
    errors = "\n".join(_errors(tmp_path, declared('["helper.py"]', away)))
    assert "implementations.a.source_files: needs the entrypoint inside" in errors, errors
    # a declared file is part of the implementation's identity
    first = build_plan(load(str(write_manifest(tmp_path, declared('["helper.py"]'))))).attempts[0]
    (tmp_path / "helper.py").write_text("X = 2\n")
    again = build_plan(load(str(write_manifest(tmp_path, declared('["helper.py"]'))))).attempts[0]
    assert again.key != first.key
    plain = build_plan(load(str(write_manifest(tmp_path, here)))).attempts[0]
    (tmp_path / "helper.py").write_text("X = 3\n")
    assert build_plan(load(str(write_manifest(tmp_path, here)))).attempts[0].key == plain.key
