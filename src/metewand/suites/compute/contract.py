"""Problem contracts (the Rust metewand's ``docs/problem-contracts.md``), first-class.

A contract is a TOML file: ``version = 1``, ``name``, ``family`` (an open tag), the
``parameter_schema``, ``dataset_schemas`` (may be empty: a dataset-free problem),
``result_schema``, ``metric_schema`` and ``semantics_schema`` repository paths,
``allowed_timing_scopes`` (non-empty, unique), ``supported_budgets = ["none"]``, a ``semantics``
table that holds non-empty ``validity`` and ``one_shot_completion`` tables and is validated
against ``semantics_schema``, and at least one ``reference_cases`` entry (``dataset`` exactly when
the contract accepts datasets, ``result``, ``expected_metrics``). Unknown keys are refused.

Reading happens in two steps, as in the Rust loader: ``parse`` checks the envelope (so the schema
paths are known), ``validate`` then checks every named schema is in the catalog and the semantics
conform. ``resource`` is the contract's identity value: schema paths replaced by their schema
ids and each reference-case path bound to the source-bundle id of its content.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

from metewand.errors import InvalidInput
from metewand.suites.compute.manifest import TIMING_SCOPES
from metewand.suites.compute.manifest_rust_reader import RustReader
from metewand.suites.compute.schema_catalog import SchemaCatalog
from metewand.suites.compute.toml_values import domain_problem

CONTRACT_KEYS = (
    "version",
    "name",
    "family",
    "parameter_schema",
    "dataset_schemas",
    "result_schema",
    "metric_schema",
    "semantics_schema",
    "allowed_timing_scopes",
    "supported_budgets",
    "semantics",
    "reference_cases",
)
SCHEMA_ROLES = (
    ("parameter", "parameter_schema"),
    ("dataset", "dataset_schemas"),
    ("result", "result_schema"),
    ("metric", "metric_schema"),
    ("semantics", "semantics_schema"),
)
OPERATIONAL_RULES = ("validity", "one_shot_completion")


class ContractError(InvalidInput):
    """``kind``: parse (the envelope), missing_schema or invalid_semantics; ``errors``: each
    problem as ``<contract path>: <key>: <message>``."""

    def __init__(self, kind: str, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.kind, self.errors = kind, errors


@dataclass(frozen=True)
class ReferenceCase:
    dataset: str | None
    result: str
    expected_metrics: str


@dataclass(frozen=True)
class ProblemContract:
    path: str  # repository path of the contract file
    version: int
    name: str
    family: str
    parameter_schema: str
    dataset_schemas: tuple[str, ...]
    result_schema: str
    metric_schema: str
    semantics_schema: str
    allowed_timing_scopes: tuple[str, ...]
    supported_budgets: tuple[str, ...]
    semantics: dict[str, Any]
    reference_cases: tuple[ReferenceCase, ...]

    def schema_paths(self) -> list[str]:
        return [
            self.parameter_schema,
            *self.dataset_schemas,
            self.result_schema,
            self.metric_schema,
            self.semantics_schema,
        ]


def _paths(e: RustReader, value: Any, key: str) -> tuple[str, ...]:
    """``dataset_schemas``: unique repository paths, possibly none (a dataset-free problem)."""
    if isinstance(value, list) and not value:
        return ()
    return e.repo_paths(value, key)


def parse(path: str, text: str) -> ProblemContract:
    """The contract's envelope, checked (no schema is consulted yet)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ContractError("parse", [f"{path}: invalid TOML: {exc}"]) from exc
    e = RustReader(path, label=path)
    e.table(doc, "$", CONTRACT_KEYS, CONTRACT_KEYS)
    if e.errors:
        raise ContractError("parse", e.errors)
    if doc["version"] != 1 or isinstance(doc["version"], bool):
        e.error("version", f"expected version 1, found {doc['version']!r}")
    scopes = _scopes(e, doc["allowed_timing_scopes"])
    if doc["supported_budgets"] != ["none"]:
        e.error("supported_budgets", 'version 1 requires supported_budgets = ["none"]')
    datasets = _paths(e, doc["dataset_schemas"], "dataset_schemas")
    contract = ProblemContract(
        path=path,
        version=1,
        name=e.name(doc["name"], "name"),
        family=e.name(doc["family"], "family"),
        parameter_schema=e.repo_path(doc["parameter_schema"], "parameter_schema"),
        dataset_schemas=datasets,
        result_schema=e.repo_path(doc["result_schema"], "result_schema"),
        metric_schema=e.repo_path(doc["metric_schema"], "metric_schema"),
        semantics_schema=e.repo_path(doc["semantics_schema"], "semantics_schema"),
        allowed_timing_scopes=scopes,
        supported_budgets=("none",),
        semantics=_semantics(e, doc["semantics"]),
        reference_cases=_reference_cases(e, doc["reference_cases"], bool(datasets)),
    )
    if e.errors:
        raise ContractError("parse", e.errors)
    return contract


