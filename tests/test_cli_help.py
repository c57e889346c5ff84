"""Help that costs nothing and says everything: the top-level list comes from a static table
(so it imports no subcommand), no ``--help`` imports numpy, matplotlib, scipy or the statistics,
and every option of every command has help text. (Timing: benchmarks/cli_startup.py.)"""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from metewand.cli.main import COMMANDS, cli

HEAVY = (
    "numpy",
    "matplotlib",
    "scipy",
    "metewand.compare.stats",
    "jsonschema",
    "aiohttp",
    "importlib.metadata",
    "metewand.measure.accounting",
)
PROBE = """
import sys
from metewand.cli.main import main
sys.argv = ["metewand", *sys.argv[1:], "--help"]
try:
    main()
except SystemExit:
    pass
heavy = [m for m in {heavy!r} if m in sys.modules]
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


def _walk(
    command: click.Command, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            found += _walk(sub, (*path, name))
    return found


def test_the_static_command_table_matches_each_command() -> None:
    ctx = click.Context(cli)
    for name, (_, short_help) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None, name
        assert command.get_short_help_str(limit=200) == short_help, name


def test_measure_offers_exactly_the_accounting_backends() -> None:
    from metewand.cli.measure_cmd import BACKEND_CHOICES
    from metewand.measure.accounting import BACKENDS

    assert tuple(BACKEND_CHOICES) == tuple(BACKENDS)


def test_every_option_has_help_text() -> None:
    missing = [
        f"metewand {' '.join(path)} {'/'.join(param.opts)}"
        for path, command in _walk(cli)
        for param in command.params
        if isinstance(param, click.Option) and not param.help
    ]
    assert missing == []


@pytest.mark.parametrize("path", [p for p, _ in _walk(cli)], ids=lambda p: " ".join(p) or "top")
def test_help_imports_nothing_heavy(path: tuple[str, ...]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *path],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Usage: metewand" in done.stdout, done.stderr
    assert "HEAVY:\n" in done.stderr, done.stderr
