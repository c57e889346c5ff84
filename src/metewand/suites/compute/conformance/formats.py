"""Families on bytes and records: canonical JSON, identity recipes, seeds, schemas, the
local-tree hash and the measurements payload."""

from __future__ import annotations

import os
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from metewand import canonical
from metewand.suites.compute import identities as ids
from metewand.suites.compute.conformance.core import Outcome, check, load


def all_families(vectors: Path) -> list[Outcome]:
    return [
        *canonical_json(vectors),
        *identity_recipes(vectors),
        *seeds(vectors),
        *schema_validation(vectors),
        *local_tree(vectors),
        *measurements(vectors),
    ]


def canonical_json(vectors: Path) -> list[Outcome]:
    data = load(vectors, "fixtures/canonical-json/v1.json")
    out = []
    for v in data["accepted"]:

        def accepted(v: dict[str, Any] = v) -> str | None:
            got = canonical.dumps(canonical.loads(v["input"])).decode()
            return None if got == v["canonical"] else f"wrote {got}"

        out.append(check("canonical JSON", v["name"], accepted))
    for v in data["rejected"]:

        def rejected(v: dict[str, Any] = v) -> str | None:
            try:
                canonical.loads(v["input"])
            except canonical.CanonicalJSONError as exc:
                return None if exc.kind == v["kind"] else f"rejected as {exc.kind}"
            return f"accepted (Rust: {v['kind']})"

        out.append(check("canonical JSON", v["name"], rejected))
    return out


def identity_recipes(vectors: Path) -> list[Outcome]:
    """Each record rebuilt from its fields through our field-set table, then hashed."""
    data = load(vectors, "fixtures/identities/v1.json")
    out = []
    for name, v in data["vectors"].items():

        def rebuilt(v: dict[str, Any] = v) -> str | None:
            body = canonical.loads(v["canonical"])
            if v["kind"] in ids.RESOURCE_KINDS:
                got = ids.resource(v["kind"], body["value"])
            else:
                fields = {k: x for k, x in body.items() if k != "version"}
                mine = canonical.dumps(ids.record_body(v["kind"], fields)).decode()
                if mine != v["canonical"]:
                    return f"canonical bytes differ: {mine}"
                got = ids.record(v["kind"], **fields)
            return None if got == v["identity"] else f"id {got}"

        out.append(check("identity recipes", name, rebuilt))
    return out


def seeds(vectors: Path) -> list[Outcome]:
    from metewand.suites.compute.plan import derive_seed

    data = load(vectors, "fixtures/seeds/v1.json")
    fields = {
        "dataset": ("dataset_definition", "dataset_parameters", "experiment_seed"),
        "implementation": (
            "dataset_configuration",
            "experiment_seed",
            "implementation_repetition",
            "problem_configuration",
        ),
        "scheduling": (
            "benchmark_name",
            "experiment_name",
            "experiment_seed",
            "scheduling_policy_version",
        ),
    }
    out = []
    for role, names in fields.items():
        for v in data[role]:

            def seed(v: dict[str, Any] = v, role: str = role, names: tuple = names) -> str | None:
                given = {n: v[n] for n in names}
                if canonical.dumps(given).decode() != v["canonical_fields"]:
                    return "canonical fields differ"
                value, digest = derive_seed(role, given)
                ok = (value, digest) == (v["value"], v["digest"])
                return None if ok else f"value {value}, digest {digest}"

            out.append(check("seeds", f"{role}: {v['name']}", seed))
    return out


def schema_validation(vectors: Path) -> list[Outcome]:
    from metewand.suites.compute.conformance.schemas import schema_case

    data = load(vectors, "derived/schema-validation-v1.json")
    documents = [
        (path, load(vectors, f"fixtures/schema-validation/v1/{file}"))
        for path, file in data["catalog"]
    ]
    return [
        check("schema validation", case["name"], partial(schema_case, documents, case))
        for case in data["cases"]
    ]


def local_tree(vectors: Path) -> list[Outcome]:
    from metewand.suites.compute.source_bundle import local_tree_sha256

    def digest(case: dict[str, Any]) -> str | None:
        with tempfile.TemporaryDirectory(prefix="mw-tree-") as root:
            for entry in case["tree"]:
                path = os.path.join(root, entry["path"])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                if entry["kind"] == "directory":
                    os.makedirs(path, exist_ok=True)
                elif entry["kind"] == "symlink":
                    os.symlink(entry["target"], path)
                else:
                    Path(path).write_bytes(bytes.fromhex(entry["content_hex"]))
                    os.chmod(path, int(entry["mode"], 8))
            got = local_tree_sha256(root)
        return None if got == case["sha256"] else f"digest {got}"

    data = load(vectors, "derived/local-tree-v1.json")
    return [check("local-tree hash", c["name"], partial(digest, c)) for c in data["cases"]]


def measurements(vectors: Path) -> list[Outcome]:
    from metewand.measure import forms
    from metewand.suites.compute.payload import ExecutionMeasurements, PayloadError

    def verdict(case: dict[str, Any]) -> str | None:
        try:
            if case["kind"] == "form":
                forms.from_json(case["input"])
            else:
                ExecutionMeasurements.from_json(case["input"])
        except (PayloadError, forms.FormError) as exc:
            return None if not case["valid"] else f"refused: {exc}"
        return None if case["valid"] else "accepted"

    data = load(vectors, "derived/measurements-document-v1.json")
    return [check("measurements payload", c["name"], partial(verdict, c)) for c in data["cases"]]
