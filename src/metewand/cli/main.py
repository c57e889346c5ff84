"""The ``metewand`` command group.

Subcommands live in their own modules and are imported only when invoked, so
``metewand --help`` stays fast and one broken suite cannot break the others.
"""

from __future__ import annotations

import importlib

import click

# command name -> ("module:attribute", one-line help). The help is written here so that
# `metewand --help` lists the commands without importing them (tests/test_cli_help.py checks it
# against each command's own first line); a command whose module is absent is not listed.
COMMANDS: dict[str, tuple[str, str]] = {
    "measure": (
        "metewand.cli.measure_cmd:measure",
        "Run COMMAND as a measured subject: wall time, tree CPU, peak memory, PSS, processes.",
    ),
    "schema": (
        "metewand.cli.schema_cmd:schema",
        "List schema names, or print the schema NAME (pretty JSON unless --canonical/--json).",
    ),
    "plan": (
        "metewand.cli.compute_cmd:plan",
        "Show the attempts MANIFEST expands to, without running anything.",
    ),
    "run": (
        "metewand.cli.compute_cmd:run",
        "Run every attempt of MANIFEST (default metewand.toml) into OUT/RUN_ID/results.jsonl.",
    ),
    "status": (
        "metewand.cli.store_cmd:status",
        "Show the state of run RUN (a run directory or an id under ./runs).",
    ),
    "export": (
        "metewand.cli.store_cmd:export",
        "Export the attempt rows of run RUN (a run directory or an id under ./runs).",
    ),
    "clean": (
        "metewand.cli.clean_cmd:clean",
        "Remove what killed runs left behind: processes, accounting groups, temporary dirs.",
    ),
    "browser": (
        "metewand.cli.browser_cmd:browser",
        "Run headless browser engines against a task corpus over CDP.",
    ),
    "report": (
        "metewand.cli.report_cmd:report",
        "Regenerate the reports of RUN from its directory alone.",
    ),
    "compare": (
        "metewand.cli.compare_cmd:compare",
        "Compare runs of the same suite: NEW/BASE per case x implementation or task x engine.",
    ),
    "doctor": (
        "metewand.cli.doctor_cmd:doctor",
        "Check what a run needs: accounting backend, PSI, governor, swap, clock, engines, "
        "browser driver paths (Node, npm install, chromedriver, Python clients), and how busy "
        "the machine is outside metewand.",
    ),
    "inspect": (
        "metewand.cli.inspect_cmd:inspect",
        "Show one attempt: status, failure class, origin, checks, errors, measurements, artifacts.",
    ),
    "history": (
        "metewand.cli.history_cmd:history",
        "Every run kept in one DuckDB file; a metric over commits per group; change points.",
    ),
    "examples": (
        "metewand.cli.examples_cmd:examples",
        "List the examples shipped with metewand, or copy them into a directory to run or edit.",
    ),
    "conformance": (
        "metewand.cli.conformance_cmd:conformance",
        "Check every vector of the Rust metewand's fixtures; print the per-family table.",
    ),
    "reference-cases": (
        "metewand.cli.conformance_cmd:reference_cases",
        "Run the reference cases of MANIFEST's problem contracts through their evaluators.",
    ),
    "demo": (
        "metewand.cli.demo_cmd:demo",
        "Run metewand's main job end to end and end with a verdict per suite.",
    ),
}


def _available(target: str) -> bool:
    import importlib.util  # for the listing only: running a command needs no spec lookup

    module = target.split(":", 1)[0]
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, (target, _) in COMMANDS.items() if _available(target))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name, ("", ""))[0]
        if not target:
            return None
        module_name, attr = target.split(":", 1)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:  # the command's module is there; something it needs is not
                raise
            return None  # the command's module is absent: not a command here
        command = getattr(module, attr)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the table above: no subcommand module is imported for it."""
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="metewand", prog_name="metewand")
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
