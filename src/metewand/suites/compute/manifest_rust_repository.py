"""The repository pass of a Rust-dialect manifest: contracts, schemas, source bundles.

Everything the manifest names is read from the repository (the manifest's directory) and must
resolve inside it: each problem's contract file, every schema the datasets, implementations and
contracts name, and — transitively — every repository-local schema those reach through ``$ref``
(a reference with a URI scheme or an absolute path is not repository-local and is left to the
catalog, which refuses it when it is not there). The schemas form one offline ``SchemaCatalog``;
each contract is validated against it; every declared source bundle is expanded once, so a
pattern that matches nothing or a link that escapes is an error of ``plan``, not of a run.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote_to_bytes

from metewand import canonical
from metewand.suites.compute import contract as contracts
from metewand.suites.compute.manifest import Launch, ProblemDef
from metewand.suites.compute.manifest_rust_reader import WORKER_KEYS, RustReader, worker
from metewand.suites.compute.schema_catalog import BoundSchema, SchemaCatalog, SchemaCatalogError
from metewand.suites.compute.source_bundle import SourceBundleError, expand_source_bundle

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class ProblemShape:
    contract_path: str
    parameter_defaults: dict[str, Any]
    defaults_declared: bool
    evaluator: Launch


@dataclass(frozen=True)
class Repository:
    catalog: SchemaCatalog
    problems: dict[str, ProblemDef]


def problem_shapes(r: RustReader, raw: dict[str, Any]) -> dict[str, ProblemShape]:
    out = {}
    for name, value in raw.items():
        where = f"problems.{name}"
        t = r.table(
            value, where, ("contract", "parameter_defaults", "evaluator"), ("contract", "evaluator")
        )
        defaults = t.get("parameter_defaults")
        evaluator = r.table(t.get("evaluator", {}), f"{where}.evaluator", WORKER_KEYS)
        out[name] = ProblemShape(
            r.repo_path(t.get("contract", ""), f"{where}.contract"),
            r.json_object(defaults, f"{where}.parameter_defaults") if defaults is not None else {},
            defaults is not None,
            worker(r, evaluator, f"{where}.evaluator"),
        )
    return out


def read_text(r: RustReader, rel: str, where: str) -> str | None:
    """A repository file's text, or None after recording why it cannot be read."""
    full = os.path.join(r.root, rel)
    resolved = os.path.realpath(full)
    if not resolved.startswith(os.path.realpath(r.root) + os.sep):
        r.error(where, f"{rel} resolves outside the repository to {resolved}")
        return None
    try:
        with open(resolved, "rb") as fh:
            return fh.read().decode("utf-8")
    except OSError as exc:
        r.error(where, f"cannot read {rel}: {exc.strerror}")
    except UnicodeDecodeError:
        r.error(where, f"{rel} is not valid UTF-8")
    return None


def load(r: RustReader, shapes: dict[str, Any], problems: dict[str, ProblemShape]) -> Repository:
    parsed: dict[str, contracts.ProblemContract] = {}
    for name, shape in problems.items():
        text = read_text(r, shape.contract_path, f"problems.{name}.contract")
        if text is not None:
            try:
                parsed[name] = contracts.parse(shape.contract_path, text)
            except contracts.ContractError as exc:
                r.errors.extend(f"{r.file}: problems.{name}.contract: {e}" for e in exc.errors)
    roots = {p for p in r.schema_paths.values() if p}
    for contract in parsed.values():
        roots.update(contract.schema_paths())
    documents = _schema_documents(r, roots)
    catalog = SchemaCatalog([])
    if not r.errors:
        try:
            catalog = SchemaCatalog(sorted(documents.items()))
        except SchemaCatalogError as exc:
            r.error(f"schema {exc.path}", str(exc).removeprefix(f"{exc.path}: "))
    for name, contract in parsed.items():
        if r.errors:
            break
        try:
            contracts.validate(contract, catalog)
        except contracts.ContractError as exc:
            r.errors.extend(f"{r.file}: problems.{name}.contract: {e}" for e in exc.errors)
    _check_source_bundles(r, shapes, problems)
    bound = {
        name: _problem(name, problems[name], parsed[name], catalog)
        for name in problems
        if name in parsed and not r.errors
    }
    return Repository(catalog, bound)


