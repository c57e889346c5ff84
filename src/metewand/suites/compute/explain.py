"""``metewand plan --explain``: which dialect was read, the identities, what cannot run here."""

from __future__ import annotations

from collections.abc import Iterator

from metewand.suites.compute import identities
from metewand.suites.compute.definitions import execution_policy_id, observation_policy_id
from metewand.suites.compute.manifest import Manifest
from metewand.suites.compute.plan import Plan
from metewand.suites.compute.runnable import refusals


def explain(manifest: Manifest, plan: Plan) -> Iterator[str]:
    yield f"manifest: {manifest.path}"
    yield f"dialect: {manifest.dialect} ({manifest.dialect_reason})"
    yield (
        f"identities: mw{identities.IDENTITY_VERSION} records, recipe "
        f"{identities.IDENTITY_RECIPE} (the Rust metewand's version-1 field sets)"
    )
    d = plan.definitions
    if d is not None:
        yield "definitions:"
        for key, ident in sorted(d.datasets.items()):
            yield f"  dataset {manifest.datasets[key].name}: {ident}"
        for name in sorted(d.problems):
            yield f"  problem {name}: {d.problems[name]}"
            yield f"    contract: {d.contracts[name]}"
        for name, ident in sorted(d.implementations.items()):
            yield f"  implementation {name}: {ident}"
            yield f"    environment: {d.implementation_environments[name]}"
    seeds = {name: (value, digest) for name, value, digest in plan.scheduling_seeds}
    for exp in manifest.experiments:
        yield from _experiment(plan, exp.name, seeds.get(exp.name))
        yield f"  execution policy {exp.policy.name}: {execution_policy_id(exp.policy)}"
        yield (
            f"  observation policy {exp.observation_policy.name}: "
            f"{observation_policy_id(exp.observation_policy)}"
        )
    refused = refusals(manifest, plan)
    yield "runnable here: " + ("yes" if not refused else f"no ({len(refused)} refusals)")
    for line in refused:
        yield f"  {line}"


def _experiment(plan: Plan, name: str, seed: tuple[int, str] | None) -> Iterator[str]:
    attempts = [a for a in plan.attempts if a.experiment == name]
    candidates = {a.candidate_id for a in attempts}
    specifications = {a.specification_id for a in attempts}
    observations = {a.observation_slot_id for a in attempts if a.observation_slot_id}
    yield (
        f"experiment {name}: {len(candidates)} candidates, {len(specifications)} specifications, "
        f"{len(observations)} observation slots, {len(attempts)} attempt slots"
    )
    if seed is not None:
        yield f"  scheduling seed: {seed[0]} (digest {seed[1]})"
