"""The JSON Schema 2020-12 documents shipped in ``metewand/schemas``.

Every ``*.schema.json`` file in that folder is a schema; its name is the file name without
the suffix. Schemas refer to each other by relative ``$ref`` against their ``$id``, and the
registry below holds all of them, so validation never touches the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from metewand import canonical
from metewand.errors import MetewandError

SUFFIX = ".schema.json"
BASE_URI = "https://metewand.dev/schemas/"


class UnknownSchemaError(MetewandError, KeyError):
    """No shipped schema has this name."""


@dataclass(frozen=True)
class SchemaViolation:
    path: str  # JSON path of the offending value, "$" for the document
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def _schema_dir() -> Any:
    return resources.files("metewand") / "schemas"


@cache
def _documents() -> dict[str, dict[str, Any]]:
    docs: dict[str, dict[str, Any]] = {}
    for entry in _schema_dir().iterdir():
        if entry.name.endswith(SUFFIX):
            doc = canonical.loads(entry.read_text("utf-8"))
            doc.setdefault("$id", BASE_URI + entry.name)  # so relative $refs resolve
            docs[entry.name[: -len(SUFFIX)]] = doc
    return docs


@cache
def _registry() -> Registry:
    pairs = [
        (doc["$id"], Resource.from_contents(doc, default_specification=DRAFT202012))
        for doc in _documents().values()
    ]
    return Registry().with_resources(pairs)


def list_schemas() -> list[str]:
    return sorted(_documents())


def load_schema(name: str) -> dict[str, Any]:
    try:
        return _documents()[name]
    except KeyError:
        raise UnknownSchemaError(name) from None


@cache
def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(
        load_schema(name),
        registry=_registry(),
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


def violations(name: str, obj: Any) -> list[SchemaViolation]:
    """Every violation of schema ``name`` by ``obj`` (empty when valid)."""
    found = sorted(validator(name).iter_errors(obj), key=lambda e: list(e.absolute_path))
    return [SchemaViolation(_json_path(e), e.message) for e in found]


def is_valid(name: str, obj: Any) -> bool:
    return validator(name).is_valid(obj)


def validate(name: str, obj: Any) -> None:
    """Raise ``ValidationError`` (with the most relevant violation) when ``obj`` is invalid."""
    validator(name).validate(obj)


def _json_path(error: ValidationError) -> str:
    path = "$"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path
