"""Checks outside every phase timer: returned manifests, file trees, schemas."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from typing import IO, Any

from metewand import canonical
from metewand.errors import MetewandError


class InvalidOutput(MetewandError):
    """A worker's output breaks the contract (undeclared file, bad hash, schema violation)."""


def safe_relative(path: Any) -> str:
    if not isinstance(path, str) or not path:
        raise InvalidOutput("a returned path must be a nonempty string")
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise InvalidOutput(f"returned path {path!r} is not a normalized relative path")
    return path


def open_regular(path: str) -> IO[bytes]:
    """Open a worker-written file for reading without ever blocking or leaving its directory.

    A worker controls what lies at the paths it writes: a named pipe would block ``open()`` until
    a writer appears (for ever), a symlink would read a file elsewhere. The last component is
    opened with ``O_NOFOLLOW | O_NONBLOCK`` and must then be a regular file (``fstat``); reads of
    a regular file never block, so no read of worker data can hang the run.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    name = os.path.basename(path)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidOutput(f"{name}: symbolic links are not allowed in outputs") from exc
        raise InvalidOutput(f"{name}: cannot be opened ({exc.strerror})") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InvalidOutput(f"{name}: only regular files are allowed in outputs")
    with contextlib.suppress(OSError):  # plain blocking reads again (a regular file never waits)
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open_regular(path) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def tree_files(root: str) -> list[str]:
    """Relative paths of every entry; symlinks and special files are refused."""
    if os.path.islink(root):  # a worker swapped its output dir for a link to elsewhere
        raise InvalidOutput(f"{os.path.basename(root)}: symbolic links are not allowed in outputs")
    out = []
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                raise InvalidOutput(f"{name}: symbolic links are not allowed in outputs")
        for name in files:
            full = os.path.join(dirpath, name)
            if not os.path.isfile(full):
                raise InvalidOutput(f"{name}: only regular files are allowed in outputs")
            out.append(os.path.relpath(full, root).replace(os.sep, "/"))
    return sorted(out, key=lambda p: p.encode())


def tree_sha256(root: str) -> str:
    """Content hash of a tree: paths and file contents (timestamps and owners ignored)."""
    digest = hashlib.sha256(b"metewand-tree\x00")
    for rel in tree_files(root):
        digest.update(rel.encode() + b"\x00" + bytes.fromhex(file_sha256(os.path.join(root, rel))))
    return digest.hexdigest()


def read_document(path: str) -> dict[str, Any]:
    try:
        with open_regular(path) as fh:
            doc = canonical.loads(fh.read())
    except FileNotFoundError as exc:
        raise InvalidOutput(f"{os.path.basename(path)} was not written") from exc
    except ValueError as exc:
        raise InvalidOutput(f"{os.path.basename(path)} is not strict JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise InvalidOutput(f"{os.path.basename(path)} must hold a JSON object")
    return doc


def check_manifest_tree(root: str, manifest_rel: str, doc: dict[str, Any]) -> None:
    """Every declared file exists with its size (and hash when given); nothing undeclared."""
    files = doc.get("files", [])
    if not isinstance(files, list):
        raise InvalidOutput("manifest 'files' must be an array")
    declared: set[str] = set()
    for entry in files:
        if not isinstance(entry, dict):
            raise InvalidOutput("manifest file entries must be objects")
        rel = safe_relative(entry.get("path"))
        full = os.path.join(root, rel)
        if rel in declared or rel == manifest_rel:
            raise InvalidOutput(f"{rel}: declared twice or declares the manifest itself")
        declared.add(rel)
        if not os.path.isfile(full) or os.path.islink(full):
            raise InvalidOutput(f"{rel}: declared but missing")
        if entry.get("size_bytes") != os.path.getsize(full):
            raise InvalidOutput(f"{rel}: size differs from the manifest")
        if "sha256" in entry and entry["sha256"] != file_sha256(full):
            raise InvalidOutput(f"{rel}: sha256 differs from the manifest")
    extra = set(tree_files(root)) - declared - {manifest_rel}
    if extra:
        raise InvalidOutput(f"undeclared files: {', '.join(sorted(extra)[:5])}")


def check_schema(schema: Any, value: Any, what: str) -> None:
    """``schema``: an inline schema document or a ``schema_catalog.BoundSchema`` (or None)."""
    from metewand.suites.compute.schema_catalog import schema_messages

    if messages := schema_messages(schema, value):
        raise InvalidOutput(f"{what} violates its schema at {messages[0]}")


def _check_declared_schema(doc: dict[str, Any], schema: Any, what: str) -> None:
    """A document naming a catalog schema (Rust dialect) names exactly the contract's."""
    from metewand.suites.compute.schema_catalog import BoundSchema

    if not isinstance(schema, BoundSchema):
        return
    if doc.get("schema_version") != 1:
        raise InvalidOutput(f"{what} needs schema_version 1")
    if doc.get("schema") != schema.path:
        raise InvalidOutput(
            f"{what} names schema {doc.get('schema')!r}, not the contract's {schema.path!r}"
        )


def read_result(result_dir: str, reply: dict[str, Any], schema: Any) -> dict:
    """Validate an execute reply's result manifest and its files; returns the manifest."""
    result = reply.get("result")
    if not isinstance(result, dict):
        raise InvalidOutput("execute reply has no result object")
    rel = safe_relative(result.get("manifest"))
    tree_files(result_dir)  # no symlink or special file anywhere, before reading through a path
    doc = read_document(os.path.join(result_dir, rel))
    if not isinstance(doc.get("data"), dict):
        raise InvalidOutput("result manifest needs a 'data' object")
    check_manifest_tree(result_dir, rel, doc)
    _check_declared_schema(doc, schema, "result manifest")
    check_schema(schema, doc["data"], "result data")
    return doc


def read_metrics(metrics_path: str, schema: Any) -> dict[str, Any]:
    if os.path.islink(os.path.dirname(metrics_path)):
        raise InvalidOutput("metrics: symbolic links are not allowed in outputs")
    doc = read_document(metrics_path)
    if not isinstance(doc.get("data"), dict):
        raise InvalidOutput("metrics document needs a 'data' object")
    extra = set(os.listdir(os.path.dirname(metrics_path))) - {os.path.basename(metrics_path)}
    if extra:
        raise InvalidOutput(f"metrics directory holds other files: {sorted(extra)[:3]}")
    _check_declared_schema(doc, schema, "metrics document")
    check_schema(schema, doc["data"], "metrics data")
    return doc


def dataset_sizes(root: str) -> dict[str, int]:
    """A cheap integrity snapshot (sizes) taken between timed operations."""
    return {rel: os.path.getsize(os.path.join(root, rel)) for rel in tree_files(root)}
