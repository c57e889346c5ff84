"""``metewand history``: every run kept in one DuckDB file, trends over commits, change points.

The store is ``--history PATH``, else ``$METEWAND_HISTORY``, else ``history.duckdb`` beside the
run store (``--out``, default ``runs/``). Runs add themselves at their end (``run`` and ``browser
run``, unless ``--no-history``); ``history add`` adds existing ones, ours or the peer's.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from metewand.cli import exit_codes
from metewand.cli.rundirs import resolve_run_dir

HISTORY_EXAMPLES = """\b
Examples:
  metewand history add runs/base runs/new
  metewand history check --fail-on-change
  metewand history list
  metewand history show --implementation python-heapsort --last 10
  metewand history report --out history-site
  metewand history export --parquet history-parquet
  metewand history import --parquet history-parquet
"""


def _examples(*commands: str) -> str:
    return "\b\nExamples:\n" + "".join(f"  {c}\n" for c in commands)


FILTERS = (
    ("--case", "task", "Compute: cases whose label contains this text."),
    ("--implementation", "subject", "Compute: this implementation."),
    ("--task", "task", "Browser: tasks whose id contains this text."),
    ("--engine", "subject", "Browser: this engine."),
    ("--driver", "driver", "Browser: driver paths containing this text."),
)


def history_option(command: Any) -> Any:
    command = click.option(
        "--history",
        "history_path",
        default=None,
        metavar="PATH",
        help="The history file (default: $METEWAND_HISTORY, else history.duckdb beside --out).",
    )(command)
    return click.option(
        "--out", "out_dir", default="runs", show_default=True, help="Where runs live."
    )(command)


def filter_options(command: Any) -> Any:
    for flag, _, text in reversed(FILTERS):
        command = click.option(flag, default=None, help=text)(command)
    command = click.option(
        "--suite",
        type=click.Choice(["compute", "browser"]),
        default=None,
        help="Only this suite's runs.",
    )(command)
    return command


def _path(history_path: str | None, out_dir: str) -> Path:
    from metewand.history.store import resolve_path

    return resolve_path(history_path, out_dir)


def _filters(suite: str | None, opts: dict[str, Any], since: str | None = None) -> Any:
    from metewand.history.series import Filters

    chosen: dict[str, Any] = {"suite": suite, "since": since}
    for flag, field, _ in FILTERS:
        value = opts.get(flag.lstrip("-"))
        if value is not None:
            chosen[field] = value
    return Filters(**chosen)


def _fail(exc: Exception) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(getattr(exc, "exit_code", exit_codes.INVALID_INPUT))


@click.group(epilog=HISTORY_EXAMPLES)
def history() -> None:
    """Every run kept in one DuckDB file; a metric over commits per group; change points."""


@history.command("add", epilog=_examples("metewand history add runs/base runs/new"))
@click.argument("runs", nargs=-1, required=True)
@history_option
def add(runs: tuple[str, ...], history_path: str | None, out_dir: str) -> None:
    """Add runs (directories or ids under --out; ours or the peer's) to the history.

    Adding a run again changes nothing; a run that was resumed since replaces its entry.
    """
    from metewand.errors import MetewandError
    from metewand.history.ingest import add_runs

    path = _path(history_path, out_dir)
    dirs = [resolve_run_dir(run, out_dir) for run in runs]
    try:
        for added in add_runs(path, dirs):
            torn = (
                f"; torn last line left out ({added.torn_tail_bytes} bytes)"
                if added.torn_tail_bytes
                else ""
            )
            click.echo(
                f"{added.outcome}: {added.run_id} ({added.suite}, {added.attempts} "
                f"attempts, {added.values} values){torn}"
            )
    except MetewandError as exc:
        _fail(exc)
    click.echo(f"history: {path}")


@history.command("list", epilog=_examples("metewand history list"))
@click.option(
    "--suite",
    type=click.Choice(["compute", "browser"]),
    default=None,
    help="Only this suite's runs.",
)
@click.option("--since", default=None, metavar="DATE", help="Runs started at or after DATE.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run.")
@history_option
def list_runs(
    suite: str | None, since: str | None, as_json: bool, history_path: str | None, out_dir: str
) -> None:
    """The runs in the history, oldest first: id, suite, state, start, commit, host, gate."""
    from metewand import canonical
    from metewand.errors import MetewandError
    from metewand.history.store import reading

    try:
        with reading(_path(history_path, out_dir)) as con:
            rows = _run_list(con, suite, since)
    except MetewandError as exc:
        _fail(exc)
    if as_json:
        for row in rows:
            click.echo(canonical.dumps_str(row))
        return
    _print_run_table(rows)


def _run_list(con: Any, suite: str | None, since: str | None) -> list[dict[str, Any]]:
    import duckdb

    where, params = [], {}
    if suite:
        where.append("suite = $suite")
        params["suite"] = suite
    if since:
        where.append("started_at >= CAST($since AS TIMESTAMPTZ)")
        params["since"] = since
    sql = (
        "SELECT run_id, suite, layout, state, started_at, git_commit, git_branch, git_dirty, "
        "host_fingerprint, pollution_passed, rows_total, run_dir FROM runs "
        + ("WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY started_at, run_id"
    )
    try:
        cursor = con.execute(sql, params)
    except duckdb.Error as exc:
        from metewand.history.store import HistoryError

        raise HistoryError(f"--since {since!r}: {str(exc).splitlines()[0]}") from None
    names = [d[0] for d in cursor.description]
    out = []
    for row in cursor.fetchall():
        item = dict(zip(names, row, strict=True))
        item["started_at"] = item["started_at"].isoformat() if item["started_at"] else None
        out.append(item)
    return out


def _print_run_table(rows: list[dict[str, Any]]) -> None:
    from rich.table import Table
    from rich.text import Text

    from metewand.cli.tables import print_table

    table = Table(title=f"{len(rows)} runs")
    for column in ("run", "suite", "state", "started", "commit", "host", "gate", "rows"):
        table.add_column(column)
    gates = {True: Text("passed"), False: Text("polluted", style="red"), None: Text("-")}
    for row in rows:
        commit = (row["git_commit"] or "-")[:10] + (" (dirty)" if row["git_dirty"] else "")
        cells = (
            row["run_id"],
            row["suite"] + (" (peer)" if row["layout"] == "peer" else ""),
            str(row["state"]),
            str(row["started_at"])[:19],
            commit,
            str(row["host_fingerprint"] or "-")[:8],
        )
        # Text, not markup: a run id or label with [brackets] is shown as written
        table.add_row(
            *map(Text, cells), gates[row["pollution_passed"]], Text(str(row["rows_total"]))
        )
    print_table(table)


@history.command(
    "show", epilog=_examples("metewand history show --implementation python-heapsort --last 10")
)
@click.option(
    "--metric",
    default=None,
    help="Default: the suite's CPU metric (cpu_time_ns, phase.total.cpu_ns), else its wall time.",
)
@filter_options
@click.option(
    "--by",
    type=click.Choice(["date", "commit"]),
    default="date",
    show_default=True,
    help="One point per run (by start), or per commit (its runs pooled).",
)
@click.option("--last", type=click.IntRange(min=1), default=None, help="Only the newest N points.")
@click.option("--json", "as_json", is_flag=True, help="Every group's points as JSON.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
    help="Terminal table, JSON, or an HTML page (--output).",
)
@click.option(
    "--output",
    default="history-show.html",
    show_default=True,
    help="Where --format html writes its page.",
)
@history_option
def show(
    metric: str | None,
    suite: str | None,
    by: str,
    last: int | None,
    as_json: bool,
    fmt: str,
    output: str,
    history_path: str | None,
    out_dir: str,
    **opts: Any,
) -> None:
    """Per group, the metric over runs: median and 95% CI per run, a sparkline."""
    from metewand.errors import MetewandError
    from metewand.history.show import show_data

    fmt = "json" if as_json else fmt
    try:
        data = show_data(_path(history_path, out_dir), metric, _filters(suite, opts), by, last, fmt)
    except MetewandError as exc:
        _fail(exc)
    _print_show(data, fmt, output)


def _print_show(data: Any, fmt: str, output: str) -> None:
    from metewand.history import text

    if fmt == "json":
        click.echo(data.json_text())
        return
    if fmt == "html":
        from metewand.history.site import show_page
        from metewand.runtime.rundir import write_text_atomic

        write_text_atomic(output, show_page(data))
        click.echo(f"wrote {Path(output).absolute()}")
        return
    from rich.table import Table
    from rich.text import Text

    from metewand.cli import tables

    out = tables.console()
    for block in data.blocks:
        table = Table(title=f"{block.suite}: {block.metric} per run (median, 95% CI of the median)")
        for column in (
            "case / task",
            "subject",
            "runs",
            "first",
            "last",
            "last CI",
            "commit",
            f"trend (newest {text.SPARK_WIDTH})",
        ):
            table.add_column(column)
        for row in text.show_rows(block.series, block.metric):
            # Text, not markup: case labels end in [timing_scope], browser subjects in [driver];
            # only the trend (block characters and its polluted runs' [red]) is markup
            table.add_row(*(Text(cell) for cell in row[:-1]), Text.from_markup(row[-1]))
        tables.print_table(table, out=out)
    if not data.blocks:
        click.echo("no values for this metric and these filters", err=True)


def detection_options(command: Any) -> Any:
    """The change-point settings, shared by ``check`` and ``report`` so the two agree."""
    options = [
        click.option(
            "--alpha",
            type=click.FloatRange(0, 1, min_open=True, max_open=True),
            default=changepoint_defaults()["alpha"],
            show_default=True,
            help="Significance of a step (Bonferroni over positions).",
        ),
        click.option(
            "--min-step",
            type=click.FloatRange(min=0),
            default=changepoint_defaults()["min_step"],
            show_default=True,
            help="Smallest step reported, relative (0.02: 2%).",
        ),
        click.option(
            "--noise-multiple",
            type=click.FloatRange(min=0),
            default=changepoint_defaults()["noise_multiple"],
            show_default=True,
            help="A step must exceed this many times the group's historical noise.",
        ),
        click.option(
            "--min-runs",
            type=click.IntRange(min=3),
            default=changepoint_defaults()["min_runs"],
            show_default=True,
            help="Runs a group needs before it is judged.",
        ),
        click.option(
            "--statistic",
            type=click.Choice(["median", "floor"]),
            default=changepoint_defaults()["statistic"],
            show_default=True,
            help="A run's level: the median of its attempts, or their floor (the "
            "lowest: the cost a busy host only ever adds to).",
        ),
        click.option(
            "--allow-polluted",
            is_flag=True,
            help="Judge wall times of runs whose host pollution gate failed (left "
            "out by default; CPU and memory metrics always keep them).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def changepoint_defaults() -> dict[str, Any]:
    from metewand.history.settings import Settings

    return Settings().__dict__


def _settings(recent: int = 1, **opts: Any) -> Any:
    from metewand.history.settings import Settings

    names = ("alpha", "min_step", "noise_multiple", "min_runs", "statistic", "allow_polluted")
    return Settings(recent=recent, **{name: opts.pop(name) for name in names})


@history.command("check", epilog=_examples("metewand history check --fail-on-change"))
@click.option("--metric", default=None, help="Default: the suite's CPU metric.")
@filter_options
@click.option(
    "--fail-on-change",
    is_flag=True,
    help="Exit 1 when the newest run starts a significant step, 2 when too short.",
)
@detection_options
@click.option(
    "--fail-on-environment",
    is_flag=True,
    help="Count steps in groups whose declared inputs did not change (environment shifts: "
    "the host, the interpreter, metewand) as well; by default they are listed, not counted.",
)
@click.option(
    "--recent",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="A step starting at one of the newest N runs fails the check.",
)
@click.option("--json", "as_json", is_flag=True, help="The check as one JSON object.")
@history_option
def check(
    metric: str | None,
    suite: str | None,
    fail_on_change: bool,
    fail_on_environment: bool,
    recent: int,
    as_json: bool,
    history_path: str | None,
    out_dir: str,
    **opts: Any,
) -> None:
    """Change points per group; for CI, whether the newest run starts one."""
    from dataclasses import replace

    from metewand.errors import MetewandError
    from metewand.history.check import print_check, run_check

    settings = replace(_settings(recent, **opts), count_environment=fail_on_environment)
    try:
        results = run_check(_path(history_path, out_dir), metric, _filters(suite, opts), settings)
    except MetewandError as exc:
        _fail(exc)
    sys.exit(print_check(results, settings, fail_on_change, as_json, click.echo))


@history.command("report", epilog=_examples("metewand history report --out history-site"))
@click.option(
    "--out",
    "site_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory of the static site (index.html, <suite>.html, compare/).",
)
@click.option("--metric", default=None, help="Default: each suite's CPU metric.")
@filter_options
@detection_options
@click.option(
    "--history",
    "history_path",
    default=None,
    metavar="PATH",
    help="The history file (default: $METEWAND_HISTORY, else ./history.duckdb).",
)
@click.option(
    "--runs",
    "out_dir",
    default="runs",
    show_default=True,
    help="Where runs live (for the default history location).",
)
def report(
    site_dir: str,
    metric: str | None,
    suite: str | None,
    history_path: str | None,
    out_dir: str,
    **opts: Any,
) -> None:
    """A static site: a trend chart per group with CI bands, change points with their commits
    (found as `history check` finds them, with the same settings)."""
    from metewand.errors import MetewandError
    from metewand.history.report import write_report

    settings = _settings(**opts)
    try:
        written = write_report(
            _path(history_path, out_dir),
            Path(site_dir).absolute(),
            metric,
            _filters(suite, opts),
            settings,
        )
    except MetewandError as exc:
        _fail(exc)
    click.echo(
        f"{written.changes} change points, {written.compare_pages} compare reports "
        f"linked ({written.missing_runs} without their run directories)"
    )
    click.echo(f"report: {Path(site_dir).absolute() / 'index.html'}")


@history.command("export", epilog=_examples("metewand history export --parquet history-parquet"))
@click.option(
    "--parquet",
    "target",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory for the partitioned Parquet files.",
)
@history_option
def export(target: str, history_path: str | None, out_dir: str) -> None:
    """Write the history as partitioned Parquet (runs/, attempt_values/, meta.parquet)."""
    from metewand.errors import MetewandError
    from metewand.history.parquet import export as export_parquet

    try:
        runs, values = export_parquet(_path(history_path, out_dir), Path(target).absolute())
    except MetewandError as exc:
        _fail(exc)
    click.echo(f"exported {runs} runs, {values} values to {Path(target).absolute()}")


@history.command("import", epilog=_examples("metewand history import --parquet history-parquet"))
@click.option(
    "--parquet",
    "source",
    required=True,
    type=click.Path(file_okay=False, exists=True),
    help="A directory `history export --parquet` wrote.",
)
@history_option
def import_(source: str, history_path: str | None, out_dir: str) -> None:
    """Merge another store's Parquet export into this history (adding it twice changes nothing)."""
    from metewand.errors import MetewandError
    from metewand.history.parquet import import_parquet

    try:
        done = import_parquet(_path(history_path, out_dir), Path(source).absolute())
    except MetewandError as exc:
        _fail(exc)
    click.echo(
        f"imported: {done.added} runs added, {done.replaced} replaced, {done.unchanged} unchanged"
    )
