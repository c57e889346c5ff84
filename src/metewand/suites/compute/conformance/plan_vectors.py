"""The Rust logical-planning vectors: our planner, fed the Rust test's definition-id catalog.

The Rust test plans a manifest with definition ids that are bytes repeated 32 times (so the
vector pins the planner alone, not the repository loader); we read the same manifest against a
repository, then replace the definition ids ``definitions_build.build`` computed with those.
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from metewand.suites.compute.conformance import repository
from metewand.suites.compute.conformance.core import Outcome, check, load

FAMILY = "identities as the planner builds them"
KINDS = {
    "dataset-definition": "datasets",
    "problem-definition": "problems",
    "implementation-definition": "implementations",
}


def _plan(vectors: Path, text: str, catalog: dict[str, dict[str, int]], dataset_free: bool) -> Any:
    from metewand.suites.compute import definitions_build
    from metewand.suites.compute.manifest_load import load as load_manifest
    from metewand.suites.compute.plan_expand import build_plan

    with tempfile.TemporaryDirectory(prefix="mw-rust-plan-") as tmp:
        manifest = load_manifest(
            str(repository.logical_plan(vectors, Path(tmp), text, dataset_free))
        )
        d = definitions_build.build(manifest)
    for kind, names in catalog.items():
        for name, byte in names.items():
            ident = f"mw1-{kind}-{bytes([byte]).hex() * 32}"
            if kind == "environment-definition":
                for impl in manifest.implementations.values():
                    if impl.launch.environment == name:
                        d.implementation_environments[impl.name] = ident
            else:
                getattr(d, KINDS[kind])[name] = ident
    return build_plan(manifest, definitions=d)


def _first_candidate(plan: Any, index: int = 0) -> list[Any]:
    candidates = list(dict.fromkeys(a.candidate_id for a in plan.attempts))
    return [a for a in plan.attempts if a.candidate_id == candidates[index]]


def _specs(attempts: list[Any]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for attempt in attempts:
        out.setdefault(attempt.repetition, []).append(attempt)
    return out


def _ids(attempts: list[Any]) -> list[str]:
    spec0 = _specs(attempts)[0]
    first = spec0[0]
    measured = [a for a in spec0 if a.role == "measured"]
    return [
        first.dataset.identity,
        first.problem_config_id,
        first.implementation_config_id,
        first.candidate_id,
        first.specification_id,
        str(measured[0].observation_slot_id),
        spec0[0].slot_id,
        spec0[2].slot_id,
    ]


def planner_outcomes(vectors: Path) -> list[Outcome]:
    data = load(vectors, "derived/logical-planning-v1.json")
    base, expanded, unit = data["cases"]
    plan = _plan(vectors, data["manifest"], data["catalog"], False)
    expect = base["expect"]
    got = _ids(_first_candidate(plan))
    out = [
        check(FAMILY, f"{label} of the first candidate", partial(_same, g, w))
        for label, g, w in zip(
            expect["ids_order"], got, expect["ids_of_first_candidate"], strict=True
        )
    ]
    out.append(check(FAMILY, "scheduling seed", lambda: _seed(plan, expect)))
    out.append(
        check(FAMILY, "cardinalities (C, C×I, C×I×M, C×I×(W+M))", lambda: _counts(plan, expect))
    )
    out.append(
        check(FAMILY, "implementation seeds shared per repetition block", lambda: _shared(plan))
    )
    out.append(check(FAMILY, expanded["name"], lambda: _stable(vectors, data, plan)))
    out.append(check(FAMILY, unit["name"], lambda: _unit(vectors, data)))
    return out


def _same(got: str, want: str) -> str | None:
    return None if got == want else got


def _seed(plan: Any, expect: dict[str, Any]) -> str | None:
    value = plan.scheduling_seeds[0][1]
    return None if value == expect["scheduling_seed_value"] else f"value {value}"


def _counts(plan: Any, expect: dict[str, Any]) -> str | None:
    candidates = list(dict.fromkeys(a.candidate_id for a in plan.attempts))
    got = [len(candidates)]
    for index in range(len(candidates)):
        specs = _specs(_first_candidate(plan, index))
        got.append(len(specs))
        for attempts in specs.values():
            got += [
                len([a for a in attempts if a.role == "measured"]),
                len(attempts),
                len([a for a in attempts if a.role == "warmup"]),
            ]
    want = [expect["candidates"]]
    for _ in range(expect["candidates"]):
        want.append(expect["specifications_per_candidate"])
        want += [
            expect["observation_slots_per_specification"],
            expect["attempt_slots_per_specification"],
            expect["warmup_slots_per_specification"],
        ] * expect["specifications_per_candidate"]
    return None if got == want else f"counts {got}"


def _shared(plan: Any) -> str | None:
    alpha, beta = (_specs(_first_candidate(plan, i)) for i in (0, 1))
    same = all(alpha[r][0].implementation_seed == beta[r][0].implementation_seed for r in alpha)
    distinct = alpha[0][0].implementation_seed != alpha[1][0].implementation_seed
    return None if same and distinct else "implementation seeds are not shared per block"


def _variant(vectors: Path, data: dict[str, Any], case: dict[str, Any], dataset_free: bool) -> Any:
    """The plan of a case's edited manifest with its catalog additions."""
    text = data["manifest"]
    for old, new in case["replace"]:
        text = text.replace(old, new)
    catalog = {k: dict(v) for k, v in data["catalog"].items()}
    for kind, names in case["catalog_add"].items():
        catalog.setdefault(kind, {}).update(names)
    return _plan(vectors, text, catalog, dataset_free)


def _stable(vectors: Path, data: dict[str, Any], baseline: Any) -> str | None:
    case = data["cases"][1]
    plan = _variant(vectors, data, case, False)
    before = _first_candidate(baseline)
    after = _first_candidate(plan, case["expect"]["same_as_first_case"]["candidate_index"])
    pairs = {
        (a.specification_id, a.slot_id, a.scheduling_priority, a.observation_slot_id)
        for a in before
    }
    kept = {
        (a.specification_id, a.slot_id, a.scheduling_priority, a.observation_slot_id) for a in after
    }
    lost = pairs - kept
    return (
        None
        if not lost and before[0].candidate_id == after[0].candidate_id
        else f"{len(lost)} ids changed"
    )


def _unit(vectors: Path, data: dict[str, Any]) -> str | None:
    case = data["cases"][2]
    plan = _variant(vectors, data, case, True)
    want = f"mw1-dataset-definition-{bytes([case['expect']['dataset_definition_byte']]).hex() * 32}"
    wrong = [
        a for a in plan.attempts if a.dataset.definition_id != want or a.dataset.parameters != {}
    ]
    return f"{len(wrong)} attempts not on the unit dataset" if wrong else None