def _scopes(e: RustReader, value: Any) -> tuple[str, ...]:
    key = "allowed_timing_scopes"
    if not isinstance(value, list) or not value:
        e.error(key, "must be a non-empty array of timing scopes")
        return ()
    for i, scope in enumerate(value):
        if scope not in TIMING_SCOPES:
            e.error(f"{key}[{i}]", f"must be one of {', '.join(TIMING_SCOPES)}; got {scope!r}")
    if len(set(map(str, value))) != len(value):
        e.error(key, "cannot contain duplicates")
    return tuple(str(v) for v in value)


def _semantics(e: RustReader, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        e.error("semantics", "must be a table")
        return {}
    if problem := domain_problem(value):
        e.error("semantics", problem)
    for rule in OPERATIONAL_RULES:
        rules = value.get(rule)
        if not isinstance(rules, dict):
            e.error(f"semantics.{rule}", "must be a present table")
        elif not rules:
            e.error(f"semantics.{rule}", "cannot be empty")
    return value


def _reference_cases(e: RustReader, value: Any, datasets: bool) -> tuple[ReferenceCase, ...]:
    if not isinstance(value, list) or not value:
        e.error("reference_cases", "cannot be empty")
        return ()
    cases = []
    for i, case in enumerate(value):
        where = f"reference_cases[{i}]"
        if not isinstance(case, dict):
            e.error(where, "must be a table")
            continue
        for key in case:
            if key not in ("dataset", "result", "expected_metrics"):
                e.error(f"{where}.{key}", "unknown field")
        if datasets and "dataset" not in case:
            e.error(where, f"reference case {i} requires `dataset` (the contract accepts datasets)")
        if not datasets and "dataset" in case:
            e.error(where, f"reference case {i} must omit `dataset` (the contract is dataset-free)")
        dataset = e.repo_path(case["dataset"], f"{where}.dataset") if "dataset" in case else None
        result = e.repo_path(case.get("result"), f"{where}.result")
        metrics = e.repo_path(case.get("expected_metrics"), f"{where}.expected_metrics")
        cases.append(ReferenceCase(dataset, result, metrics))
    return tuple(cases)


def validate(contract: ProblemContract, catalog: SchemaCatalog) -> None:
    """Every schema the contract names is in the catalog, and its semantics conform."""
    for role, key in SCHEMA_ROLES:
        value = getattr(contract, key)
        for schema_path in value if isinstance(value, tuple) else (value,):
            if not catalog.contains(schema_path):
                raise ContractError(
                    "missing_schema",
                    [f"{contract.path}: {key}: references missing {role} schema {schema_path}"],
                )
    found = catalog.violations(contract.semantics_schema, contract.semantics)
    if found:
        raise ContractError(
            "invalid_semantics",
            [
                f"{contract.path}: semantics{v.instance_path.replace('/', '.')}: {v.message}"
                for v in found
            ],
        )


def resource(
    contract: ProblemContract, schema_ids: dict[str, str], content_id: Any
) -> dict[str, Any]:
    """The contract's identity value (``content_id(path)``: a reference file's content id)."""

    def reference(path: str) -> dict[str, str]:
        return {"content": content_id(path), "path": path}

    cases = [
        {
            "dataset": reference(case.dataset) if case.dataset is not None else None,
            "expected_metrics": reference(case.expected_metrics),
            "result": reference(case.result),
        }
        for case in contract.reference_cases
    ]
    return {
        "allowed_timing_scopes": list(contract.allowed_timing_scopes),
        "dataset_schemas": [schema_ids[p] for p in contract.dataset_schemas],
        "family": contract.family,
        "metric_schema": schema_ids[contract.metric_schema],
        "name": contract.name,
        "parameter_schema": schema_ids[contract.parameter_schema],
        "reference_cases": cases,
        "result_schema": schema_ids[contract.result_schema],
        "semantics": contract.semantics,
        "semantics_schema": schema_ids[contract.semantics_schema],
        "supported_budgets": list(contract.supported_budgets),
        "version": contract.version,
    }
