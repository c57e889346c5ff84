"""Expand a manifest into attempts with stable keys and the Rust metewand's mw1 identities.

Expansion order (the Rust ``docs/configuration-expansion.md``): experiments → cases → datasets
(selection order) → dataset axes (parameters by name, members in declared order) → problem axes
→ implementations → implementation axes → implementation repetitions → warm-up slots, then one
measured slot per measurement repetition. Every record — dataset, problem and implementation
configurations, the logical candidate, the one-shot specification (with its implementation
seed), observation slots and attempt slots with their scheduling priorities — has the Rust field
set (``identities.RECORD_FIELDS``), built from the definition ids of ``definitions``.

A worker unit is the sequence of attempts one worker serves: one attempt without worker reuse;
with reuse a specification's warm-ups then its measured slots (Rust dialect), or a candidate's
warm-ups then every repetition (metewand dialect, whose warm-ups belong to the first repetition).

``build_plan`` is the entry; ``expand_experiment`` expands one experiment.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any

from metewand.suites.compute import definitions_build
from metewand.suites.compute import identities as ids
from metewand.suites.compute.definitions import (
    Definitions,
    execution_policy_id,
    observation_policy_id,
)
from metewand.suites.compute.manifest import Case, Experiment, Manifest, ManifestError
from metewand.suites.compute.manifest_guard import DEFAULT_MAX_ATTEMPTS, plan_size
from metewand.suites.compute.parameters import merge
from metewand.suites.compute.plan import (
    DatasetConfig,
    Plan,
    PlannedAttempt,
    derive_seed,
    scheduling_seed,
)
from metewand.suites.compute.schema_catalog import schema_messages

Unit = tuple[PlannedAttempt, ...]


def grid(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The Cartesian product of the axes: parameters by name, members in declared order."""
    names = sorted(axes)
    return [
        dict(zip(names, combo, strict=True))
        for combo in itertools.product(*(axes[n] for n in names))
    ]


def _validate(schema: Any, value: Any, where: str, errors: list[str]) -> None:
    errors.extend(f"{where}: {message}" for message in schema_messages(schema, value))


def dataset_config(
    m: Manifest, d: Definitions, key: str, params: dict[str, Any], seed: int, errors: list[str]
) -> DatasetConfig:
    ds = m.datasets[key]
    resolved = merge(ds.parameter_defaults, params)
    source = None
    if ds.kind == "transformed" and ds.source in m.datasets:
        # The derivation covers the source's own configuration: another source, another dataset.
        source = dataset_config(m, d, str(ds.source), ds.source_parameters, seed, errors)
        where = f"datasets.{ds.name}.source_parameters"
        _validate(m.datasets[str(ds.source)].parameter_schema, source.parameters, where, errors)
    definition = d.datasets[key]
    value, digest = derive_seed(
        "dataset",
        {"dataset_definition": definition, "dataset_parameters": resolved, "experiment_seed": seed},
    )
    identity = ids.record(
        "dataset-configuration",
        definition=definition,
        parameters=resolved,
        seed=ids.seed_record(value, digest),
    )
    return DatasetConfig(ds, resolved, value, identity, source, definition, digest)


@dataclass
class _Context:
    m: Manifest
    d: Definitions
    exp: Experiment
    scheduling_digest: str
    errors: list[str]
    seen: dict[str, str]
    policies: tuple[str, str]  # (execution-policy id, observation-policy id)


def expand_experiment(
    m: Manifest, d: Definitions, exp: Experiment, scheduling_digest: str, errors: list[str]
) -> list[Unit]:
    policies = (execution_policy_id(exp.policy), observation_policy_id(exp.observation_policy))
    ctx = _Context(m, d, exp, scheduling_digest, errors, {}, policies)
    problem = m.problems.get(exp.problem)
    units: list[Unit] = []
    for case in exp.cases:
        problem_grid = []
        for pp in grid(case.problem_parameters):
            pparams = merge(problem.parameter_defaults if problem else {}, pp)
            if problem is not None:
                _validate(problem.parameter_schema, pparams, f"problems.{problem.name}", errors)
            problem_grid.append(pparams)
        for key in exp.datasets:
            ds = m.datasets[key]
            for ds_params in grid(case.dataset_parameters.get(key, {})):
                dcfg = dataset_config(m, d, key, ds_params, exp.seed, errors)
                _validate(ds.parameter_schema, dcfg.parameters, f"datasets.{ds.name}", errors)
                for pparams in problem_grid:
                    for impl_name in exp.implementations:
                        units.extend(_implementation(ctx, case, dcfg, pparams, impl_name))
    return units


def _implementation(
    ctx: _Context, case: Case, dcfg: DatasetConfig, pparams: dict[str, Any], impl_name: str
) -> list[Unit]:
    m, d, exp = ctx.m, ctx.d, ctx.exp
    impl = m.implementations[impl_name]
    pcfg = ids.record(
        "problem-configuration", definition=d.problems[exp.problem], parameters=pparams
    )
    out: list[Unit] = []
    for ip in grid(case.implementation_parameters.get(impl_name, {})):
        iparams = merge(impl.parameter_defaults, ip)
        _validate(impl.parameter_schema, iparams, f"implementations.{impl_name}", ctx.errors)
        icfg = ids.record(
            "implementation-configuration",
            definition=d.implementations[impl_name],
            parameters=iparams,
            environment=d.implementation_environments[impl_name],
        )
        candidate = ids.record(
            "logical-candidate",
            dataset_configuration=dcfg.identity,
            problem_configuration=pcfg,
            implementation_configuration=icfg,
            execution_policy=ctx.policies[0],
            observation_policy=ctx.policies[1],
        )
        source = f"experiments.{exp.name}.cases.{case.name}"
        if candidate in ctx.seen:
            ctx.errors.append(f"{source}: duplicates a candidate of {ctx.seen[candidate]}")
            continue
        ctx.seen[candidate] = source
        coords = _Coords(case.name, dcfg, pparams, impl_name, iparams, icfg, pcfg, candidate)
        out.extend(_units(ctx, coords))
    return out


