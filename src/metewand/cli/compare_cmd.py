"""``metewand compare BASE NEW``: per group NEW/BASE with a CI, a regression gate for CI."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from metewand.cli import exit_codes
from metewand.cli.rundirs import resolve_run_dir

FORMATS = ("md", "json", "html")
REGRESSION_EXIT = 1


def _formats(value: str | None) -> list[str]:
    chosen = [f.strip() for f in (value or "").split(",") if f.strip()]
    unknown = sorted(set(chosen) - set(FORMATS))
    if unknown:
        raise click.BadParameter(f"unknown format(s) {unknown}; choose from {list(FORMATS)}")
    return chosen


def _threshold(value: str) -> float:
    text = value.strip().removesuffix("%")
    try:
        percent = float(text)
    except ValueError:
        raise click.BadParameter(f"--threshold {value!r} is not a percentage") from None
    if not 0 <= percent < 100:
        raise click.BadParameter(f"--threshold {value!r} must be in [0, 100)")
    return percent / 100


def _print_table(result: dict[str, Any]) -> None:
    from rich.table import Table

    from metewand.cli.tables import console as table_console
    from metewand.cli.tables import print_table
    from metewand.compare import compare_render
    from metewand.compare.driver_costs import ROLLUP_HEAD, rollup_rows

    console = table_console()
    if result["provenance_differences"]:
        console.print("[bold]provenance differences (the comparison may be suspect):[/bold]")
        for row in compare_render.provenance_rows(result):
            console.print(f"  {row[0]}: BASE {row[1]} / NEW {row[2]}", markup=False)
    for warning in result["warnings"]:
        console.print(f"warning: {warning}", markup=False)
    table = Table(title=compare_render.headline(result), title_justify="left")
    for column in (*result["group_names"], *compare_render.HEADER):
        table.add_column(column)
    for row in compare_render.group_rows(result, short=True):
        table.add_row(*row)
    print_table(table, out=console)
    for name, entries in result.get("rollups", {}).items():
        rollup = Table(title=f"per {name.replace('_', ' ')}", title_justify="left")
        for column in (name, *ROLLUP_HEAD):
            rollup.add_column(column)
        for cells in rollup_rows(entries, name):
            rollup.add_row(*cells)
        print_table(rollup, out=console)
    for row in compare_render.unmatched_rows(result):
        console.print(f"unmatched: {row[0]}: {' x '.join(row[1:])}", markup=False)
    for reason in result["regression_reasons"]:
        console.print(f"regression: {reason}", markup=False)


def _write(result: dict[str, Any], formats: list[str], out_dir: Path) -> dict[str, Path]:
    from metewand import canonical
    from metewand.compare import compare_render
    from metewand.runtime.rundir import write_atomic

    out_dir.mkdir(parents=True, exist_ok=True)
    render = {
        "md": lambda: compare_render.markdown(result).encode("utf-8"),
        "json": lambda: canonical.dumps(result) + b"\n",
        "html": lambda: compare_render.html(result).encode("utf-8"),
    }
    written = {}
    for fmt in formats:
        written[fmt] = out_dir / f"compare.{fmt}"
        write_atomic(written[fmt], render[fmt]())
    return written


# as the compute planner caps attempts: past this a CI's Monte Carlo error is far below what the
# repetitions themselves allow, and the time and memory grow without bound
MAX_RESAMPLES = 100_000


@click.command("compare")
@click.argument("base")
@click.argument("new")
@click.option(
    "--metric",
    default=None,
    help="Default: timed_wall_time_ns (compute), duration_ms (browser). Also cpu_time_ns, "
    "peak_rss_bytes, phase timers, compute phase marks such as phase.execute.cpu_ns "
    "(phase.<name>.wall_ns|cpu_ns|memory_peak_bytes); browser resource metrics such as "
    "cpu_total_ms, pss_peak_bytes, and the engine group's browser phases (phase.scene.cpu_ns, "
    "phase.step1:Runtime.evaluate.wall_ns).",
)
@click.option(
    "--threshold",
    default="5%",
    show_default=True,
    help="Slower/faster only when the whole 95% CI of NEW/BASE lies beyond this.",
)
@click.option(
    "--format", "fmt", default=None, help="Also write compare.{md,json,html}: md,json,html."
)
@click.option("--out", "out_dir", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Where --format writes compare.md/json/html.")  # fmt: skip
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when a group is slower beyond the threshold or a pass turned into a non-pass.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON on stdout.")
@click.option("--resamples", type=click.IntRange(min=100, max=MAX_RESAMPLES), default=2000,
              show_default=True,
              help=f"Bootstrap resamples of each confidence interval (at most {MAX_RESAMPLES}).")  # fmt: skip
@click.option("--seed", type=int, default=20240607, show_default=True,
              help="Seed of the bootstrap (the same seed gives the same intervals).")  # fmt: skip
def compare(
    base: str,
    new: str,
    metric: str | None,
    threshold: str,
    fmt: str | None,
    out_dir: str,
    fail_on_regression: bool,
    as_json: bool,
    resamples: int,
    seed: int,
) -> None:
    """Compare two runs of the same suite: NEW/BASE per case x implementation or task x engine.

    BASE and NEW are run directories, run ids under ./runs, or latest.

    \b
    Groups present in only one run are listed, never dropped. Browser status changes
    (pass -> fail, ...) are listed. Provenance differences come first.
    \b
    Examples:
      metewand compare sort1 sort2
      metewand compare runs/sort1 runs/sort2 --fail-on-regression --threshold 5%
      metewand compare sort1 sort2 --metric cpu_time_ns --format md,json,html --out cmp
    \b
    Exit status: 0; 1 with --fail-on-regression when something regressed;
    2 when the runs cannot be read or compared.
    """
    from metewand import canonical
    from metewand.compare.run_compare import CompareError, compare_runs
    from metewand.compare.rundir import RunDirError, load_run

    base, new = str(resolve_run_dir(base, what="BASE")), str(resolve_run_dir(new, what="NEW"))

    try:
        formats = _formats(fmt)
        result = compare_runs(
            load_run(base), load_run(new), metric, _threshold(threshold), resamples, seed
        )
        written = _write(result, formats, Path(out_dir))
    except (RunDirError, CompareError, click.BadParameter) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)  # 2: invalid input, for click's refusals too
    except OSError as exc:  # --out names a file, or a directory we may not write
        click.echo(f"error: cannot write into {out_dir}: {exc.strerror or exc}", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    if as_json:
        click.echo(canonical.dumps_str(result))
    else:
        _print_table(result)
        for kind, path in sorted(written.items()):
            click.echo(f"{kind:5} {path}")
    if fail_on_regression and result["regression"]:
        sys.exit(REGRESSION_EXIT)
