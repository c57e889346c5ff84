"""Families on manifests, contracts and plans: manifest, problem contracts, and identities as
the planner builds them."""

from __future__ import annotations

import tempfile
import tomllib
from functools import partial
from pathlib import Path
from typing import Any

from metewand.suites.compute.conformance import repository
from metewand.suites.compute.conformance.core import Outcome, check, load

PLANNER = "identities as the planner builds them"


def all_families(vectors: Path) -> list[Outcome]:
    return [*manifests(vectors), *contracts(vectors), *planner(vectors)]


# -- manifest --------------------------------------------------------------------------------


def manifests(vectors: Path) -> list[Outcome]:
    data = load(vectors, "derived/manifest-parsing-v1.json")
    return [
        check("manifest", c["name"], partial(_manifest_case, vectors, c)) for c in data["cases"]
    ]


def _manifest_case(vectors: Path, case: dict[str, Any]) -> str | None:
    expect = case["expect"]
    if case.get("repository"):
        errors = _plan_errors(vectors)
    else:
        text = (
            (vectors / case["fixture"]).read_text("utf-8") if "fixture" in case else case["source"]
        )
        errors = _parse_errors(text, expect.get("counts"))
    accepted = not errors
    if accepted != expect["accepted"]:
        return f"accepted={accepted}: {'; '.join(errors)[:300]}"
    wanted = expect.get("message_contains")
    if wanted and not any(wanted in e for e in errors):
        return f"refused, but no message says {wanted!r}: {'; '.join(errors)[:300]}"
    return None


def _parse_errors(text: str, counts: dict[str, int] | None) -> list[str]:
    from metewand.suites.compute.manifest_rust import parse_shapes

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return [f"invalid TOML: {exc}"]
    shapes = parse_shapes("/repository/metewand.toml", doc)
    errors = list(shapes.reader.errors)
    for table, count in (counts or {}).items():
        got = len(
            shapes.problems
            if table == "problems"
            else shapes.experiments
            if table == "experiments"
            else shapes.tables[table]
        )
        if got != count:
            errors.append(f"{table}: {got} definitions, not {count}")
    return errors


def _plan_errors(vectors: Path) -> list[str]:
    from metewand.suites.compute.manifest import ManifestError
    from metewand.suites.compute.manifest_load import load as load_manifest
    from metewand.suites.compute.plan_expand import build_plan

    with tempfile.TemporaryDirectory(prefix="mw-rust-") as tmp:
        manifest = repository.complete(vectors, Path(tmp))
        try:
            build_plan(load_manifest(str(manifest)))
        except ManifestError as exc:
            return exc.errors
    return []


# -- problem contracts -------------------------------------------------------------------------


def contracts(vectors: Path) -> list[Outcome]:
    data = load(vectors, "derived/problem-contracts-v1.json")
    text = (vectors / data["contract"]).read_text("utf-8")
    return [
        check(
            "problem contracts",
            c["name"],
            partial(_contract_case, vectors, text, data["contract_path"], c),
        )
        for c in data["cases"]
    ]


def _contract_case(vectors: Path, text: str, path: str, case: dict[str, Any]) -> str | None:
    from metewand.suites.compute import contract as contracts_module
    from metewand.suites.compute.schema_catalog import SchemaCatalog

    for old, new in case["replace"]:
        text = text.replace(old, new)
    documents = dict(repository.CONTRACT_SCHEMAS)
    documents["schemas/semantics.json"] = load(vectors, repository.SEMANTICS)
    documents.pop(case.get("omit_schema", ""), None)
    expect = case["expect"]
    try:
        contract = contracts_module.parse(path, text)
        contracts_module.validate(contract, SchemaCatalog(sorted(documents.items())))
    except contracts_module.ContractError as exc:
        if expect.get("error") != exc.kind:
            return f"{exc.kind}: {exc} (Rust: {expect.get('error', 'accepted')})"
        wanted = expect.get("message_contains")
        return None if not wanted or wanted in str(exc) else f"message lacks {wanted!r}: {exc}"
    if "error" in expect:
        return f"accepted (Rust: {expect['error']})"
    facts = {
        "dataset_schemas": len(contract.dataset_schemas),
        "allowed_timing_scopes": len(contract.allowed_timing_scopes),
        "reference_cases": len(contract.reference_cases),
        "validity.nonfinite": contract.semantics["validity"].get("nonfinite"),
        "one_shot_completion.maximum_error": contract.semantics["one_shot_completion"].get(
            "maximum_error"
        ),
    }
    wrong = {k: facts[k] for k, v in expect.items() if k in facts and facts[k] != v}
    return f"differs: {wrong}" if wrong else None


# -- the planner ---------------------------------------------------------------------------------


def planner(vectors: Path) -> list[Outcome]:
    from metewand.suites.compute.conformance.plan_vectors import planner_outcomes

    return planner_outcomes(vectors)
