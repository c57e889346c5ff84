"""Validation of a parsed ``metewand.toml`` into the typed manifest (see ``manifest``)."""

from __future__ import annotations

import os
from typing import Any

from metewand.suites.compute import manifest_datasets as derived
from metewand.suites.compute import manifest_guard as guard
from metewand.suites.compute.manifest import (
    DATASET_KINDS,
    MANIFEST_VERSION,
    NAME_RE,
    RUN_ORDERS,
    TIMING_SCOPES,
    Axes,
    Case,
    DatasetDef,
    ExecutionPolicy,
    Experiment,
    ImplementationDef,
    Manifest,
    ManifestError,
    ProblemDef,
    is_safe_int,
    parse_duration,
)
from metewand.suites.compute.manifest_reader import LAUNCH_KEYS, Reader, read_launch

POLICY_KEYS = {
    "timing_scope": False,
    "timeout": False,
    "warmup_runs": False,
    "worker_reuse": False,
    "run_order": False,
    "jobs": False,
}


def _dataset(r: Reader, name: str, value: Any) -> DatasetDef:
    where = f"datasets.{name}"
    if isinstance(value, dict) and value.get("kind") in ("transformed", "acquired"):
        read = derived.transformed if value["kind"] == "transformed" else derived.acquired
        return read(r, name, value)
    keys = {"kind": True, "materializer": False, "path": False}
    keys |= {"parameter_defaults": False, "parameter_schema": False}
    t = r.table(value, where, keys)
    kind = r.string(t.get("kind"), f"{where}.kind", DATASET_KINDS)
    defaults = r.params(t.get("parameter_defaults", {}), f"{where}.parameter_defaults")
    if kind == "generated":
        if "materializer" not in t:
            r.error(f"{where}.materializer", "a generated dataset needs a materializer")
            return DatasetDef(name, kind)
        launch = read_launch(r, t["materializer"], f"{where}.materializer")
        schema = r.schema(t.get("parameter_schema"), f"{where}.parameter_schema")
        declared = "parameter_defaults" in t
        return DatasetDef(
            name, kind, launch, None, dict(defaults), schema, defaults_declared=declared
        )
    for key in ("materializer", "parameter_defaults", "parameter_schema"):
        if key in t:
            r.error(f"{where}.{key}", f"a {kind} dataset takes no {key}")
    if kind == "fixed":
        path = r.file_path(t.get("path"), f"{where}.path")
        if path and os.path.exists(path) and (problem := guard.fixed_dataset_problem(path)):
            r.error(f"{where}.path", problem)
        return DatasetDef(name, kind, None, path)
    if "path" in t:
        r.error(f"{where}.path", "a unit dataset has no path")
    return DatasetDef(name, kind)


def _problem(r: Reader, name: str, value: Any) -> ProblemDef:
    where = f"problems.{name}"
    keys = {"evaluator": True, "result_schema": False, "metric_schema": False}
    t = r.table(value, where, keys | {"parameter_defaults": False})
    return ProblemDef(
        name,
        read_launch(r, t.get("evaluator", {}), f"{where}.evaluator"),
        r.schema(t.get("result_schema"), f"{where}.result_schema"),
        r.schema(t.get("metric_schema"), f"{where}.metric_schema"),
        r.params(t.get("parameter_defaults", {}), f"{where}.parameter_defaults"),
        defaults_declared="parameter_defaults" in t,
    )


def _implementation(r: Reader, name: str, value: Any, problems: dict) -> ImplementationDef:
    where = f"implementations.{name}"
    keys = LAUNCH_KEYS | {"problems": True, "parameter_defaults": False}
    t = r.table(value, where, keys | {"parameter_schema": False})
    launch_part = {k: v for k, v in t.items() if k in LAUNCH_KEYS}
    return ImplementationDef(
        name,
        read_launch(r, launch_part, where),
        r.names(t.get("problems"), f"{where}.problems", problems, "problem"),
        r.params(t.get("parameter_defaults", {}), f"{where}.parameter_defaults"),
        r.schema(t.get("parameter_schema"), f"{where}.parameter_schema"),
        defaults_declared="parameter_defaults" in t,
    )


