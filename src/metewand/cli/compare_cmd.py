"""``metewand compare BASE NEW``: per group NEW/BASE with a CI, a regression gate for CI."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from metewand.cli import compare_history, exit_codes
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
    for note in compare_render.notes(result):
        console.print(f"note: {note}", markup=False)
    table = Table(title=compare_render.headline(result), title_justify="left")
    for column in compare_render.header(result, short=True):
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


def _sides(
    runs: tuple[str, ...], base: tuple[str, ...], new: tuple[str, ...]
) -> tuple[list[str], list[str]]:
    """BASE and NEW runs from ``BASE NEW`` and/or repeated ``--base`` / ``--new``."""
    if len(runs) not in (0, 2):
        raise click.BadParameter(
            f"give two runs (BASE NEW), or --base/--new; got {len(runs)} run argument(s)"
        )
    base_runs = [*runs[:1], *base]
    new_runs = [*runs[1:], *new]
    if not base_runs or not new_runs:
        raise click.BadParameter("each side needs a run: BASE NEW, or --base RUN and --new RUN")
    return base_runs, new_runs


def _engines(value: str) -> tuple[str, str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    if len(names) != 2 or names[0] == names[1]:
        raise click.BadParameter(f"--ab-engines {value!r}: name two engines, A,B (B/A is judged)")
    return names[0], names[1]


def _load(runs: list[str], what: str) -> list[Any]:
    from metewand.compare.rundir import load_run

    return [load_run(resolve_run_dir(run, what=what)) for run in runs]


def _compute(options: dict[str, Any]) -> dict[str, Any]:
    """The comparison the options ask for (raises the library's errors and BadParameter)."""
    from metewand.compare.ab_compare import compare_ab, compare_engines
    from metewand.compare.run_compare import compare_runs

    rules = {
        "threshold": _threshold(options["threshold"]),
        "resamples": options["resamples"],
        "seed": options["seed"],
        "min_units": options["min_units"],
        "alpha": options["alpha"],
    }
    runs, base, new = options["runs"], options["base_runs"], options["new_runs"]
    if options["ab_runs"]:
        if runs or base or new or options["ab_engines"]:
            raise click.BadParameter("--ab takes the A/B runs alone (no BASE NEW, --base, --new)")
        loaded = _load(list(options["ab_runs"]), "--ab")
        return compare_ab(loaded, options["metric"], **rules, speed_adjust=options["speed_adjust"])
    if options["ab_engines"]:
        if not runs or base or new:
            raise click.BadParameter("--ab-engines A,B takes one or more browser runs: RUN...")
        loaded = _load(list(runs), "RUN")
        return compare_engines(loaded, _engines(options["ab_engines"]), options["metric"], **rules)
    base_runs, new_runs = _sides(runs, base, new)
    base_data, new_data = _load(base_runs, "BASE"), _load(new_runs, "NEW")
    between, account = compare_history.between_run(options, base_data, new_data)
    result = compare_runs(
        base_data,
        new_data,
        options["metric"],
        **rules,
        between_run=between,
        speed_adjust=options["speed_adjust"],
        use_controls=options["controls"],
        use_cross_section=options["cross_section"],
    )
    result["statistics"]["history"] = account
    return result


def _refuse_polluted(result: dict[str, Any]) -> None:
    """--fail-on-regression on wall time over a polluted run: exit 2, naming the conditions."""
    from metewand.compare.pollution import WALL, polluted_runs_text

    polluted = polluted_runs_text(result["pollution"])
    if result["metric_family"] != WALL or not polluted:
        return
    click.echo(
        f"error: --fail-on-regression refuses to judge wall time ({result['metric']}) over a "
        "polluted host; the pollution gate failed for:",
        err=True,
    )
    for line in polluted:
        click.echo(f"  {line}", err=True)
    companion = result.get("companion_metric") or "cpu_time_ns"
    click.echo(
        f"judge a CPU metric (--metric {companion}), rerun on a quiet host, or pass "
        "--allow-polluted to gate on wall time anyway",
        err=True,
    )
    sys.exit(exit_codes.INVALID_INPUT)


# as the compute planner caps attempts: past this a CI's Monte Carlo error is far below what the
# repetitions themselves allow, and the time and memory grow without bound
MAX_RESAMPLES = 100_000


@click.command("compare")
@click.argument("runs", nargs=-1)
@click.option(
    "--base",
    "base_runs",
    multiple=True,
    metavar="RUN",
    help="A BASE run; repeat for several (runs become a level of the statistics).",
)
@click.option(
    "--new", "new_runs", multiple=True, metavar="RUN", help="A NEW run; repeat for several."
)
@click.option(
    "--ab",
    "ab_runs",
    multiple=True,
    metavar="RUN",
    help="An interleaved A/B compute run (run --ab-baseline): NEW/BASE from its pairs; "
    "repeat for several.",
)
@click.option(
    "--speed-adjust/--no-speed-adjust",
    default=True,
    show_default=True,
    help="Adjust each worker process's time for the speed it ran at, read from its prepare "
    "CPU (compute; separate runs: only implementations whose code is the same on both "
    "sides). The unadjusted figures stay in the JSON (docs/DESIGN.md).",
)
@click.option(
    "--controls/--no-controls",
    default=True,
    show_default=True,
    help="Separate runs on one host: read each implementation against the drift that the "
    "other implementations whose code is the same on both sides read, so the host's drift "
    "between the runs is not called a change. The figures before stay in the JSON.",
)
@click.option(
    "--cross-section/--no-cross-section",
    default=True,
    show_default=True,
    help="One run per side and no run history: estimate each group's between-run noise "
    "across the other groups whose code is the same on both sides, so that a move of one "
    "group between two runs is not called a change (docs/DESIGN.md).",
)
@click.option(
    "--ab-engines",
    default=None,
    metavar="A,B",
    help="Browser: B/A per task from the paired attempts of two engines of RUN.",
)
@click.option(
    "--metric",
    default=None,
    help="Default: timed_wall_time_ns (compute), duration_ms (browser). Also cpu_time_ns, "
    "peak_rss_bytes, phase timers, compute phase marks such as phase.execute.cpu_ns "
    "(phase.<name>.wall_ns|cpu_ns|memory_peak_bytes); browser engine_cpu_ns, resource metrics "
    "such as cpu_total_ms, pss_peak_bytes, and the engine group's browser phases "
    "(phase.scene.cpu_ns, phase.step1:Runtime.evaluate.wall_ns).",
)
@click.option(
    "--threshold",
    default="5%",
    show_default=True,
    help="Slower/faster only when the whole 95% CI of NEW/BASE lies beyond this.",
)
@click.option(
    "--min-units",
    type=click.IntRange(min=2),
    default=5,
    show_default=True,
    help="Independent units (runs, process launches, pairs) a side needs for a "
    "verdict; fewer is 'not comparable'.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="False-discovery rate of the rank tests over the groups (Benjamini-Hochberg).",
)
@click.option(
    "--format", "fmt", default=None, help="Also write compare.{md,json,html}: md,json,html."
)
@click.option(
    "--out",
    "out_dir",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where --format writes compare.md/json/html.",
)
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when a group is slower beyond the threshold or a pass turned into a non-pass.",
)
@click.option(
    "--allow-polluted",
    is_flag=True,
    help="Let --fail-on-regression judge a wall-time metric although a run's host "
    "pollution gate failed (refused with exit 2 otherwise).",
)
@compare_history.history_options
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON on stdout.")
@click.option(
    "--resamples",
    type=click.IntRange(min=100, max=MAX_RESAMPLES),
    default=2000,
    show_default=True,
    help=f"Bootstrap resamples of each confidence interval (at most {MAX_RESAMPLES}).",
)
@click.option(
    "--seed",
    type=int,
    default=20240607,
    show_default=True,
    help="Seed of the bootstrap (the same seed gives the same intervals).",
)
def compare(**options: Any) -> None:
    """Compare runs of the same suite: NEW/BASE per case x implementation or task x engine.

    BASE and NEW are run directories, run ids under ./runs, or latest; --base/--new add runs
    to a side. --ab reads an interleaved A/B run; --ab-engines A,B two engines of one run.

    \b
    Groups present in only one run are listed, never dropped. Browser status changes
    (pass -> fail, ...) are listed. Provenance differences come first.
    \b
    Examples:
      metewand compare sort1 sort2
      metewand compare runs/sort1 runs/sort2 --fail-on-regression --threshold 5%
      metewand compare sort1 sort2 --metric cpu_time_ns --format md,json,html --out cmp
      metewand compare --base sort1 --base sort2 --new sort3 --new sortd
      metewand compare --ab-engines chrome,lightpanda base1
    \b
    Exit status: 0; 1 with --fail-on-regression when something regressed; 2 when the runs
    cannot be read or compared, or when --fail-on-regression would judge wall time over a
    polluted host (without --allow-polluted).
    """
    from metewand import canonical
    from metewand.compare.compare_render import notes
    from metewand.compare.rundir import RunDirError
    from metewand.compare.suite_registry import CompareError

    out_dir = options["out_dir"]
    try:
        formats = _formats(options["fmt"])
        result = _compute(options)
        written = _write(result, formats, Path(out_dir))
    except (RunDirError, CompareError, click.BadParameter, compare_history.HistoryUnusable) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)  # 2: invalid input, for click's refusals too
    except OSError as exc:  # --out names a file, or a directory we may not write
        click.echo(f"error: cannot write into {out_dir}: {exc.strerror or exc}", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    if options["as_json"]:
        click.echo(canonical.dumps_str(result))
    else:
        _print_table(result)
        for kind, path in sorted(written.items()):
            click.echo(f"{kind:5} {path}")
    if not options["fail_on_regression"]:
        return
    if not options["allow_polluted"]:
        _refuse_polluted(result)
    for note in notes(result):
        if "not counted by the gate" in note:
            click.echo(f"gate: {note}", err=True)
    if result["regression"]:
        sys.exit(REGRESSION_EXIT)
