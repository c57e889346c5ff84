"""``metewand report RUN``: regenerate scores, scorecard, report.html and a tidy CSV."""

from __future__ import annotations

import sys

import click

from metewand.cli import exit_codes
from metewand.cli.rundirs import resolve_run_dir


def _formats(value: str) -> list[str]:
    from metewand.compare.generate import FORMATS  # numpy/matplotlib: only when reporting

    chosen = [f.strip() for f in value.split(",") if f.strip()]
    unknown = sorted(set(chosen) - set(FORMATS))
    if unknown:
        raise click.BadParameter(f"unknown format(s) {unknown}; choose from {list(FORMATS)}")
    return chosen


@click.command("report")
@click.argument("run")
@click.option("--baseline", default=None, metavar="RUN", help="Profiler-off run (directory or id).")
@click.option("--reference-engine", default=None, help="Engine the others are compared against.")
@click.option(
    "--reference-implementation",
    default=None,
    help="Compute runs: per case, each implementation's median over this one's, with CIs.",
)
@click.option(
    "--format",
    "fmt",
    default="md,json,html,csv",
    show_default=True,
    help="Comma-separated: md (scorecard.md), json (scores.json), html (report.html), csv.",
)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Write here, not RUN.")
@click.option("--json", "as_json", is_flag=True, help="Print the written paths as JSON.")
def report(
    run: str,
    baseline: str | None,
    reference_engine: str | None,
    reference_implementation: str | None,
    fmt: str,
    out_dir: str | None,
    as_json: bool,
) -> None:
    """Regenerate the reports of RUN from its directory alone.

    RUN is a run directory, a run id under ./runs, or latest (the newest run there).

    \b
    Writes scores.json (json), scorecard.md (md), report.html (html), results.csv (csv;
    a compute run also gets cases.csv: one line per case x implementation x metric).
    scores.json and scorecard.md are byte-identical when regenerated from the same rows.
    \b
    Examples:
      metewand report runs/sort1
      metewand report latest --format md,json
      metewand report sort1 --reference-implementation python-builtin
      metewand report runs/prof1 --baseline runs/base1 --reference-engine chrome --format html
    """
    from metewand import canonical
    from metewand.compare.generate import generate
    from metewand.compare.rundir import RunDirError

    run = str(resolve_run_dir(run, manifest=True))
    base = resolve_run_dir(baseline, what="baseline") if baseline else None
    try:
        formats = _formats(fmt)
        written = generate(run, formats, out_dir, base, reference_engine, reference_implementation)
    except (RunDirError, click.BadParameter) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)  # 2: invalid input, for click's refusals too
    except OSError as exc:  # --out (or RUN) cannot be written: say where, never a traceback
        where = exc.filename or out_dir or run
        click.echo(f"error: {where}: cannot be written ({exc.strerror or exc})", err=True)
        sys.exit(exit_codes.INVALID_INPUT)
    if as_json:
        paths = {k: str(v) for k, v in sorted(written.items())}
        click.echo(canonical.dumps_str(paths))
    else:
        for kind, path in sorted(written.items()):
            click.echo(f"{kind:5} {path}")
