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
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

from metewand import canonical
from metewand.suites.compute.definitions import Definitions
from metewand.suites.compute.manifest import (
    DatasetDef,
    ExecutionPolicy,
    Experiment,
    Manifest,
    ManifestError,
)
from metewand.suites.compute.manifest_guard import DEFAULT_MAX_ATTEMPTS, plan_size

SEED_DOMAIN = b"metewand-seed-v1"
SCHEDULING_POLICY_VERSION = 1


@dataclass(frozen=True)
class DatasetConfig:
    definition: DatasetDef
    parameters: dict[str, Any]
    seed: int
    identity: str  # mw1-dataset-configuration-…
    source: DatasetConfig | None = None  # transformed: the configuration it is derived from
    definition_id: str = ""  # mw1-dataset-definition-…
    seed_digest: str = ""  # the dataset seed's full derivation digest (hex)

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
    repetition: int  # implementation repetition
    role: str  # "measured" | "warmup"
    warmup_index: int | None
    policy: ExecutionPolicy
    problem_config_id: str = ""
    candidate_id: str = ""
    specification_id: str = ""  # mw1-logical-specification-…
    observation_slot_id: str | None = None  # measured slots: mw1-logical-observation-slot-…
    measurement_index: int | None = None
    scheduling_priority: str = ""  # 64 hex digits
    problem_contract_id: str = ""  # sent as problem_contract_id in prepare and evaluate

    def describe(self) -> dict[str, Any]:
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
            "problem_configuration": self.problem_config_id,
            "implementation": self.implementation,
            "implementation_parameters": self.implementation_parameters,
            "implementation_configuration": self.implementation_config_id,
            "candidate": self.candidate_id,
            "specification": self.specification_id,
            "observation_slot": self.observation_slot_id,
            "repetition": self.repetition,
            "measurement_index": self.measurement_index,
            "role": self.role,
            "timing_scope": self.policy.timing_scope,
        }


@dataclass(frozen=True)
class Plan:
    manifest: Manifest
    units: tuple[tuple[PlannedAttempt, ...], ...]  # in execution order
    definitions: Definitions | None = None
    scheduling_seeds: tuple[tuple[str, int, str], ...] = ()  # (experiment, value, digest)

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


def scheduling_seed(benchmark: str, experiment: str, seed: int) -> tuple[int, str]:
    return derive_seed(
        "scheduling",
        {
            "benchmark_name": benchmark,
            "experiment_name": experiment,
            "experiment_seed": seed,
            "scheduling_policy_version": SCHEDULING_POLICY_VERSION,
        },
    )


def build_plan(
    manifest: Manifest,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    definitions: Definitions | None = None,
) -> Plan:
    """Expand the manifest into ordered worker units; a plan of more than ``max_attempts``
    attempts is refused before anything is expanded (it would take minutes and grow memory
    without bound). ``definitions``: the definition ids to plan from (default: the manifest's
    own, ``definitions.build``)."""
    from metewand.suites.compute import definitions as defs
    from metewand.suites.compute.plan_expand import expand_experiment

    size = plan_size(manifest.experiments)
    if size > max_attempts:
        raise ManifestError(
            [
                f"{os.path.basename(manifest.path)}: experiments: the plan has {size:,} attempts, "
                f"more than the limit of {max_attempts:,} (raise it with --max-attempts)"
            ]
        )
    d = definitions or defs.build(manifest)
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
