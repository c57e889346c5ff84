"""``metewand measure``: run one command as a measured subject and report what it cost."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from metewand import canonical
from metewand.cli import exit_codes

# The measure modules are imported when a command is measured, so `--help` stays fast; the
# backend names are spelled here (tests/test_cli_help.py checks them against measure.accounting).
BACKEND_CHOICES = ("cgroup2", "cgroup1", "proc")
if TYPE_CHECKING:
    from metewand.measure.forms import Measurement
    from metewand.measure.subject import SubjectReport


def _format_value(name: str, m: Measurement) -> str:
    if m.value is None:
        return "—"
    if name.endswith("_ns"):
        return f"{m.value / 1e6:,.1f} ms"
    if name.endswith("_bytes"):
        return f"{m.value / 2**20:,.1f} MiB"
    return str(m.value)


def _print_table(report: SubjectReport) -> None:
    from rich.console import Console
    from rich.table import Table

    from metewand.measure.subject import MEASUREMENT_FIELDS

    table = Table(title=f"metewand measure ({report.backend})", title_justify="left")
    for column in ("measurement", "value", "status", "source"):
        table.add_column(column)
    for name in MEASUREMENT_FIELDS:
        m = report.measurements[name]
        status = m.status.value + (f" ({m.reason.value})" if m.reason else "")
        table.add_row(name, _format_value(name, m), status, m.source or "")
    console = Console(stderr=True)
    console.print(table)
    ended = f"signal {report.signal}" if report.signal else f"exit status {report.exit_status}"
    console.print(f"command ended with {ended}")
    console.print("quality flags: " + (", ".join(f.value for f in report.quality_flags) or "none"))
    for reason in report.fallback_reasons:
        console.print(f"fallback: {reason}")
    console.print(
        f"sampler: {report.sampler.tick_count} ticks, {report.sampler.pss_sample_count} PSS scans, "
        f"{report.sampler.sampler_cpu_ns / 1e6:.1f} ms CPU"
    )


@click.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--backend",
    type=click.Choice(["auto", *BACKEND_CHOICES]),
    default="auto",
    show_default=True,
    help="Tree accounting backend; auto tries cgroup2, cgroup1, then /proc and says why.",
)
@click.option("--interval-ms", type=click.IntRange(min=1), default=100, show_default=True,
              help="Milliseconds between samples of the process tree.")  # fmt: skip
@click.option(
    "--pss-every",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Longest gap between PSS scans, in ticks; a rise of the tree's memory or a change "
    "of its members triggers one sooner (cheap counters are read every tick).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one canonical-JSON object on stdout.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def measure(
    backend: str, interval_ms: int, pss_every: int, as_json: bool, command: tuple[str, ...]
) -> None:
    """Run COMMAND as a measured subject: wall time, tree CPU, peak memory, PSS, processes.

    \b
    Examples:
      metewand measure -- python3 -c "print(1)"
      metewand measure --json -- python3 -c "print(1)"

    \b
    Exit status: the command's own (128 + N when signal N ended it).
    127: the command was not found; 126: it could not be executed;
    3: the requested backend is unavailable here. Messages go to stderr.
    The table goes to stderr so the command's stdout stays its own; --json goes to stdout.
    """
    from metewand.measure.accounting import AccountingUnavailable
    from metewand.measure.subject import SubjectStartError, run_measured

    try:
        report = run_measured(
            list(command), backend=backend, interval_ms=interval_ms, pss_every=pss_every
        )
    except SubjectStartError as exc:
        click.echo(f"metewand measure: {exc}", err=True)
        sys.exit(exc.exit_code)
    except AccountingUnavailable as exc:
        click.echo(f"metewand measure: backend unavailable: {exc}", err=True)
        sys.exit(exit_codes.ENVIRONMENT_MISSING)
    if as_json:
        sys.stdout.buffer.write(canonical.line(report.to_json()))
        sys.stdout.flush()
    else:
        _print_table(report)
    sys.exit(report.shell_exit_status)
