"""The ``metewand`` command group.

Subcommands live in their own modules and are imported only when invoked, so
``metewand --help`` stays fast and one broken suite cannot break the others.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from metewand import __version__

# command name -> "module:attribute"; a command whose module is absent is not listed.
COMMANDS: dict[str, str] = {
    "measure": "metewand.cli.measure_cmd:measure",
    "schema": "metewand.cli.schema_cmd:schema",
    "plan": "metewand.cli.compute_cmd:plan",
    "run": "metewand.cli.compute_cmd:run",
    "status": "metewand.cli.store_cmd:status",
    "export": "metewand.cli.store_cmd:export",
    "browser": "metewand.cli.browser_cmd:browser",
    "report": "metewand.cli.report_cmd:report",
    "compare": "metewand.cli.compare_cmd:compare",
    "doctor": "metewand.cli.doctor_cmd:doctor",
    "inspect": "metewand.cli.inspect_cmd:inspect",
    "demo": "metewand.cli.demo_cmd:demo",
}


def _available(target: str) -> bool:
    module = target.split(":", 1)[0]
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, target in COMMANDS.items() if _available(target))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not _available(target):
            return None
        module_name, attr = target.split(":", 1)
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="metewand")
def cli() -> None:
    """metewand: benchmark programs as processes and tell the truth about what they cost.

    \b
    Examples:
      metewand measure -- python3 -c "print(1)"
      metewand run examples/sorting/metewand.toml
      metewand browser run --engines chrome,lightpanda --k 1
      metewand doctor
    """


def main() -> None:
    cli(prog_name="metewand")


if __name__ == "__main__":
    main()
