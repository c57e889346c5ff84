"""The relationship pass of a Rust-dialect manifest (its ``docs/parameter-namespaces.md`` and
``docs/manifest-compatibility.md``), run once the contracts are loaded.

Parameter namespaces: a dataset or implementation with ``parameter_defaults`` declares a
``parameter_schema``; a name-qualified parameter table belongs to a dataset or implementation
its experiment selects, and that definition has a parameter schema (a fixed dataset never does).

Compatibility: implementations declare defined problems; a policy's warm-ups need worker reuse
and ``cold_end_to_end`` needs a fresh, unwarmed worker; an experiment selects a defined problem,
datasets only for a dataset-backed contract (each emitting a schema the contract accepts), none
for a dataset-free one (the built-in unit dataset is bound), defined policies, a timing scope
and budget the contract allows, and implementations that declare its problem and the
``one_shot`` capability. The Rust pass stops at the first error; this one reports them all.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from metewand.suites.compute.manifest import Experiment, ProblemDef

if TYPE_CHECKING:
    from metewand.suites.compute.manifest_rust_reader import RustReader


def with_unit(experiment: Experiment, unit_key: str) -> Experiment:
    """A dataset-free experiment binds the built-in unit dataset."""
    return experiment if experiment.datasets else replace(experiment, datasets=(unit_key,))


def relationships(
    r: RustReader, shapes: dict[str, Any], problems: dict[str, ProblemDef], exps: list[Experiment]
) -> None:
    _namespaces(r, shapes, exps)
    for name, impl in shapes["implementations"].items():
        for problem in impl.problems:
            if problem not in problems:
                r.error(
                    f"implementations.{name}.problem_contracts",
                    f"implementation {name!r} declares undefined problem {problem!r}",
                )
    for name, policy in shapes["execution_policies"].items():
        if policy.warmup_runs > 0 and not policy.worker_reuse:
            r.error(
                f"execution_policies.{name}",
                f"execution policy {name!r} requests {policy.warmup_runs} warm-up runs "
                "with worker_reuse = false",
            )
        if policy.timing_scope == "cold_end_to_end" and (policy.worker_reuse or policy.warmup_runs):
            r.error(
                f"execution_policies.{name}",
                f"execution policy {name!r} uses cold_end_to_end, which requires "
                "worker_reuse = false and warmup_runs = 0",
            )
    for i, exp in enumerate(exps):
        _experiment(r, f"experiments[{i}]", exp, shapes, problems)


def _experiment(
    r: RustReader,
    where: str,
    exp: Experiment,
    shapes: dict[str, Any],
    problems: dict[str, ProblemDef],
) -> None:
    problem = problems.get(exp.problem)
    if problem is None:
        r.error(
            f"{where}.problem", f"experiment {exp.name!r} selects undefined problem {exp.problem!r}"
        )
        return
    contract = problem.contract
    _dataset_selection(r, where, exp, shapes, contract)
    policy_name = exp.policy.name
    if policy_name not in shapes["execution_policies"]:
        r.error(
            f"{where}.execution_policy",
            f"experiment {exp.name!r} selects undefined execution policy {policy_name!r}",
        )
    elif exp.policy.timing_scope not in contract.allowed_timing_scopes:
        r.error(
            f"{where}.execution_policy",
            f"execution policy {policy_name!r} selects timing scope {exp.policy.timing_scope!r} "
            f"for experiment {exp.name!r}, but problem {exp.problem!r} does not allow it",
        )
    if exp.observation_policy.name not in shapes["observation_policies"]:
        r.error(
            f"{where}.observation_policy",
            f"experiment {exp.name!r} selects undefined observation policy "
            f"{exp.observation_policy.name!r}",
        )
    elif "none" not in contract.supported_budgets:
        r.error(
            f"{where}.observation_policy",
            f"problem {exp.problem!r} does not support the none budget",
        )
    for impl_name in exp.implementations:
        impl = shapes["implementations"].get(impl_name)
        if impl is None:
            r.error(
                f"{where}.implementations",
                f"experiment {exp.name!r} selects undefined implementation {impl_name!r}",
            )
        elif exp.problem not in impl.problems:
            r.error(
                f"{where}.implementations",
                f"implementation {impl_name!r} in experiment {exp.name!r} does not declare "
                f"problem {exp.problem!r}",
            )
        elif "one_shot" not in impl.capabilities:
            r.error(f"{where}.implementations", f"implementation {impl_name!r} lacks one_shot")


def _dataset_selection(
    r: RustReader, where: str, exp: Experiment, shapes: dict[str, Any], contract: Any
) -> None:
    if not contract.dataset_schemas:
        if exp.datasets:
            r.error(
                f"{where}.datasets",
                f"experiment {exp.name!r} selects datasets for dataset-free problem "
                f"{exp.problem!r}; omit `datasets` to bind the built-in unit dataset",
            )
        return
    if not exp.datasets:
        r.error(
            f"{where}.datasets",
            f"experiment {exp.name!r} must select a dataset for problem {exp.problem!r}",
        )
    for name in exp.datasets:
        if name not in shapes["datasets"]:
            r.error(
                f"{where}.datasets", f"experiment {exp.name!r} selects undefined dataset {name!r}"
            )
            continue
        output = r.schema_paths.get(("datasets", name, "output_schema"))
        if output not in contract.dataset_schemas:
            r.error(
                f"{where}.datasets",
                f"dataset {name!r} in experiment {exp.name!r} emits schema {output}, which "
                f"problem {exp.problem!r} does not accept",
            )


def _namespaces(r: RustReader, shapes: dict[str, Any], exps: list[Experiment]) -> None:
    for section in ("datasets", "implementations"):
        for name, definition in shapes[section].items():
            if (
                definition.defaults_declared
                and (section, name, "parameter_schema") not in r.schema_paths
            ):
                r.error(
                    f"{section}.{name}.parameter_defaults",
                    "parameter_defaults need a parameter_schema",
                )
    for i, exp in enumerate(exps):
        for case in exp.cases:
            where = f"experiments[{i}]" + (f".cases.{case.name}" if exp.named_cases else "")
            for section, owners, selected in (
                ("datasets", case.dataset_parameters, exp.datasets),
                ("implementations", case.implementation_parameters, exp.implementations),
            ):
                for owner in owners:
                    at = f"{where}.{section[:-1]}_parameters.{owner}"
                    if owner not in selected:
                        r.error(at, f"{owner!r} is not selected by experiment {exp.name!r}")
                    elif owner not in shapes[section]:
                        r.error(at, f"no {section[:-1]} named {owner!r}")
                    elif (section, owner, "parameter_schema") not in r.schema_paths:
                        r.error(at, f"{section[:-1]} {owner!r} declares no parameter_schema")
