"""``metewand examples list`` / ``copy DIR``: the compute examples shipped inside the package.

The examples live in the repository's ``examples/``; ``metewand/data/examples`` is a link to it,
so a checkout and an installed wheel (where the link became real files) find them at the same
place, ``packaged_examples()``. An example is a directory holding a ``metewand.toml``; its first
comment line describes it.
"""

from __future__ import annotations

import errno
import shutil
import sys
import tempfile
from pathlib import Path

import click

import metewand
from metewand.cli import exit_codes
from metewand.runtime import rundir

MANIFEST = "metewand.toml"
COPY_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "runs")


def packaged_examples() -> Path:
    """Where the examples are: inside the installed package (a link to examples/ in a checkout)."""
    return (Path(metewand.__file__).parent / "data" / "examples").resolve()


def example_names() -> list[str]:
    root = packaged_examples()
    return (
        sorted(p.name for p in root.iterdir() if (p / MANIFEST).is_file()) if root.is_dir() else []
    )


def example_manifest(name: str) -> Path:
    return packaged_examples() / name / MANIFEST


def describe(name: str) -> str:
    """The first sentence of the manifest's opening comment (what the example compares)."""
    words: list[str] = []
    for line in example_manifest(name).read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if not text.startswith("#") or text.startswith(("#  ", "#\t")) or not text.strip("# "):
            break  # the opening paragraph ends at code, a blank comment or an indented command
        words += text.lstrip("#").split()
    paragraph = " ".join(words)
    return paragraph.split(". ", 1)[0].rstrip(".:") + "." if paragraph else ""


@click.group()
def examples() -> None:
    """List the examples shipped with metewand, or copy them into a directory to run or edit.

    \b
    Examples:
      metewand examples list
      metewand examples copy my-examples
    """


@examples.command(name="list")
def list_cmd() -> None:
    """Each example's name, what it compares, and its manifest inside the package.

    \b
    Examples:
      metewand examples list
    """
    names = example_names()
    if not names:
        click.echo(f"error: no examples found in {packaged_examples()}", err=True)
        sys.exit(exit_codes.ENVIRONMENT_MISSING)
    for name in names:
        click.echo(f"{name}: {describe(name)}")
        click.echo(f"  {example_manifest(name)}")


@examples.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.argument("names", nargs=-1)
def copy(directory: Path, names: tuple[str, ...]) -> None:
    """Copy the examples NAMES (default: all) into DIRECTORY/NAME, ready for `metewand run`.

    An example already there is refused (exit 2) and nothing is copied.

    \b
    Examples:
      metewand examples copy my-examples
    """
    known = example_names()
    unknown = sorted(set(names) - set(known))
    if unknown:
        click.echo(
            f"error: no example {', '.join(unknown)}; there are: {', '.join(known)}", err=True
        )
        sys.exit(exit_codes.INVALID_INPUT)
    chosen = list(names) or known
    taken = [str(directory / name) for name in chosen if (directory / name).exists()]
    if taken:
        click.echo(f"error: {', '.join(taken)} already exists; nothing was copied", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name in chosen:
            _copy_whole(packaged_examples() / name, directory / name)
    except OSError as exc:
        click.echo(
            f"error: {exc.filename or directory}: cannot be written ({exc.strerror})", err=True
        )
        sys.exit(exit_codes.INVALID_INPUT)
    for name in chosen:
        click.echo(f"copied {name} to {directory / name}; run it with:")
        click.echo(f"  metewand run {directory / name / MANIFEST}")


def _copy_whole(source: Path, target: Path) -> None:
    """Into a temporary sibling first, then renamed: a failed copy leaves nothing half-written."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        shutil.copytree(source, staging / target.name, ignore=COPY_IGNORED)
        if not rundir.publish_dir(staging / target.name, target, replace=False):
            raise FileExistsError(errno.EEXIST, "it appeared meanwhile", str(target))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