def _problem(
    name: str, shape: ProblemShape, contract: contracts.ProblemContract, catalog: SchemaCatalog
) -> ProblemDef:
    return ProblemDef(
        name,
        shape.evaluator,
        BoundSchema(catalog, contract.result_schema),
        BoundSchema(catalog, contract.metric_schema),
        shape.parameter_defaults,
        shape.defaults_declared,
        contract=contract,
        parameter_schema=BoundSchema(catalog, contract.parameter_schema),
    )


def bind(
    r: RustReader, section: str, definitions: dict[str, Any], catalog: SchemaCatalog
) -> dict[str, Any]:
    """Definitions with their schema paths bound to the catalog."""
    out = {}
    for name, definition in definitions.items():
        fields = {
            key: BoundSchema(catalog, path)
            for (sec, owner, key), path in r.schema_paths.items()
            if sec == section and owner == name
        }
        out[name] = replace(definition, **fields)
    return out


def _schema_documents(r: RustReader, roots: set[str]) -> dict[str, Any]:
    """Every root schema and every repository-local schema reachable from one by ``$ref``."""
    documents: dict[str, Any] = {}
    pending = sorted(roots)
    while pending:
        path = pending.pop(0)
        if path in documents:
            continue
        text = read_text(r, path, f"schema {path}")
        if text is None:
            documents[path] = None
            continue
        try:
            documents[path] = canonical.loads(text)
        except canonical.CanonicalJSONError as exc:
            r.error(f"schema {path}", f"is not valid JSON: {exc}")
            documents[path] = None
            continue
        for target in sorted(external_references(r, path, documents[path])):
            if target not in documents:
                pending.append(target)
    return {p: d for p, d in documents.items() if d is not None}


def external_references(r: RustReader | None, document_path: str, document: Any) -> set[str]:
    """The repository paths a schema's relative ``$ref``s name (fragment dropped)."""
    out = set()
    for ref in _refs(document):
        target = ref.split("#", 1)[0]
        if not target or target.startswith("/") or _SCHEME.match(target):
            continue
        resolved = resolve_reference(document_path, target)
        if resolved is None:
            if r is not None:
                r.error(f"schema {document_path}", f"contains invalid repository reference {ref!r}")
            continue
        out.add(resolved)
    return out


def resolve_reference(document_path: str, reference: str) -> str | None:
    try:
        decoded = unquote_to_bytes(reference).decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\\" in decoded or "?" in decoded:
        return None
    parts = document_path.split("/")[:-1]
    for part in decoded.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts) if parts else None


def _refs(value: Any) -> list[str]:
    out, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("$ref"), str):
                out.append(item["$ref"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


def _check_source_bundles(
    r: RustReader, shapes: dict[str, Any], problems: dict[str, ProblemShape]
) -> None:
    declared: list[tuple[str, tuple[str, ...]]] = []
    for name, dataset in shapes["datasets"].items():
        if dataset.source_patterns:
            declared.append((f"datasets.{name}.sources", dataset.source_patterns))
        if dataset.materializer is not None and dataset.materializer.source_patterns:
            declared.append((f"datasets.{name}.sources", dataset.materializer.source_patterns))
    for name, impl in shapes["implementations"].items():
        if impl.launch.source_patterns:
            declared.append((f"implementations.{name}.sources", impl.launch.source_patterns))
    for name, shape in problems.items():
        if shape.evaluator.source_patterns:
            declared.append((f"problems.{name}.evaluator.sources", shape.evaluator.source_patterns))
    for where, patterns in declared:
        try:
            expand_source_bundle(r.root, patterns)
        except SourceBundleError as exc:
            r.error(where, str(exc))
