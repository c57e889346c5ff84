"""Parameter resolution: literal defaults merged with supplied values, then validated.

The Rust metewand's rule (``docs/schema-validation.md``): start from ``parameter_defaults`` (or
``{}``); where both sides are objects, merge recursively; anywhere else the supplied value —
scalar, array or explicit ``null`` — replaces the default; validate the complete result against
the owner's schema. JSON Schema ``default`` is an annotation and never adds a value.
"""

from __future__ import annotations

from typing import Any

from metewand.errors import InvalidInput
from metewand.suites.compute.schema_catalog import SchemaCatalog, SchemaValidationError


class ParameterResolutionError(InvalidInput):
    """``kind``: defaults_must_be_object, parameters_must_be_object or validation."""

    def __init__(self, kind: str, message: str, cause: SchemaValidationError | None = None):
        super().__init__(message)
        self.kind, self.cause = kind, cause


def merge(defaults: Any, supplied: Any) -> Any:
    """Recursive merge only where both sides are objects; otherwise the supplied value wins."""
    if isinstance(defaults, dict) and isinstance(supplied, dict):
        out = dict(defaults)
        for key, value in supplied.items():
            out[key] = merge(defaults[key], value) if key in defaults else value
        return out
    return supplied


def resolve_parameters(
    catalog: SchemaCatalog, schema_path: str, defaults: Any, supplied: Any
) -> dict[str, Any]:
    """The complete parameter object, validated against ``schema_path`` in ``catalog``."""
    if defaults is not None and not isinstance(defaults, dict):
        raise ParameterResolutionError(
            "defaults_must_be_object", "parameter_defaults must be an object"
        )
    if not isinstance(supplied, dict):
        raise ParameterResolutionError("parameters_must_be_object", "parameters must be an object")
    resolved = merge(defaults or {}, supplied)
    try:
        catalog.validate(schema_path, resolved)
    except SchemaValidationError as exc:
        raise ParameterResolutionError("validation", str(exc), exc) from exc
    return resolved