def _policy(r: Reader, name: str, value: Any) -> ExecutionPolicy:
    where = f"execution_policies.{name}"
    t = r.table(value, where, POLICY_KEYS)
    p = ExecutionPolicy(name=name)
    scope = r.string(t.get("timing_scope", p.timing_scope), f"{where}.timing_scope", TIMING_SCOPES)
    order = r.string(t.get("run_order", p.run_order), f"{where}.run_order", RUN_ORDERS)
    timeout = None
    if "timeout" in t and (timeout := parse_duration(t["timeout"])) is None:
        r.error(f"{where}.timeout", "must be a positive duration like '500 ms', '10 s', '2 min'")
    elif timeout is not None and (problem := guard.timeout_problem(timeout)):
        r.error(f"{where}.timeout", problem)
        timeout = None
    warmups, reuse, jobs = t.get("warmup_runs", 0), t.get("worker_reuse", False), t.get("jobs", 1)
    if not is_safe_int(warmups):
        r.error(f"{where}.warmup_runs", "must be an integer >= 0")
        warmups = 0
    if not isinstance(reuse, bool):
        r.error(f"{where}.worker_reuse", "must be true or false")
    if not is_safe_int(jobs, 1):
        r.error(f"{where}.jobs", "must be an integer >= 1")
        jobs = 1
    if warmups and not reuse:
        r.error(f"{where}.warmup_runs", "warm-up runs need worker_reuse = true")
    if scope == "cold_end_to_end" and (reuse or warmups):
        r.error(
            f"{where}.timing_scope", "cold_end_to_end needs a fresh worker: no reuse, no warm-up"
        )
    raw_timeout = t.get("timeout")
    text = (
        None
        if raw_timeout is None
        else raw_timeout
        if isinstance(raw_timeout, str)
        else f"{raw_timeout} s"
    )
    return ExecutionPolicy(
        name, scope, timeout, int(warmups or 0), bool(reuse), order, int(jobs), timeout_text=text
    )


def _axes(r: Reader, value: Any, where: str) -> dict[str, list[Any]]:
    """A parameter table: each value is {value = x}, {grid = [...]}, or a bare literal."""
    if not isinstance(value, dict):
        r.error(where, "must be a table of parameters")
        return {}
    out: dict[str, list[Any]] = {}
    for param, axis in value.items():
        at = f"{where}.{param}"
        if isinstance(axis, dict) and set(axis) == {"grid"}:
            if not isinstance(axis["grid"], list) or not axis["grid"]:
                r.error(f"{at}.grid", "must be a nonempty array")
                continue
            out[param] = [r.json_value(v, f"{at}.grid") for v in axis["grid"]]
        elif isinstance(axis, dict) and set(axis) == {"value"}:
            out[param] = [r.json_value(axis["value"], f"{at}.value")]
        elif isinstance(axis, dict):
            r.error(at, "a parameter table must be exactly {value = ...} or {grid = [...]}")
        else:
            out[param] = [r.json_value(axis, at)]
    return out


def _owned_axes(r: Reader, value: Any, where: str, owners: tuple[str, ...]) -> Axes:
    if not isinstance(value, dict):
        r.error(where, "must be a table keyed by name")
        return {}
    out: Axes = {}
    for owner, params in value.items():
        if owner not in owners:
            r.error(f"{where}.{owner}", "is not selected by this experiment")
        out[owner] = _axes(r, params, f"{where}.{owner}")
    return out


def _case(r: Reader, value: Any, where: str, base: Case, sel: tuple) -> Case:
    keys = {"name": True, "dataset_parameters": False, "problem_parameters": False}
    t = r.table(value, where, keys | {"implementation_parameters": False})
    datasets, implementations = sel
    name = r.name(t.get("name"), f"{where}.name")
    ds = {owner: dict(axes) for owner, axes in base.dataset_parameters.items()}
    im = {owner: dict(axes) for owner, axes in base.implementation_parameters.items()}
    pp = dict(base.problem_parameters)
    # A case replaces the experiment's axes parameter by parameter.
    case_ds = _owned_axes(
        r, t.get("dataset_parameters", {}), f"{where}.dataset_parameters", datasets
    )
    for owner, axes in case_ds.items():
        ds[owner] = {**ds.get(owner, {}), **axes}
    case_im = _owned_axes(
        r,
        t.get("implementation_parameters", {}),
        f"{where}.implementation_parameters",
        implementations,
    )
    for owner, axes in case_im.items():
        im[owner] = {**im.get(owner, {}), **axes}
    pp.update(_axes(r, t.get("problem_parameters", {}), f"{where}.problem_parameters"))
    return Case(name, ds, pp, im)


EXPERIMENT_KEYS = {
    "name": True,
    "problem": True,
    "datasets": False,
    "implementations": True,
    "repetitions": False,
    "seed": False,
    "execution_policy": False,
    "dataset_parameters": False,
    "problem_parameters": False,
    "implementation_parameters": False,
    "cases": False,
}


