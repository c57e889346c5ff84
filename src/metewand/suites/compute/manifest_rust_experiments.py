"""Rust-dialect experiments: selections, repetitions, policies, parameter axes and cases.

An axis is exactly ``{ value = X }`` (one literal, arrays and tables included) or
``{ grid = [A, B, …] }`` (non-empty, members in order). With named ``cases`` the experiment's
axes are defaults each case overlays by parameter name; the cases' expansions are unioned.
References (problem, datasets, policies) are checked later, with the contracts
(``manifest_rust_checks``), as the Rust compatibility pass does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from metewand.suites.compute.manifest import (
    Axes,
    Case,
    ExecutionPolicy,
    Experiment,
    ObservationPolicy,
)
from metewand.suites.compute.toml_values import domain_problem

if TYPE_CHECKING:
    from metewand.suites.compute.manifest_rust_reader import RustReader

EXPERIMENT_KEYS = (
    "name",
    "problem",
    "datasets",
    "implementations",
    "execution_policy",
    "observation_policy",
    "implementation_repetitions",
    "measurement_repetitions",
    "seed",
    "dataset_parameters",
    "problem_parameters",
    "implementation_parameters",
    "cases",
)
REQUIRED = (
    "name",
    "problem",
    "implementations",
    "execution_policy",
    "observation_policy",
    "implementation_repetitions",
    "measurement_repetitions",
    "seed",
)
CASE_KEYS = ("name", "dataset_parameters", "problem_parameters", "implementation_parameters")


def axes(r: RustReader, value: Any, where: str) -> dict[str, list[Any]]:
    """``{parameter: [values]}`` from ``{value = x}`` / ``{grid = [...]}`` tables."""
    if not isinstance(value, dict):
        r.error(where, "must be a table of parameter axes")
        return {}
    out: dict[str, list[Any]] = {}
    for param, axis in value.items():
        at = f"{where}.{param}"
        if (
            not isinstance(axis, dict)
            or len(axis) != 1
            or next(iter(axis)) not in ("value", "grid")
        ):
            r.error(at, "an axis is exactly { value = ... } or { grid = [...] }")
            continue
        if "grid" in axis:
            members = axis["grid"]
            if not isinstance(members, list) or not members:
                r.error(f"{at}.grid", "a parameter `grid` cannot be empty")
                continue
        else:
            members = [axis["value"]]
        for member in members:
            if problem := domain_problem(member):
                r.error(at, problem)
        out[param] = list(members)
    return out


def named_axes(r: RustReader, value: Any, where: str) -> Axes:
    if not isinstance(value, dict):
        r.error(where, "must be a table keyed by definition name")
        return {}
    return {
        owner: axes(r, v, f"{where}.{owner}")
        for owner, v in value.items()
        if r.name(owner, f"{where}.{owner}")
    }


def _case(r: RustReader, value: Any, where: str, base: Case) -> Case:
    t = r.table(value, where, CASE_KEYS, ("name",))
    ds = {owner: dict(a) for owner, a in base.dataset_parameters.items()}
    for owner, a in named_axes(
        r, t.get("dataset_parameters", {}), f"{where}.dataset_parameters"
    ).items():
        ds[owner] = {**ds.get(owner, {}), **a}
    im = {owner: dict(a) for owner, a in base.implementation_parameters.items()}
    at = f"{where}.implementation_parameters"
    for owner, a in named_axes(r, t.get("implementation_parameters", {}), at).items():
        im[owner] = {**im.get(owner, {}), **a}
    pp = {
        **base.problem_parameters,
        **axes(r, t.get("problem_parameters", {}), f"{where}.problem_parameters"),
    }
    return Case(r.name(t.get("name"), f"{where}.name"), ds, pp, im)


def _experiment(r: RustReader, value: Any, where: str, shapes: dict[str, Any]) -> Experiment:
    t = r.table(value, where, EXPERIMENT_KEYS, REQUIRED)
    datasets = r.name_list(t["datasets"], f"{where}.datasets") if "datasets" in t else ()
    base = Case(
        "default",
        named_axes(r, t.get("dataset_parameters", {}), f"{where}.dataset_parameters"),
        axes(r, t.get("problem_parameters", {}), f"{where}.problem_parameters"),
        named_axes(r, t.get("implementation_parameters", {}), f"{where}.implementation_parameters"),
    )
    cases: tuple[Case, ...] = (base,)
    if "cases" in t:
        raw = t["cases"]
        if not isinstance(raw, list) or not raw:
            r.error(f"{where}.cases", "`cases` cannot be empty when present")
        else:
            cases = tuple(_case(r, c, f"{where}.cases[{i}]", base) for i, c in enumerate(raw))
    policy_name = r.name(t.get("execution_policy"), f"{where}.execution_policy")
    observation_name = r.name(t.get("observation_policy"), f"{where}.observation_policy")
    return Experiment(
        name=r.name(t.get("name"), f"{where}.name"),
        problem=r.name(t.get("problem"), f"{where}.problem"),
        datasets=datasets,
        implementations=r.name_list(t.get("implementations"), f"{where}.implementations"),
        repetitions=r.safe_int(
            t.get("implementation_repetitions", 1), f"{where}.implementation_repetitions", 1
        ),
        seed=r.safe_int(t.get("seed", 0), f"{where}.seed", 0),
        policy=shapes["execution_policies"].get(policy_name, ExecutionPolicy(name=policy_name)),
        cases=cases,
        measurement_repetitions=r.safe_int(
            t.get("measurement_repetitions", 1), f"{where}.measurement_repetitions", 1
        ),
        observation_policy=shapes["observation_policies"].get(
            observation_name, ObservationPolicy(observation_name)
        ),
        named_cases="cases" in t,
        warmups_per_specification=True,
    )


def experiments(r: RustReader, raw: Any, shapes: dict[str, Any]) -> list[Experiment]:
    if not isinstance(raw, list):
        r.error("experiments", "must be an array of tables ([[experiments]])")
        return []
    out = [_experiment(r, e, f"experiments[{i}]", shapes) for i, e in enumerate(raw)]
    names = [e.name for e in out]
    if len(set(names)) != len(names):
        r.error("experiments", "experiment names must be unique")
    return out
