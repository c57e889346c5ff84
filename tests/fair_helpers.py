"""Shared helpers for the fair-comparison tests: schema validation of every artifact."""

from __future__ import annotations

from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from metewand import canonical
from metewand.runtime import schemas


def validate(schema_id: str, obj: Any) -> None:
    """Validate ``abb_x/1`` objects against ``abb_x-1.schema.json`` after a canonical round trip
    (what lands on disk is what is checked)."""
    name = schema_id.replace("/", "-")
    Draft202012Validator.check_schema(schemas.load_schema(name))
    on_disk = canonical.loads(canonical.dumps(obj))
    found = schemas.violations(name, on_disk)
    if found:
        raise jsonschema.ValidationError("; ".join(str(v) for v in found[:5]))
