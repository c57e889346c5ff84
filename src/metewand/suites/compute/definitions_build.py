"""Every definition id of a manifest (``build``): dataset, contract, problem and implementation
ids, filled into a ``definitions.Definitions``."""

from __future__ import annotations

import os
from typing import Any

from metewand.suites.compute import contract as contracts
from metewand.suites.compute import identities as ids
from metewand.suites.compute.definitions import (
    Definitions,
    bundle_root,
    dataset_output_schema,
    unit_dataset_definition,
)
from metewand.suites.compute.manifest import RUST_DIALECT, DatasetDef, Manifest, ProblemDef
from metewand.suites.compute.parameters import merge


def build(manifest: Manifest) -> Definitions:
    """Every definition id of ``manifest`` (reads the source bundles' files)."""
    return _fill(manifest, Definitions(manifest))


def _fill(m: Manifest, d: Definitions) -> Definitions:
    label = os.path.basename(m.path)
    for key, ds in m.datasets.items():
        d.datasets[key] = _dataset(m, d, ds, f"{label}#/datasets/{ds.name}")
    for name, problem in m.problems.items():
        d.contracts[name] = _contract(m, d, problem, f"{label}#/problems/{name}")
        d.problems[name] = ids.record(
            "problem-definition",
            name=name,
            contract=d.contracts[name],
            parameter_defaults=problem.parameter_defaults if problem.defaults_declared else None,
            evaluator=d.worker(problem.evaluator),
        )
    for name, impl in m.implementations.items():
        d.implementation_environments[name] = d.environment_id(impl.launch)
        d.implementations[name] = ids.record(
            "implementation-definition",
            name=name,
            worker=d.worker(impl.launch),
            problem_contracts=[d.problems[p] for p in impl.problems if p in d.problems],
            parameter_schema=d.schema_id(
                impl.parameter_schema, f"{label}#/implementations/{name}/parameter_schema"
            ),
            parameter_defaults=impl.parameter_defaults if impl.defaults_declared else None,
            capabilities=list(impl.capabilities),
        )
    return d


def _dataset(m: Manifest, d: Definitions, ds: DatasetDef, label: str) -> str:
    if ds.kind == "unit":
        return unit_dataset_definition()
    return ids.record(
        "dataset-definition",
        name=ds.name,
        parameter_schema=d.schema_id(ds.parameter_schema, f"{label}/parameter_schema"),
        parameter_defaults=ds.parameter_defaults if ds.defaults_declared else None,
        output_schema=dataset_output_schema(d, ds),
        definition=_dataset_kind(m, d, ds),
    )


def _dataset_kind(m: Manifest, d: Definitions, ds: DatasetDef) -> dict[str, Any]:
    if ds.kind == "fixed":
        if ds.source_patterns is not None:  # Rust: a repository source bundle
            return {"kind": "fixed", "source_bundle": d.bundle(m.root, ds.source_patterns)}
        root, rel = bundle_root(m.root, str(ds.path))
        return {"kind": "fixed", "source_bundle": d.bundle(root, (rel,))}
    if ds.kind == "generated":
        assert ds.materializer is not None
        return {
            "kind": "generated",
            "source": ds.remote_source,
            "materializer": d.worker(ds.materializer),
        }
    if ds.kind == "transformed":
        assert ds.materializer is not None and ds.source is not None
        source = m.datasets[ds.source]
        return {
            "kind": "transformed",
            "source": _dataset(m, d, source, f"{os.path.basename(m.path)}#/datasets/{source.name}"),
            "source_parameters": merge(source.parameter_defaults, ds.source_parameters),
            "transformer": d.worker(ds.materializer),
        }
    return {
        "kind": "acquired",
        "source": {"name": os.path.basename(str(ds.path)), "sha256": ds.sha256},
    }


def _contract(m: Manifest, d: Definitions, problem: ProblemDef, label: str) -> str:
    contract = problem.contract
    if contract is None:  # metewand dialect: the problem's inline schemas are its contract
        return ids.resource(
            "problem-contract",
            {
                "dialect": "metewand",
                "metric_schema": d.schema_id(problem.metric_schema, f"{label}/metric_schema"),
                "name": problem.name,
                "result_schema": d.schema_id(problem.result_schema, f"{label}/result_schema"),
                "version": 1,
            },
        )
    assert m.dialect == RUST_DIALECT and m.catalog is not None
    schema_ids = {p: str(d.schema_id(_bound(m, p), p)) for p in contract.schema_paths()}
    value = contracts.resource(contract, schema_ids, lambda path: d.bundle(m.root, (path,)))
    return ids.resource("problem-contract", value)


def _bound(m: Manifest, path: str) -> Any:
    from metewand.suites.compute.schema_catalog import BoundSchema

    return BoundSchema(m.catalog, path)
