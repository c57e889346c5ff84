"""An offline catalog of repository JSON Schemas (draft 2020-12) keyed by repository path.

The Rust metewand's schema rules (its ``docs/schema-validation.md``): every document declares
``"$schema": "https://json-schema.org/draft/2020-12/schema"`` and passes the 2020-12 meta-schema;
keys are normalized repository-relative paths; a relative ``$ref`` resolves against the referring
document's own path (``schemas/result.json`` → ``common.json#/$defs/file`` is
``schemas/common.json``); a reference succeeds only when its target is in the catalog — nothing
is ever read from the filesystem or the network, so an unregistered or remote reference fails
when the catalog is built, not when an instance happens to reach it. Validation reports every
violation, sorted (instance path, schema path, message) so the order never depends on the
validator's traversal.

Errors carry a ``kind`` (the Rust error variant's name, snake-cased) so conformance tests and
callers can tell them apart without parsing messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urldefrag, urljoin

from metewand.errors import InvalidInput

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
# A base no retrieval can reach (.invalid is reserved): repository paths become URIs under it.
BASE_URI = "https://repository.metewand.invalid/"


class SchemaCatalogError(InvalidInput):
    """The documents do not form a catalog: ``kind`` is invalid_path, duplicate_path,
    missing_dialect, unsupported_dialect, invalid_schema or compilation."""

    def __init__(self, kind: str, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.kind, self.path = kind, path


@dataclass(frozen=True, order=True)
class Violation:
    instance_path: str  # JSON Pointer into the instance ("" is the root)
    schema_path: str  # JSON Pointer into the schema that failed
    message: str


class SchemaValidationError(InvalidInput):
    """``kind``: unknown_schema (no such path in the catalog) or invalid_instance."""

    def __init__(self, kind: str, path: str, violations: tuple[Violation, ...] = ()) -> None:
        detail = "; ".join(f"{v.instance_path or '/'}: {v.message}" for v in violations[:3])
        more = f" (+{len(violations) - 3} more)" if len(violations) > 3 else ""
        text = "not in the schema catalog" if kind == "unknown_schema" else detail + more
        super().__init__(f"{path}: {text}")
        self.kind, self.path, self.violations = kind, path, violations


def repository_path_problem(path: str) -> str | None:
    """The Rust manifest's path rule: relative, ``/``-separated, no empty, ``.`` or ``..``
    component, no leading or trailing separator, no backslash."""
    if not path or path[0] in "/\\" or path.endswith("/") or "\\" in path:
        return f"path {path!r} must be a normalized, relative repository path"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return f"path {path!r} must be a normalized, relative repository path"
    return None


def path_uri(path: str) -> str:
    return BASE_URI + path


class SchemaCatalog:
    """Every schema a repository admits, compiled once; ``validate`` by repository path."""

    def __init__(self, documents: Iterable[tuple[str, Any]]) -> None:
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT202012

        self._documents: dict[str, Any] = {}
        for path, document in documents:
            if problem := repository_path_problem(path):
                raise SchemaCatalogError("invalid_path", path, problem)
            if path in self._documents:
                raise SchemaCatalogError("duplicate_path", path, "given twice")
            _check_dialect(path, document)
            self._documents[path] = document
        resources = [
            (path_uri(p), Resource.from_contents(doc, default_specification=DRAFT202012))
            for p, doc in self._documents.items()
        ]
        self._registry: Any = Registry().with_resources(resources).crawl()
        for path, document in self._documents.items():
            self._check_references(path, document)
        self._validators: dict[str, Any] = {}

    @property
    def paths(self) -> list[str]:
        return sorted(self._documents)

    def contains(self, path: str) -> bool:
        return path in self._documents

    def document(self, path: str) -> Any:
        if path not in self._documents:
            raise SchemaValidationError("unknown_schema", path)
        return self._documents[path]

    def violations(self, path: str, instance: Any) -> tuple[Violation, ...]:
        validator = self._validator(path)
        found = {
            Violation(_pointer(e.absolute_path), _pointer(e.absolute_schema_path), e.message)
            for e in validator.iter_errors(instance)
        }
        return tuple(sorted(found))

    def validate(self, path: str, instance: Any) -> None:
        if found := self.violations(path, instance):
            raise SchemaValidationError("invalid_instance", path, found)

    def _validator(self, path: str) -> Any:
        if path not in self._documents:
            raise SchemaValidationError("unknown_schema", path)
        if path not in self._validators:
            from jsonschema import Draft202012Validator

            resolver_schema = {"$id": path_uri(path), **self._documents[path]}
            self._validators[path] = Draft202012Validator(resolver_schema, registry=self._registry)
        return self._validators[path]

    def _check_references(self, path: str, document: Any) -> None:
        from referencing.exceptions import Unresolvable

        for base, ref in _references(document, path_uri(path)):
            try:
                self._registry.resolver(base_uri=base).lookup(ref)
            except Unresolvable as exc:
                target = urldefrag(urljoin(base, ref))[0]
                where = target.removeprefix(BASE_URI) if target.startswith(BASE_URI) else target
                raise SchemaCatalogError(
                    "compilation",
                    path,
                    f"$ref {ref!r} does not resolve to a schema in the catalog ({where}); "
                    f"references are never fetched: {type(exc).__name__}",
                ) from exc


def _check_dialect(path: str, document: Any) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if not isinstance(document, dict):
        raise SchemaCatalogError("invalid_schema", path, "a schema document must be an object")
    dialect = document.get("$schema")
    if dialect is None:
        raise SchemaCatalogError(
            "missing_dialect", path, f'must declare "$schema": "{DRAFT_2020_12}"'
        )
    if dialect != DRAFT_2020_12:
        raise SchemaCatalogError(
            "unsupported_dialect", path, f"$schema {dialect!r} is not {DRAFT_2020_12}"
        )
    try:
        Draft202012Validator.check_schema(document)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "$"
        raise SchemaCatalogError(
            "invalid_schema", path, f"not a 2020-12 schema at {where}: {exc.message[:200]}"
        ) from exc
    except RecursionError:
        raise SchemaCatalogError("invalid_schema", path, "nested too deeply") from None


def _references(value: Any, base: str, depth: int = 0) -> Iterator[tuple[str, str]]:
    """(base URI in force, reference) for every ``$ref`` / ``$dynamicRef``; ``$id`` moves the
    base for everything beneath it."""
    if depth > 200:
        return
    if isinstance(value, dict):
        if isinstance(value.get("$id"), str):
            base = urljoin(base, value["$id"])
        for key in ("$ref", "$dynamicRef"):
            if isinstance(value.get(key), str):
                yield base, value[key]
        for item in value.values():
            yield from _references(item, base, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _references(item, base, depth + 1)


def _pointer(parts: Iterable[Any]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass(frozen=True, eq=False)
class BoundSchema:
    """One catalog schema, named by its repository path (what a Rust-dialect manifest gives)."""

    catalog: SchemaCatalog
    path: str

    @property
    def document(self) -> Any:
        return self.catalog.document(self.path)

    def violations(self, value: Any) -> tuple[Violation, ...]:
        return self.catalog.violations(self.path, value)


def schema_messages(schema: Any, value: Any) -> list[str]:
    """``"<where>: <message>"`` per violation of ``value`` against an inline schema document or a
    ``BoundSchema``, in a deterministic order; [] when it conforms (or ``schema`` is None)."""
    if schema is None:
        return []
    if isinstance(schema, BoundSchema):
        return [f"{v.instance_path or '$'}: {v.message}" for v in schema.violations(value)]
    from jsonschema import Draft202012Validator

    errors = sorted(
        Draft202012Validator(schema).iter_errors(value),
        key=lambda e: (_pointer(e.absolute_path), e.message),
    )
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '$'}: {e.message}" for e in errors]
