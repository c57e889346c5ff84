"""`metewand schema [NAME]`: list the shipped JSON Schemas, or print one."""

from __future__ import annotations

import json

import click

from metewand import canonical
from metewand.cli import exit_codes


@click.command("schema")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine output: canonical JSON.")
@click.option(
    "--canonical", "as_canonical", is_flag=True, help="Print the schema as canonical JSON."
)
def schema(name: str | None, as_json: bool, as_canonical: bool) -> None:
    """List schema names, or print the schema NAME (pretty JSON unless --canonical/--json).

    \b
    Examples:
      metewand schema
      metewand schema measurements-v2
      metewand schema attempt --json
    """
    from metewand.runtime import schemas  # jsonschema: only when a schema is asked for

    if name is None:
        names = schemas.list_schemas()
        click.echo(canonical.dumps_str(names) if as_json else "\n".join(names))
        return
    try:
        document = schemas.load_schema(name)
    except schemas.UnknownSchemaError:
        click.echo(
            f"error: unknown schema {name!r}; known: {', '.join(schemas.list_schemas())}",
            err=True,
        )
        raise SystemExit(exit_codes.INVALID_INPUT) from None
    if as_json or as_canonical:
        click.echo(canonical.dumps_str(document))
    else:
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
