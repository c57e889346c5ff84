"""The Rust metewand's manifest dialect (its ``fixtures/manifest/v1/complete.toml``), read as is.

Three passes, like the Rust loader's: the *shape* of every table (this module: unknown keys,
names, repository paths, variants, versions, the JSON value domain), then the *repository*
(``manifest_rust_repository``: problem-contract files, every reachable schema into one offline
catalog, contract validation, source bundles), then the *relationships*
(``manifest_rust_checks``: parameter namespaces and manifest/contract compatibility). Every error
of a pass is collected, each naming the file and the key path; a later pass runs only when the
earlier ones found nothing (it would trip over the same mistakes).

The result is the typed ``Manifest`` the rest of the compute suite reads for either dialect.
Datasets keep their Rust form (fixed: a source bundle; generated: a materializer, maybe a pinned
remote source); the built-in unit dataset of a dataset-free problem is the key ``<unit>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from metewand.suites.compute import manifest_rust_checks as checks
from metewand.suites.compute import manifest_rust_repository as repository
from metewand.suites.compute.manifest import (
    RUST_DIALECT,
    TIMING_SCOPES,
    DatasetDef,
    EnvironmentDef,
    ExecutionPolicy,
    Experiment,
    ImplementationDef,
    Manifest,
    ManifestError,
    ObservationPolicy,
    parse_duration,
)
from metewand.suites.compute.manifest_rust_experiments import experiments
from metewand.suites.compute.manifest_rust_reader import WORKER_KEYS, RustReader, worker

UNIT_KEY = "<unit>"  # the built-in unit dataset (not a valid Name, so no manifest can clash)
TOP_KEYS = (
    "version",
    "name",
    "datasets",
    "problems",
    "implementations",
    "environments",
    "experiments",
    "execution_policies",
    "observation_policies",
)
DATASET_KEYS = (*WORKER_KEYS, "parameter_schema", "parameter_defaults", "output_schema", "source")
IMPLEMENTATION_KEYS = (
    *WORKER_KEYS,
    "problem_contracts",
    "parameter_schema",
    "parameter_defaults",
    "capabilities",
)
ENVIRONMENT_KEYS = {
    "local": (),
    "uv": ("project", "lockfile"),
    "renv": ("project", "lockfile"),
    "nix": ("flake", "installable", "system", "output_kind", "output"),
    "oci": ("image",),
}
POLICY_ENUMS = {
    "timing_scope": TIMING_SCOPES,
    "primary_time": ("timed_wall_time", "cpu_time"),
    "run_order": ("sequential", "randomized"),
    "enforcement": ("best_effort", "required"),
}
POLICY_KEYS: tuple[str, ...] = ("version", "cpus", "threads", "memory", "network", "worker_reuse")
POLICY_KEYS += ("warmup_runs", "timeout", *POLICY_ENUMS)
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")


def _dataset(r: RustReader, name: str, value: Any) -> DatasetDef:
    where = f"datasets.{name}"
    t = r.table(value, where, DATASET_KEYS, ("output_schema",))
    r.schema_paths["datasets", name, "output_schema"] = r.repo_path(
        t.get("output_schema", ""), f"{where}.output_schema"
    )
    if "runner" not in t:
        extra = sorted(k for k in t if k not in ("output_schema", "sources"))
        if extra:
            r.error(where, f"a fixed dataset accepts only `output_schema` and `sources` ({extra})")
        if "sources" not in t:
            r.error(f"{where}.sources", "fixed dataset is missing `sources`")
        sources = r.repo_paths(t.get("sources", ["-"]), f"{where}.sources")
        return DatasetDef(name, "fixed", source_patterns=sources)
    launch = worker(r, {k: v for k, v in t.items() if k in WORKER_KEYS}, where)
    if "parameter_schema" in t:
        r.schema_paths["datasets", name, "parameter_schema"] = r.repo_path(
            t["parameter_schema"], f"{where}.parameter_schema"
        )
    defaults = t.get("parameter_defaults")
    return DatasetDef(
        name,
        "generated",
        launch,
        parameter_defaults=r.json_object(defaults, f"{where}.parameter_defaults")
        if defaults is not None
        else {},
        defaults_declared=defaults is not None,
        remote_source=_remote_source(r, t["source"], f"{where}.source") if "source" in t else None,
    )


def _remote_source(r: RustReader, value: Any, where: str) -> dict[str, str]:
    t = r.table(value, where, ("url", "sha256"), ("url", "sha256"))
    url, digest = t.get("url"), t.get("sha256")
    if not isinstance(url, str) or not URI_RE.match(url):
        r.error(f"{where}.url", f"invalid URI: {url!r}")
    if not isinstance(digest, str) or not SHA256_RE.match(digest):
        r.error(f"{where}.sha256", "SHA-256 digest must contain 64 lowercase hexadecimal digits")
    return {"url": str(url), "sha256": str(digest)}


def _implementation(r: RustReader, name: str, value: Any) -> ImplementationDef:
    where = f"implementations.{name}"
    t = r.table(value, where, IMPLEMENTATION_KEYS, ("runner", "problem_contracts", "capabilities"))
    launch = worker(r, {k: v for k, v in t.items() if k in WORKER_KEYS}, where)
    if t.get("capabilities") != ["one_shot"]:
        r.error(f"{where}.capabilities", 'version 1 requires capabilities = ["one_shot"]')
    if "parameter_schema" in t:
        r.schema_paths["implementations", name, "parameter_schema"] = r.repo_path(
            t["parameter_schema"], f"{where}.parameter_schema"
        )
    defaults = t.get("parameter_defaults")
    return ImplementationDef(
        name,
        launch,
        r.name_list(t.get("problem_contracts"), f"{where}.problem_contracts"),
        r.json_object(defaults, f"{where}.parameter_defaults") if defaults is not None else {},
        defaults_declared=defaults is not None,
    )


def _environment(r: RustReader, name: str, value: Any) -> EnvironmentDef:
    where = f"environments.{name}"
    if not isinstance(value, dict) or value.get("kind") not in ENVIRONMENT_KEYS:
        kind = value.get("kind") if isinstance(value, dict) else None
        r.error(f"{where}.kind", f"must be one of {', '.join(ENVIRONMENT_KEYS)}; got {kind!r}")
        return EnvironmentDef(name, {"kind": "local"})
    kind = value["kind"]
    keys = ENVIRONMENT_KEYS[kind]
    t = r.table(value, where, ("kind", *keys), ("kind", *keys))
    definition: dict[str, Any] = {"kind": kind}
    for key in keys:
        at = f"{where}.{key}"
        if key in ("project", "flake"):
            definition[key] = r.repo_path(t.get(key), at, root_ok=True)
        elif key == "lockfile":
            definition[key] = r.repo_path(t.get(key), at)
        elif key == "output_kind":
            definition[key] = r.choice(t.get(key), at, ("package", "app"))
        else:
            definition[key] = r.text(t.get(key), at)
    image = definition.get("image", "")
    if kind == "oci" and not SHA256_RE.match(
        image.rpartition("@sha256:")[2] if "@sha256:" in image else ""
    ):
        r.error(f"{where}.image", "OCI image must end in `@sha256:` and 64 lowercase hex digits")
    return EnvironmentDef(name, definition)


def _policy(r: RustReader, name: str, value: Any) -> ExecutionPolicy:
    where = f"execution_policies.{name}"
    t = r.table(value, where, POLICY_KEYS, ("version",))
    r.version(t.get("version"), f"{where}.version")
    enums = {k: r.choice(t[k], f"{where}.{k}", c) for k, c in POLICY_ENUMS.items() if k in t}
    timeout = r.text(t["timeout"], f"{where}.timeout") if "timeout" in t else None
    return ExecutionPolicy(
        name=name,
        timing_scope=enums.get("timing_scope", "prepare_and_execute"),
        timeout_s=parse_duration(timeout) if timeout else None,
        warmup_runs=r.safe_int(t.get("warmup_runs", 0), f"{where}.warmup_runs", 0),
        worker_reuse=r.boolean(t.get("worker_reuse", False), f"{where}.worker_reuse"),
        run_order=enums.get("run_order", "sequential"),
        cpus=r.safe_int(t["cpus"], f"{where}.cpus", 1) if "cpus" in t else None,
        threads=r.safe_int(t["threads"], f"{where}.threads", 1) if "threads" in t else None,
        memory=r.text(t["memory"], f"{where}.memory") if "memory" in t else None,
        network=r.boolean(t.get("network", False), f"{where}.network"),
        primary_time=enums.get("primary_time", "timed_wall_time"),
        enforcement=enums.get("enforcement", "best_effort"),
        timeout_text=timeout,
    )


def _observation_policy(r: RustReader, name: str, value: Any) -> ObservationPolicy:
    where = f"observation_policies.{name}"
    t = r.table(value, where, ("version", "kind"), ("version", "kind"))
    r.version(t.get("version"), f"{where}.version")
    if t.get("kind", "one_shot") != "one_shot":
        r.error(f"{where}.kind", f"version 1 supports only one_shot, found {t.get('kind')!r}")
    return ObservationPolicy(name, "one_shot")


@dataclass
class Shapes:
    """The shape pass's result: every definition typed, references not yet checked."""

    reader: RustReader
    name: str
    tables: dict[str, Any]  # datasets, environments, implementations, *_policies by name
    problems: dict[str, Any]  # name -> manifest_rust_repository.ProblemShape
    experiments: list[Experiment]


