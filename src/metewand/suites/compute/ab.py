"""Interleaved A/B runs: ``metewand run MANIFEST --ab-baseline PATH``.

Every planned attempt runs twice: once with the implementation from the baseline tree PATH (the
other checkout's copy of the manifest's directory), once from the current tree, back to back,
on the same dataset instance (the same dataset configuration and seeds), each on its own fresh
worker. Which side runs first alternates from one repetition to the next, starting on a side
drawn from the experiment's seed for each candidate, so neither side always runs on a host that
the other one just warmed up. Datasets, the evaluator and its schemas come from the current tree
for both sides: the same input, judged by the same judge.

The two halves are one scheduling unit, so they run one after the other in one slot (and on one
Dask host). Each side has its own attempt key (``…/r3/base``, ``…/r3/new``), slot identity and
implementation configuration identity (its launch, read against its own tree), and every row
says which side it is and which pair it belongs to (``ab``: side, pair, first, session). The run
manifest records both trees (path, the implementations' configuration identities, git state).
A pair cut by a kill between its halves is finished by ``--resume`` in a later session; its
rows say so (``ab.session``) and ``compare --ab`` leaves it out instead of pairing two halves that
did not run back to back.

Worker reuse (one worker serving every repetition) is refused: its repetitions could not
alternate between the two trees without keeping two workers alive at once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from typing import Any

from metewand import canonical
from metewand.suites.compute import definitions_build
from metewand.suites.compute import identities as ids
from metewand.suites.compute.definitions import Definitions
from metewand.suites.compute.manifest import Manifest, ManifestError
from metewand.suites.compute.manifest_load import load
from metewand.suites.compute.plan import Plan, PlannedAttempt

SIDES = ("base", "new")
ORDER_DOMAIN = b"metewand-ab-order-v1"


@dataclass(frozen=True)
class Baseline:
    """The baseline tree and the current manifest read against it."""

    path: str  # absolute: the baseline's copy of the manifest's directory
    manifest: Manifest
    definitions: Definitions  # its definition ids (the implementations' source bundles)


def load_baseline(manifest_path: str, path: str) -> Baseline:
    """The manifest at ``manifest_path`` with its paths resolved in the tree at ``path`` (a
    directory, or a manifest file in it). Raises ManifestError naming --ab-baseline."""
    root = os.path.abspath(path)
    if os.path.isfile(root):
        root = os.path.dirname(root)
    if not os.path.isdir(root):
        raise ManifestError([f"--ab-baseline {path}: not a directory"])
    try:
        manifest = load(manifest_path, root=root)
    except ManifestError as exc:
        raise ManifestError([f"--ab-baseline {path}: {line}" for line in exc.errors]) from None
    return Baseline(root, manifest, definitions_build.build(manifest))


def check_plan(plan: Plan) -> None:
    """Refuse what an interleaved A/B run cannot do (ManifestError, exit 2)."""
    reused = sorted({a.experiment for a in plan.attempts if a.policy.worker_reuse})
    if reused:
        raise ManifestError(
            [
                f"--ab-baseline: experiment(s) {', '.join(reused)} reuse one worker for every "
                "repetition, so the two trees could not alternate; use a policy without "
                "worker_reuse for an A/B run"
            ]
        )


def _config_id(baseline: Baseline, attempt: PlannedAttempt) -> str:
    """The baseline side's implementation configuration identity, as the planner makes the
    current side's (``plan_expand``), from the baseline tree's definitions."""
    d, name = baseline.definitions, attempt.implementation
    return ids.record(
        "implementation-configuration",
        definition=d.implementations[name],
        parameters=attempt.implementation_parameters,
        environment=d.implementation_environments[name],
    )


def _sided(kind: str, identity: str | None, side: str) -> str | None:
    """A logical identity of one side of a pair: the planned one with the side in it (the two
    halves are two attempts, never one slot run twice)."""
    if identity is None:
        return None
    return canonical.identity(kind, {"version": 1, "planned": identity, "ab_side": side})


def _first_side(attempt: PlannedAttempt, pair: str) -> str:
    """Alternates with the repetition; the starting side is drawn per candidate from the seed."""
    candidate = pair.rsplit("/", 1)[0]
    digest = hashlib.sha256(ORDER_DOMAIN + b"\x00" + candidate.encode()).digest()
    start = digest[0] & 1
    if attempt.role == "measured":
        index = attempt.repetition + (attempt.measurement_index or 0)
    else:
        index = attempt.warmup_index or 0
    return SIDES[(index + start) % 2]


def _side(
    attempt: PlannedAttempt, side: str, pair: str, first: str, config_id: str
) -> PlannedAttempt:
    prefix, impl_part, tail = attempt.key.rsplit("/", 2)
    name = impl_part.split("@", 1)[0]
    return dataclasses.replace(
        attempt,
        key=f"{prefix}/{name}@{config_id[-10:]}/{tail}/{side}",
        slot_id=str(_sided("logical-attempt-slot", attempt.slot_id, side)),
        observation_slot_id=_sided("logical-observation-slot", attempt.observation_slot_id, side),
        candidate_id=str(_sided("logical-candidate", attempt.candidate_id, side)),
        specification_id=str(_sided("logical-specification", attempt.specification_id, side)),
        implementation_config_id=config_id,
        ab_side=side,
        ab_pair=pair,
        ab_first=first,
    )


def ab_plan(plan: Plan, baseline: Baseline) -> Plan:
    """The plan with each attempt doubled into a pair of worker units, first side first, pairs
    in the plan's own (seeded) order."""
    check_plan(plan)
    units: list[tuple[PlannedAttempt, ...]] = []
    for unit in plan.units:
        for attempt in unit:
            prefix, impl_part, tail = attempt.key.rsplit("/", 2)
            pair = f"{prefix}/{impl_part.split('@', 1)[0]}/{tail}"
            first = _first_side(attempt, pair)
            config = {
                "base": _config_id(baseline, attempt),
                "new": attempt.implementation_config_id,
            }
            sides = {side: _side(attempt, side, pair, first, config[side]) for side in SIDES}
            second = "new" if first == "base" else "base"
            units += [(sides[first],), (sides[second],)]
    return dataclasses.replace(plan, units=tuple(units))


def pairs_of(plan: Plan, done: set[str]) -> list[list[str]]:
    """Each pair's keys still to run, first side first (a pair half done keeps its other half)."""
    pairs: dict[str, list[str]] = {}
    for unit in plan.units:
        for attempt in unit:
            if attempt.key not in done and attempt.ab_pair is not None:
                pairs.setdefault(attempt.ab_pair, []).append(attempt.key)
    return list(pairs.values())


def manifest_facts(baseline: Baseline, current: Manifest, plan: Plan) -> dict[str, Any]:
    """Both trees, for the run manifest: where they are, each implementation's configuration
    identity per side, and each tree's git state."""
    from pathlib import Path

    from metewand.runtime.provenance import git_state

    configs: dict[str, dict[str, str]] = {}
    for attempt in plan.attempts:
        if attempt.ab_side:
            configs.setdefault(attempt.implementation, {})[attempt.ab_side] = (
                attempt.implementation_config_id
            )
    return {
        "baseline_tree": baseline.path,
        "current_tree": current.root,
        "implementation_configurations": configs,
        "git": {"base": git_state(Path(baseline.path)), "new": git_state(Path(current.root))},
        "order": "alternating per repetition, first side drawn per candidate",
    }
