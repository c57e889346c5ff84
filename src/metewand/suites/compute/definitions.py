"""Definition identities of a manifest, in the Rust metewand's records (either dialect).

What the Rust loader computes before planning (its ``build_planning_catalog``): schema ids
(each schema with every repository schema it reaches by ``$ref``), environment, worker, dataset,
problem-contract, problem and implementation definition ids, and the policy records. A Rust
manifest maps one to one. A metewand-dialect manifest maps where the two mean the same thing and
says where they do not (docs/compute-manifest.md, "Identities"):

- its one environment is ``local``; a launcher with ``build`` steps or ``env`` variables has
  them in its environment definition (``{"kind": "local", "build": [...], "variables": {...}}``),
  since they change what runs;
- a python launcher is an interpreted worker whose source bundle is its entrypoint file;
  a command's bundle is the files its build step names (none: ``null``);
- its schemas are identified by content under a label ``<manifest>#/<section>/<name>/<key>``;
  its datasets declare no output schema, so they name the built-in ``undeclared-dataset`` one;
- a problem's contract is the inline resource ``{"dialect": "metewand", "name",
  "result_schema", "metric_schema", "version"}``;
- transformed and acquired datasets (no Rust counterpart) are definition kinds of their own;
- the observation policy is ``{"name": "default", "kind": "one_shot"}``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from metewand.suites.compute import identities as ids
from metewand.suites.compute.manifest import (
    RUST_DIALECT,
    DatasetDef,
    ExecutionPolicy,
    Launch,
    Manifest,
    ObservationPolicy,
)
from metewand.suites.compute.schema_catalog import DRAFT_2020_12, BoundSchema, SchemaCatalog
from metewand.suites.compute.source_bundle import source_bundle_id

BUILTIN_UNIT_SCHEMA = {
    "$schema": DRAFT_2020_12,
    "type": "object",
    "maxProperties": 0,
    "x-metewand-builtin": "unit-dataset",
    "x-metewand-compatibility-version": 1,
}
BUILTIN_UNDECLARED_SCHEMA = {
    "$schema": DRAFT_2020_12,
    "x-metewand-builtin": "undeclared-dataset",
    "x-metewand-compatibility-version": 1,
}


def unit_dataset_definition() -> str:
    """The built-in unit dataset's definition id (the same in every repository)."""
    return ids.record(
        "dataset-definition",
        name="unit",
        parameter_schema=None,
        parameter_defaults=None,
        output_schema=ids.resource("schema", BUILTIN_UNIT_SCHEMA),
        definition={"kind": "unit"},
    )


def schema_identity_value(path: str, documents: dict[str, Any]) -> dict[str, Any]:
    """A repository schema with every schema it reaches (the Rust loader's traversal order)."""
    from metewand.suites.compute.manifest_rust_repository import external_references

    def order(p: str) -> tuple[str, ...]:
        return tuple(p.split("/"))  # a Rust PathBuf set orders by component

    pending = set(external_references(None, path, documents[path]))
    visited = {path}
    dependencies = []
    while pending:
        nxt = min(pending, key=order)
        pending.discard(nxt)
        if nxt in visited:
            continue
        visited.add(nxt)
        pending |= external_references(None, nxt, documents[nxt])
        dependencies.append({"document": documents[nxt], "path": nxt})
    return {"dependencies": dependencies, "document": documents[path], "path": path}


