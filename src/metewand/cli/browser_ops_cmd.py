"""`metewand browser ops`: the driver op matrix (drivers/ops.json)."""

from __future__ import annotations

import sys

import click

from metewand import canonical
from metewand.cli import exit_codes


@click.command(name="ops")
@click.option(
    "--path", "path_key", default=None, help="Only this driver path: each op's call or refusal."
)
@click.option("--json", "as_json", is_flag=True, help="Canonical JSON on stdout.")
@click.option("--markdown", is_flag=True, help="The matrix as docs/driver-ops.md holds it.")
def ops(path_key: str | None, as_json: bool, markdown: bool) -> None:
    """Every op of the driver vocabulary on every installable driver path: implemented (the
    library call) or refused (why the library cannot express it).

    \b
    Examples:
      metewand browser ops
      metewand browser ops --path selenium
    """
    from metewand.errors import MetewandError
    from metewand.suites.browser.driver_ops import load_matrix
    from metewand.suites.browser.driver_ops import markdown as as_markdown

    try:
        matrix = load_matrix()
    except MetewandError as exc:  # a malformed drivers/ops.json: its file and key, exit 2
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    if path_key is not None and path_key not in matrix.paths:
        click.echo(f"error: --path {path_key}: not one of {', '.join(matrix.paths)}", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    done, total = matrix.coverage()
    if as_json:
        click.echo(
            canonical.dumps(
                {
                    "paths": matrix.paths,
                    "ops": list(matrix.ops),
                    "implemented": done,
                    "cells": total,
                }
            ).decode()
        )
        return
    if markdown:
        click.echo(as_markdown(matrix))
        return
    if path_key is not None:
        for cell in (c for c in matrix.cells() if c.path == path_key):
            text = (
                cell.call if cell.implemented else f"REFUSED: {matrix.refusal(cell.op, path_key)}"
            )
            click.echo(f"  {cell.op:<24} {text}")
        return
    keys = list(matrix.paths)
    click.echo(f"{'op':<24}" + "".join(f"{k[:10]:>11}" for k in keys))
    for o in matrix.ops:
        click.echo(
            f"{o['op']:<24}"
            + "".join(f"{'yes' if 'call' in o['cells'][k] else 'REFUSED':>11}" for k in keys)
        )
    per_path = {k: sum(1 for c in matrix.cells() if c.path == k and c.implemented) for k in keys}
    click.echo(f"{'implemented':<24}" + "".join(f"{per_path[k]:>11}" for k in keys))
    click.echo(
        f"{done} of {total} cells implemented ({100 * done / total:.1f}%) over {len(keys)} paths"
    )
    click.echo("refused:")
    for cell in (c for c in matrix.cells() if not c.implemented):
        click.echo(f"  {cell.path:<24} {matrix.refusal(cell.op, cell.path)}")