def _experiment(r: Reader, value: Any, where: str, m: dict[str, Any]) -> Experiment:
    t = r.table(value, where, EXPERIMENT_KEYS)
    name = r.name(t.get("name"), f"{where}.name")
    problem = r.string(t.get("problem"), f"{where}.problem")
    if problem and problem not in m["problems"]:
        r.error(f"{where}.problem", f"no problem named {problem!r}")
    datasets = r.names(t.get("datasets", ["unit"]), f"{where}.datasets", m["datasets"], "dataset")
    impls = r.names(
        t.get("implementations"), f"{where}.implementations", m["impls"], "implementation"
    )
    for i, impl in enumerate(impls):
        if impl in m["impls"] and problem not in m["impls"][impl].problems:
            r.error(
                f"{where}.implementations[{i}]", f"{impl!r} does not declare problem {problem!r}"
            )
    reps, seed = t.get("repetitions", 1), t.get("seed", 0)
    if not is_safe_int(reps, 1):
        r.error(f"{where}.repetitions", "must be an integer >= 1")
        reps = 1  # the manifest is refused; this only keeps the reading going
    if not is_safe_int(seed):
        r.error(f"{where}.seed", "must be a safe integer >= 0")
        seed = 0
    policy_name = t.get("execution_policy", "default")
    policy = m["policies"].get(policy_name)
    if policy is None:
        r.error(f"{where}.execution_policy", f"no execution policy named {policy_name!r}")
        policy = ExecutionPolicy()
    sel = (datasets, impls)
    base = Case(
        "default",
        _owned_axes(r, t.get("dataset_parameters", {}), f"{where}.dataset_parameters", datasets),
        _axes(r, t.get("problem_parameters", {}), f"{where}.problem_parameters"),
        _owned_axes(
            r, t.get("implementation_parameters", {}), f"{where}.implementation_parameters", impls
        ),
    )
    raw_cases = t.get("cases")
    cases: tuple[Case, ...] = (base,)
    if raw_cases is not None:
        if not isinstance(raw_cases, list) or not raw_cases:
            r.error(f"{where}.cases", "must be a nonempty array of tables")
        else:
            cases = tuple(
                _case(r, c, f"{where}.cases[{i}]", base, sel) for i, c in enumerate(raw_cases)
            )
    return Experiment(name, problem, datasets, impls, int(reps or 1), int(seed or 0), policy, cases)


def _named(r: Reader, doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        r.error(key, "must be a table")
        return {}
    for name in value:
        if not NAME_RE.match(name):
            r.error(f"{key}.{name}", "names use letters, digits, '.', '_' and '-'")
    return value


TOP_KEYS = {"version": True, "name": True, "datasets": False, "problems": False}
TOP_KEYS |= {"implementations": False, "execution_policies": False, "experiments": True}
TOP_KEYS |= {"reference_implementation": False}


def read_manifest(path: str, doc: dict[str, Any], root: str | None = None) -> Manifest:
    """The manifest at ``path``; its relative paths resolve against ``root`` (default: the
    manifest's own directory; an A/B run's baseline side reads it against the baseline tree)."""
    r = Reader(path, root=root)
    r.table(doc, "$", TOP_KEYS)
    if doc.get("version") != MANIFEST_VERSION:
        r.error("version", f"must be {MANIFEST_VERSION}")
    name = r.string(doc.get("name"), "name")
    datasets = {n: _dataset(r, n, v) for n, v in _named(r, doc, "datasets").items()}
    if "unit" in datasets:
        r.error("datasets.unit", "'unit' is the built-in unit dataset")
    datasets["unit"] = DatasetDef("unit", "unit")
    derived.check_sources(r, datasets)
    problems = {n: _problem(r, n, v) for n, v in _named(r, doc, "problems").items()}
    impls = {
        n: _implementation(r, n, v, problems) for n, v in _named(r, doc, "implementations").items()
    }
    policies = {n: _policy(r, n, v) for n, v in _named(r, doc, "execution_policies").items()}
    policies.setdefault("default", ExecutionPolicy())
    m = {"datasets": datasets, "problems": problems, "impls": impls, "policies": policies}
    raw = doc.get("experiments", [])
    experiments: list[Experiment] = []
    if not isinstance(raw, list) or not raw:
        r.error("experiments", "must be a nonempty array of tables ([[experiments]])")
    else:
        experiments = [_experiment(r, e, f"experiments[{i}]", m) for i, e in enumerate(raw)]
    names = [e.name for e in experiments]
    if len(set(names)) != len(names):
        r.error("experiments", "experiment names must be unique")
    reference = None
    if "reference_implementation" in doc:
        reference = r.string(doc["reference_implementation"], "reference_implementation")
        if reference and reference not in impls:
            r.error("reference_implementation", f"no implementation named {reference!r}")
    if r.errors:
        raise ManifestError(r.errors)
    return Manifest(path, r.root, name, datasets, problems, impls, tuple(experiments), reference)