@dataclass(frozen=True)
class _Coords:
    case: str
    dcfg: DatasetConfig
    pparams: dict[str, Any]
    impl: str
    iparams: dict[str, Any]
    icfg: str
    pcfg: str
    candidate: str


def _units(ctx: _Context, c: _Coords) -> list[Unit]:
    exp = ctx.exp
    specs = [_specification(ctx, c, rep) for rep in range(exp.repetitions)]
    if not exp.policy.worker_reuse:
        return [(a,) for spec in specs for a in spec]
    if exp.warmups_per_specification:
        return [tuple(spec) for spec in specs]
    return [tuple(a for spec in specs for a in spec)]


def _specification(ctx: _Context, c: _Coords, rep: int) -> list[PlannedAttempt]:
    exp = ctx.exp
    seed, digest = derive_seed(
        "implementation",
        {
            "dataset_configuration": c.dcfg.identity,
            "experiment_seed": exp.seed,
            "implementation_repetition": rep,
            "problem_configuration": c.pcfg,
        },
    )
    spec = ids.record(
        "logical-specification",
        kind="one_shot",
        candidate=c.candidate,
        scientific_budget="none",
        implementation_repetition=rep,
        implementation_seed=ids.seed_record(seed, digest),
    )
    warmups = exp.policy.warmup_runs if exp.warmups_per_specification or rep == 0 else 0
    slots: list[tuple[dict[str, Any], int | None]] = [
        (ids.warmup_role(i), None) for i in range(warmups)
    ]
    for index in range(exp.measurement_repetitions):
        observation = ids.record(
            "logical-observation-slot", specification=spec, measurement_index=index
        )
        slots.append((ids.measured_role(observation), index))
    return [_attempt(ctx, c, rep, seed, spec, role, index) for role, index in slots]


def _attempt(
    ctx: _Context,
    c: _Coords,
    rep: int,
    seed: int,
    spec: str,
    role: dict[str, Any],
    index: int | None,
) -> PlannedAttempt:
    exp, d = ctx.exp, ctx.d
    priority = ids.scheduling_priority(ctx.scheduling_digest, role, spec)
    slot = ids.record(
        "logical-attempt-slot", specification=spec, role=role, scheduling_priority=priority
    )
    warmup = role.get("warmup_index")
    if warmup is not None:
        tail = f"w{warmup}" if rep == 0 else f"r{rep}w{warmup}"
    else:
        tail = f"r{rep}" if exp.measurement_repetitions == 1 else f"r{rep}m{index}"
    dcfg = c.dcfg
    key = f"{exp.name}/{c.case}/{dcfg.name}@{dcfg.identity[-10:]}/{c.impl}@{c.icfg[-10:]}/{tail}"
    return PlannedAttempt(
        key,
        slot,
        exp.name,
        c.case,
        dcfg,
        exp.problem,
        c.pparams,
        c.impl,
        c.iparams,
        c.icfg,
        seed,
        rep,
        role["kind"],
        warmup,
        exp.policy,
        problem_config_id=c.pcfg,
        candidate_id=c.candidate,
        specification_id=spec,
        observation_slot_id=role.get("observation_slot"),
        measurement_index=index,
        scheduling_priority=priority,
        problem_contract_id=d.contracts.get(exp.problem, ""),
    )


def build_plan(
    manifest: Manifest,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    definitions: Definitions | None = None,
) -> Plan:
    """Expand the manifest into ordered worker units; a plan of more than ``max_attempts``
    attempts is refused before anything is expanded (it would take minutes and grow memory
    without bound). ``definitions``: the definition ids to plan from (default: the manifest's
    own, ``definitions_build.build``)."""
    size = plan_size(manifest.experiments)
    if size > max_attempts:
        raise ManifestError(
            [
                f"{os.path.basename(manifest.path)}: experiments: the plan has {size:,} attempts, "
                f"more than the limit of {max_attempts:,} (raise it with --max-attempts)"
            ]
        )
    d = definitions or definitions_build.build(manifest)
    errors: list[str] = []
    units: list[tuple[PlannedAttempt, ...]] = []
    seeds = []
    for exp in manifest.experiments:
        value, digest = scheduling_seed(manifest.name, exp.name, exp.seed)
        seeds.append((exp.name, value, digest))
        exp_units = expand_experiment(manifest, d, exp, digest, errors)
        units.extend(_order(exp, exp_units))
    if errors:  # a transformed dataset's source is checked once per expansion: say it once
        raise ManifestError(list(dict.fromkeys(errors)))
    return Plan(manifest, tuple(units), d, tuple(seeds))


def _order(
    exp: Experiment, units: list[tuple[PlannedAttempt, ...]]
) -> list[tuple[PlannedAttempt, ...]]:
    """``randomized``: worker units by the scheduling priority of their first slot (the Rust
    priorities; adding unrelated slots never reorders existing ones)."""
    if exp.policy.run_order == "sequential":
        return units
    return sorted(units, key=lambda unit: unit[0].scheduling_priority)