def parse_shapes(path: str, doc: dict[str, Any]) -> Shapes:
    """The shape pass alone (the Rust ``parse_manifest``): no file but the manifest is read;
    errors are collected in ``reader.errors``."""
    r = RustReader(path)
    r.table(doc, "$", TOP_KEYS, ("version", "name"))
    r.version(doc.get("version"), "version")
    name = r.name(doc.get("name"), "name")
    tables: dict[str, Any] = {
        "datasets": {n: _dataset(r, n, v) for n, v in r.named(doc, "datasets").items()},
        "environments": {n: _environment(r, n, v) for n, v in r.named(doc, "environments").items()},
        "implementations": {
            n: _implementation(r, n, v) for n, v in r.named(doc, "implementations").items()
        },
        "execution_policies": {
            n: _policy(r, n, v) for n, v in r.named(doc, "execution_policies").items()
        },
        "observation_policies": {
            n: _observation_policy(r, n, v) for n, v in r.named(doc, "observation_policies").items()
        },
    }
    problems = repository.problem_shapes(r, r.named(doc, "problems"))
    return Shapes(r, name, tables, problems, experiments(r, doc.get("experiments", []), tables))


def read_rust_manifest(path: str, doc: dict[str, Any], why: str = "") -> Manifest:
    """A Rust-dialect manifest as the typed ``Manifest``; ManifestError lists every problem."""
    parsed = parse_shapes(path, doc)
    r, shapes, exps = parsed.reader, parsed.tables, parsed.experiments
    if r.errors:
        raise ManifestError(r.errors)
    repo = repository.load(r, shapes, parsed.problems)
    if r.errors:
        raise ManifestError(r.errors)
    checks.relationships(r, shapes, repo.problems, exps)
    if r.errors:
        raise ManifestError(r.errors)
    datasets = repository.bind(r, "datasets", shapes["datasets"], repo.catalog)
    if any(not e.datasets for e in exps):
        datasets[UNIT_KEY] = DatasetDef("unit", "unit")
    implementations = repository.bind(r, "implementations", shapes["implementations"], repo.catalog)
    return Manifest(
        path,
        r.root,
        parsed.name,
        datasets,
        repo.problems,
        implementations,
        tuple(checks.with_unit(e, UNIT_KEY) for e in exps),
        dialect=RUST_DIALECT,
        dialect_reason=why,
        environments=shapes["environments"],
        catalog=repo.catalog,
    )
