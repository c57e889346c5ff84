"""Expand a manifest into attempts with stable keys and mw1 identities.

Expansion order: experiments → cases → datasets (selection order) → dataset grid (parameters by
name, members in declared order) → problem grid → implementations → implementation grid →
repetitions. A worker unit is the sequence of attempts one worker serves: one attempt without
worker reuse; warm-ups followed by every repetition with reuse.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from dataclasses import dataclass
from typing import Any

from metewand import canonical
from metewand.suites.compute.manifest import (
    DatasetDef,
    ExecutionPolicy,
    Experiment,
    Manifest,
    ManifestError,
)
from metewand.suites.compute.manifest_guard import DEFAULT_MAX_ATTEMPTS, plan_size

SEED_DOMAIN = b"metewand-seed-v1"
PRIORITY_DOMAIN = b"metewand-scheduling-priority-v1"


@dataclass(frozen=True)
class DatasetConfig:
    definition: DatasetDef
    parameters: dict[str, Any]
    seed: int
    identity: str  # mw1-dataset-configuration-…
    source: DatasetConfig | None = None  # transformed: the configuration it is derived from

    @property
    def name(self) -> str:
        return self.definition.name


@dataclass(frozen=True)
class PlannedAttempt:
    key: str
    slot_id: str  # mw1-logical-attempt-slot-…
    experiment: str
    case: str
    dataset: DatasetConfig
    problem: str
    problem_parameters: dict[str, Any]
    implementation: str
    implementation_parameters: dict[str, Any]
    implementation_config_id: str
    implementation_seed: int
    repetition: int
    role: str  # "measured" | "warmup"
    warmup_index: int | None
    policy: ExecutionPolicy
    # an interleaved A/B run (suites.compute.ab): which tree this attempt runs, the pair it
    # belongs to (the same repetition of the other side) and which side of the pair runs first
    ab_side: str | None = None
    ab_pair: str | None = None
    ab_first: str | None = None

    def describe(self) -> dict[str, Any]:
        ab = {"ab": {"side": self.ab_side, "pair": self.ab_pair, "first": self.ab_first}}
        return {
            "key": self.key,
            "slot_id": self.slot_id,
            "experiment": self.experiment,
            "case": self.case,
            "dataset": self.dataset.name,
            "dataset_parameters": self.dataset.parameters,
            "dataset_configuration": self.dataset.identity,
            "problem": self.problem,
            "problem_parameters": self.problem_parameters,
            "implementation": self.implementation,
            "implementation_parameters": self.implementation_parameters,
            "repetition": self.repetition,
            "role": self.role,
            "timing_scope": self.policy.timing_scope,
            **(ab if self.ab_side else {}),
        }


@dataclass(frozen=True)
class Plan:
    manifest: Manifest
    units: tuple[tuple[PlannedAttempt, ...], ...]  # in execution order

    @property
    def attempts(self) -> list[PlannedAttempt]:
        return [a for unit in self.units for a in unit]

    def dataset_configs(self) -> list[DatasetConfig]:
        seen: dict[str, DatasetConfig] = {}
        for attempt in self.attempts:
            seen.setdefault(attempt.dataset.identity, attempt.dataset)
        return list(seen.values())


def derive_seed(role: str, fields: dict[str, Any]) -> tuple[int, str]:
    """53-bit seed and its derivation digest (hex) for ``role`` over canonical ``fields``."""
    digest = hashlib.sha256(
        SEED_DOMAIN + b"\x00" + role.encode() + b"\x00" + canonical.dumps(fields)
    ).digest()
    return int.from_bytes(digest[:8], "big") >> 11, digest.hex()


def merge(defaults: Any, supplied: Any) -> Any:
    """Recursive merge only where both sides are objects; otherwise the supplied value wins."""
    if isinstance(defaults, dict) and isinstance(supplied, dict):
        out = dict(defaults)
        for key, value in supplied.items():
            out[key] = merge(defaults.get(key), value) if key in defaults else value
        return out
    return supplied


def grid(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    names = sorted(axes)
    return [
        dict(zip(names, combo, strict=True))
        for combo in itertools.product(*(axes[n] for n in names))
    ]


def _validate(schema: dict[str, Any] | None, value: Any, where: str, errors: list[str]) -> None:
    if schema is None:
        return
    from jsonschema import Draft202012Validator

    for err in Draft202012Validator(schema).iter_errors(value):
        path = ".".join(str(p) for p in err.absolute_path) or "$"
        errors.append(f"{where}: {path}: {err.message}")


def build_plan(manifest: Manifest, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> Plan:
    """Expand the manifest into ordered worker units; a plan of more than ``max_attempts``
    attempts is refused before anything is expanded (it would take minutes and grow memory
    without bound)."""
    size = plan_size(manifest.experiments)
    if size > max_attempts:
        raise ManifestError(
            [
                f"{os.path.basename(manifest.path)}: experiments: the plan has {size:,} attempts, "
                f"more than the limit of {max_attempts:,} (raise it with --max-attempts)"
            ]
        )
    errors: list[str] = []
    units: list[tuple[PlannedAttempt, ...]] = []
    seen: dict[str, str] = {}
    for exp in manifest.experiments:
        exp_units = _expand_experiment(manifest, exp, errors, seen)
        units.extend(_order(manifest, exp, exp_units))
    if errors:  # a transformed dataset's source is checked once per expansion: say it once
        raise ManifestError(list(dict.fromkeys(errors)))
    return Plan(manifest, tuple(units))


def _dataset_config(
    ds: DatasetDef,
    params: dict[str, Any],
    seed: int,
    datasets: dict[str, DatasetDef],
    errors: list[str],
) -> DatasetConfig:
    resolved = merge(ds.parameter_defaults, params)
    definition: dict[str, Any] = {
        "version": 1,
        "kind": ds.kind,
        "materializer": ds.materializer.identity_record() if ds.materializer else None,
        "parameter_schema": ds.parameter_schema,
    }
    source = None
    if ds.kind == "transformed" and ds.source in datasets:
        # The derivation covers the source's own configuration: another source, another dataset.
        source_def = datasets[ds.source]
        source = _dataset_config(source_def, ds.source_parameters, seed, datasets, errors)
        where = f"datasets.{ds.name}.source_parameters"
        _validate(source_def.parameter_schema, source.parameters, where, errors)
        definition["source_configuration"] = source.identity
    if ds.kind == "acquired":
        definition["source"] = {"name": os.path.basename(str(ds.path)), "sha256": ds.sha256}
    dataset_def_id = canonical.identity("dataset-definition", definition)
    value, _ = derive_seed(
        "dataset",
        {
            "dataset_definition": dataset_def_id,
            "dataset_parameters": resolved,
            "experiment_seed": seed,
        },
    )
    ident = canonical.identity(
        "dataset-configuration",
        {"version": 1, "definition": dataset_def_id, "parameters": resolved, "seed": value},
    )
    return DatasetConfig(ds, resolved, value, ident, source)


def _expand_experiment(
    m: Manifest, exp: Experiment, errors: list[str], seen: dict[str, str]
) -> list[tuple[PlannedAttempt, ...]]:
    problem = m.problems.get(exp.problem)
    units: list[tuple[PlannedAttempt, ...]] = []
    for case in exp.cases:
        for ds_name in exp.datasets:
            ds = m.datasets[ds_name]
            for ds_params in grid(case.dataset_parameters.get(ds_name, {})):
                dcfg = _dataset_config(ds, ds_params, exp.seed, m.datasets, errors)
                _validate(ds.parameter_schema, dcfg.parameters, f"datasets.{ds_name}", errors)
                for pp in grid(case.problem_parameters):
                    pparams = merge(problem.parameter_defaults if problem else {}, pp)
                    for impl_name in exp.implementations:
                        units.extend(
                            _expand_impl(
                                m, exp, case.name, dcfg, pparams, impl_name, case, errors, seen
                            )
                        )
    return units


def _expand_impl(
    m: Manifest,
    exp: Experiment,
    case_name: str,
    dcfg: DatasetConfig,
    pparams: dict[str, Any],
    impl_name: str,
    case: Any,
    errors: list[str],
    seen: dict[str, str],
) -> list[tuple[PlannedAttempt, ...]]:
    impl = m.implementations[impl_name]
    out: list[tuple[PlannedAttempt, ...]] = []
    for ip in grid(case.implementation_parameters.get(impl_name, {})):
        iparams = merge(impl.parameter_defaults, ip)
        _validate(impl.parameter_schema, iparams, f"implementations.{impl_name}", errors)
        icfg = canonical.identity(
            "implementation-configuration",
            {"version": 1, "launch": impl.launch.identity_record(), "parameters": iparams},
        )
        candidate = canonical.identity(
            "logical-candidate",
            {
                "version": 1,
                "experiment": exp.name,
                "dataset_configuration": dcfg.identity,
                "problem": exp.problem,
                "problem_parameters": pparams,
                "implementation_configuration": icfg,
                "execution_policy": exp.policy.identity_record(),
            },
        )
        source = f"experiments.{exp.name}.cases.{case_name}"
        if candidate in seen:
            errors.append(f"{source}: duplicates a candidate of {seen[candidate]}")
            continue
        seen[candidate] = source
        attempts = [
            _attempt(
                exp, case_name, dcfg, pparams, impl_name, iparams, icfg, candidate, rep, role, w
            )
            for rep, role, w in _slots(exp)
        ]
        if exp.policy.worker_reuse:
            out.append(tuple(attempts))
        else:
            out.extend((a,) for a in attempts)
    return out


def _slots(exp: Experiment) -> list[tuple[int, str, int | None]]:
    warmups = [(0, "warmup", i) for i in range(exp.policy.warmup_runs)]
    return warmups + [(rep, "measured", None) for rep in range(exp.repetitions)]


def _attempt(
    exp: Experiment,
    case_name: str,
    dcfg: DatasetConfig,
    pparams: dict[str, Any],
    impl_name: str,
    iparams: dict[str, Any],
    icfg: str,
    candidate: str,
    rep: int,
    role: str,
    warmup_index: int | None,
) -> PlannedAttempt:
    seed, _ = derive_seed(
        "implementation",
        {
            "dataset_configuration": dcfg.identity,
            "experiment_seed": exp.seed,
            "implementation_repetition": rep,
            "problem_configuration": canonical.identity(
                "problem-configuration",
                {"version": 1, "problem": exp.problem, "parameters": pparams},
            ),
        },
    )
    slot = canonical.identity(
        "logical-attempt-slot",
        {
            "version": 1,
            "candidate": candidate,
            "repetition": rep,
            "role": role,
            "warmup": warmup_index,
        },
    )
    tail = f"r{rep}" if role == "measured" else f"w{warmup_index}"
    key = (
        f"{exp.name}/{case_name}/{dcfg.name}@{dcfg.identity[-10:]}/{impl_name}@{icfg[-10:]}/{tail}"
    )
    return PlannedAttempt(
        key, slot, exp.name, case_name, dcfg, exp.problem, pparams, impl_name, iparams, icfg, seed,
        rep, role, warmup_index, exp.policy,
    )  # fmt: skip


def _order(
    m: Manifest, exp: Experiment, units: list[tuple[PlannedAttempt, ...]]
) -> list[tuple[PlannedAttempt, ...]]:
    if exp.policy.run_order == "sequential":
        return units
    _, digest = derive_seed(
        "scheduling",
        {
            "benchmark_name": m.name,
            "experiment_name": exp.name,
            "experiment_seed": exp.seed,
            "scheduling_policy_version": 1,
        },
    )

    def priority(unit: tuple[PlannedAttempt, ...]) -> bytes:
        anchor = unit[0].slot_id.encode()
        return hashlib.sha256(
            PRIORITY_DOMAIN + b"\x00" + bytes.fromhex(digest) + b"\x00" + anchor
        ).digest()

    return sorted(units, key=priority)