@dataclass
class Definitions:
    """Every definition id the planner needs, keyed by manifest name."""

    manifest: Manifest
    schemas: dict[str, str] = field(default_factory=dict)  # label or path -> schema id
    environments: dict[str, str] = field(default_factory=dict)
    datasets: dict[str, str] = field(default_factory=dict)
    contracts: dict[str, str] = field(default_factory=dict)  # problem name -> contract id
    problems: dict[str, str] = field(default_factory=dict)
    implementations: dict[str, str] = field(default_factory=dict)
    # implementation name -> its worker's environment-definition id (in its configuration)
    implementation_environments: dict[str, str] = field(default_factory=dict)
    _bundles: dict[tuple[str, tuple[str, ...]], str] = field(default_factory=dict)

    # -- schemas and environments -----------------------------------------------------------

    def schema_id(self, schema: Any, label: str) -> str | None:
        if schema is None:
            return None
        if isinstance(schema, BoundSchema):
            return self._catalog_schema(schema.catalog, schema.path)
        value = {"dependencies": [], "document": schema, "path": label}
        return self.schemas.setdefault(label, ids.resource("schema", value))

    def _catalog_schema(self, catalog: SchemaCatalog, path: str) -> str:
        if path not in self.schemas:
            documents = {p: catalog.document(p) for p in catalog.paths}
            value = schema_identity_value(path, documents)
            self.schemas[path] = ids.resource("schema", value)
        return self.schemas[path]

    def environment_id(self, launch: Launch) -> str:
        m = self.manifest
        if m.dialect == RUST_DIALECT:
            env = m.environments[launch.environment]
            return ids.record("environment-definition", name=env.name, definition=env.definition)
        definition: dict[str, Any] = {"kind": "local"}
        if launch.build:
            definition["build"] = list(launch.build)
        if launch.env:
            definition["variables"] = dict(launch.env)
        return ids.record("environment-definition", name="local", definition=definition)

    def bundle(self, root: str, patterns: tuple[str, ...]) -> str:
        key = (root, tuple(sorted(set(patterns))))
        if key not in self._bundles:
            self._bundles[key] = source_bundle_id(root, list(patterns))
        return self._bundles[key]

    # -- workers ----------------------------------------------------------------------------

    def worker(self, launch: Launch) -> dict[str, Any]:
        """A worker definition's fields (as nested in dataset/problem/implementation records)."""
        if self.manifest.dialect == RUST_DIALECT:
            return self._rust_worker(launch)
        return self._metewand_worker(launch)

    def source_bundle_of(self, launch: Launch) -> str | None:
        bundle = self.worker(launch)["launch"]["source_bundle"]
        return None if bundle is None else str(bundle)

    def _rust_worker(self, launch: Launch) -> dict[str, Any]:
        root = self.manifest.root
        if launch.runner == "command":
            bundle = self.bundle(root, launch.source_patterns) if launch.source_patterns else None
            form = ids.command_launch(str(launch.program), bundle)
            args = launch.argv[1:]
        else:
            bundle = self.bundle(root, tuple(launch.source_patterns or ()))
            form = ids.interpreted_launch(launch.runner, str(launch.entrypoint), bundle)
            args = launch.argv[2:]
        env = self.environment_id(launch)
        return ids.worker_fields(form, list(args), env, launch.protocol_transport)

    def _metewand_worker(self, launch: Launch) -> dict[str, Any]:
        env = self.environment_id(launch)
        if launch.runner == "python":
            script = str(launch.entrypoint)
            root, rel = bundle_root(self.manifest.root, script)
            # its ``source_files``: in the manifest's directory, as the script then is (the
            # reader checks), so ``root`` is that directory and one bundle holds them all
            extra = [s for s in launch.sources if s != script]
            rels = (rel, *(os.path.relpath(os.path.realpath(s), root) for s in extra))
            form = ids.interpreted_launch("python", rel, self.bundle(root, rels))
            return ids.worker_fields(form, list(launch.argv[2:]), env, None)
        bundle = None
        if launch.sources:
            root = os.path.commonpath([os.path.dirname(s) for s in launch.sources])
            rels = tuple(os.path.relpath(s, root) for s in launch.sources)
            bundle = self.bundle(root, rels)
        form = ids.command_launch(str(launch.program or launch.argv[0]), bundle)
        return ids.worker_fields(form, list(launch.argv[1:]), env, None)


def bundle_root(root: str, path: str) -> tuple[str, str]:
    """(bundle root, relative path): the manifest directory when ``path`` lies inside it."""
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    if real.startswith(real_root + os.sep):
        return real_root, os.path.relpath(real, real_root)
    return os.path.dirname(real), os.path.basename(real)


def execution_policy_id(policy: ExecutionPolicy) -> str:
    return ids.record(
        "execution-policy",
        name=policy.name,
        cpus=policy.cpus,
        threads=policy.threads,
        memory=policy.memory,
        network=policy.network,
        worker_reuse=policy.worker_reuse,
        warmup_runs=policy.warmup_runs,
        timeout=policy.timeout_text,
        timing_scope=policy.timing_scope,
        primary_time=policy.primary_time,
        run_order=policy.run_order,
        enforcement=policy.enforcement,
    )


def observation_policy_id(policy: ObservationPolicy) -> str:
    return ids.record("observation-policy", name=policy.name, kind=policy.kind)


def dataset_output_schema(d: Definitions, ds: DatasetDef) -> str:
    if ds.kind == "unit":
        return ids.resource("schema", BUILTIN_UNIT_SCHEMA)
    if ds.output_schema is None:
        return ids.resource("schema", BUILTIN_UNDECLARED_SCHEMA)
    return str(d.schema_id(ds.output_schema, ""))
