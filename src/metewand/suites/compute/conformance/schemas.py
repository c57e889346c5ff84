"""One schema-validation vector: build a catalog, validate, or resolve parameters."""

from __future__ import annotations

from typing import Any

from metewand import canonical
from metewand.suites.compute.parameters import ParameterResolutionError, resolve_parameters
from metewand.suites.compute.schema_catalog import (
    SchemaCatalog,
    SchemaCatalogError,
    SchemaValidationError,
)


def schema_case(documents: list[tuple[str, Any]], case: dict[str, Any]) -> str | None:
    expect = case["expect"]
    try:
        if case["op"] == "catalog":
            SchemaCatalog([tuple(d) for d in case["documents"]])  # type: ignore[misc]
            return f"built (Rust: {expect['error']})"
        catalog = SchemaCatalog(documents)
        if case["op"] == "resolve":
            got = resolve_parameters(catalog, case["schema"], case["defaults"], case["supplied"])
            if "error" in expect:
                return f"resolved (Rust: {expect['error']})"
            text = canonical.dumps(got).decode()
            return None if text == expect["canonical"] else f"resolved to {text}"
        return _validate(catalog, case, expect)
    except (SchemaCatalogError, SchemaValidationError, ParameterResolutionError) as exc:
        if expect.get("error") == exc.kind:
            return None
        return f"{exc.kind}: {exc} (Rust: {expect.get('error', 'accepted')})"


def _validate(catalog: SchemaCatalog, case: dict[str, Any], expect: dict[str, Any]) -> str | None:
    violations = catalog.violations(case["schema"], case["instance"])
    if expect.get("valid"):
        return None if not violations else f"violations: {violations}"
    if "error" in expect:
        return f"validated (Rust: {expect['error']})"
    if "violations" in expect and len(violations) != expect["violations"]:
        return f"{len(violations)} violations"
    if "instance_path" in expect and violations[0].instance_path != expect["instance_path"]:
        return f"at {violations[0].instance_path}"
    if len(violations) < expect.get("min_violations", 1):
        return f"{len(violations)} violations"
    if expect.get("sorted") and list(violations) != sorted(violations):
        return "violations not in a deterministic order"
    if any(not v.schema_path or not v.message for v in violations):
        return "a violation without a schema path or message"
    return None
