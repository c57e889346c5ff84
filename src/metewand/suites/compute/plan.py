"""The plan's records: dataset configurations, planned attempts in worker units, and the seeds
(``derive_seed``, ``scheduling_seed``); ``plan_expand.build_plan`` makes them from a manifest."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from metewand import canonical
from metewand.suites.compute.definitions import Definitions
from metewand.suites.compute.manifest import DatasetDef, ExecutionPolicy, Manifest

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
            **(ab if self.ab_side else {}),
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
