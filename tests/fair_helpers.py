"""Shared helpers for the fair-comparison tests: schema validation of every artifact."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from metewand import canonical


@cache
def validator(schema_id: str) -> Draft202012Validator:
    """``abb_host_telemetry/1`` → a validator for ``abb_host_telemetry-1.schema.json``."""
    name = schema_id.replace("/", "-") + ".schema.json"
    text = (resources.files("metewand") / "schemas" / name).read_text()
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def validate(schema_id: str, obj: Any) -> None:
    """Validate after a canonical-JSON round trip (what lands on disk is what is checked)."""
    on_disk = canonical.loads(canonical.dumps(obj))
    errors = sorted(validator(schema_id).iter_errors(on_disk), key=lambda e: list(e.path))
    if errors:
        raise jsonschema.ValidationError(
            "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
        )
