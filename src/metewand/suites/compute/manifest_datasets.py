"""Manifest entries for the two derived dataset kinds: ``transformed`` and ``acquired``.

A transformed dataset is built by a transformer worker from another dataset (its ``source``, with
``source_parameters`` for that source's configuration). An acquired dataset is a local file or
directory, checked against the declared ``sha256`` when the manifest is read (and again on the
copy the run uses). Documented in docs/compute-manifest.md.
"""

from __future__ import annotations

import os
import re
from typing import Any

from metewand.suites.compute.manifest import DatasetDef
from metewand.suites.compute.manifest_guard import pseudo_fs_problem
from metewand.suites.compute.manifest_reader import Reader, read_launch

SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
TRANSFORMED_KEYS = {"kind": True, "source": True, "transformer": True}
TRANSFORMED_KEYS |= {"source_parameters": False, "parameter_defaults": False}
TRANSFORMED_KEYS |= {"parameter_schema": False}
ACQUIRED_KEYS = {"kind": True, "path": True, "sha256": True}


def source_digest(path: str) -> str:
    """sha256 of a file's bytes, or metewand's tree digest of a directory."""
    from metewand.suites.compute.validate import file_sha256, tree_sha256

    return tree_sha256(path) if os.path.isdir(path) else file_sha256(path)


def transformed(r: Reader, name: str, t: dict[str, Any]) -> DatasetDef:
    where = f"datasets.{name}"
    _check_keys(r, t, where, TRANSFORMED_KEYS, "transformed")
    source = r.string(t.get("source"), f"{where}.source")
    source_parameters = t.get("source_parameters", {})
    if not isinstance(source_parameters, dict):
        r.error(f"{where}.source_parameters", "must be a table")
        source_parameters = {}
    defaults = t.get("parameter_defaults", {})
    if not isinstance(defaults, dict):
        r.error(f"{where}.parameter_defaults", "must be a table")
        defaults = {}
    launch = read_launch(r, t.get("transformer", {}), f"{where}.transformer")
    schema = r.schema(t.get("parameter_schema"), f"{where}.parameter_schema")
    return DatasetDef(
        name,
        "transformed",
        launch,
        None,
        dict(defaults),
        schema,
        source,
        dict(source_parameters),
        defaults_declared="parameter_defaults" in t,
    )


def acquired(r: Reader, name: str, t: dict[str, Any]) -> DatasetDef:
    where = f"datasets.{name}"
    _check_keys(r, t, where, ACQUIRED_KEYS, "acquired")
    path = r.file_path(t.get("path"), f"{where}.path")
    declared = t.get("sha256")
    if not isinstance(declared, str) or not SHA256_RE.match(declared):
        r.error(f"{where}.sha256", "must be 64 lowercase hex digits")
        declared = None
    if path and (problem := pseudo_fs_problem(path)):
        r.error(f"{where}.path", problem)
        path = ""  # never read: a device or kernel tree can be endless
    if path and declared and os.path.exists(path):
        from metewand.suites.compute.validate import InvalidOutput

        try:
            actual = source_digest(path)
        except (OSError, InvalidOutput) as exc:  # unreadable, or a link / special file inside
            r.error(f"{where}.path", f"cannot read {t.get('path')}: {exc}")
        else:
            if actual != declared:
                r.error(
                    f"{where}.sha256",
                    f"{t.get('path')} has sha256 {actual}, not the declared {declared}",
                )
    return DatasetDef(name, "acquired", path=path, sha256=declared)


def _check_keys(
    r: Reader, t: dict[str, Any], where: str, allowed: dict[str, bool], kind: str
) -> None:
    for key in t:
        if key not in allowed:
            r.error(f"{where}.{key}", f"{kind} datasets take no {key}")
    for key, required in allowed.items():
        if required and key not in t:
            r.error(f"{where}.{key}", f"missing required key for {kind} datasets")


def check_sources(r: Reader, datasets: dict[str, DatasetDef]) -> None:
    """Every transformed dataset names an existing dataset, and no chain of sources loops."""
    for name, ds in datasets.items():
        if ds.kind != "transformed" or not ds.source:
            continue
        seen = [name]
        current: DatasetDef | None = ds
        while current is not None and current.kind == "transformed":
            nxt = current.source or ""
            if nxt not in datasets:
                r.error(f"datasets.{current.name}.source", f"no dataset named {nxt!r}")
                break
            if nxt in seen:
                loop = " -> ".join([*seen, nxt])
                r.error(f"datasets.{name}.source", f"sources form a loop: {loop}")
                break
            seen.append(nxt)
            current = datasets[nxt]
