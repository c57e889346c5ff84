"""``metewand clean [RUN]``: remove what killed runs left behind, for runs never resumed.

``--resume`` does the same before it runs anything; this is for a run that will not be resumed.
Only what a run recorded is touched (``runtime.owned``; a browser run's engines also by their
run marker), and only while no live metewand holds the run open.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import click

from metewand import canonical
from metewand.cli import exit_codes
from metewand.cli.rundirs import DEFAULT_RUNS_DIR
from metewand.cli.store_cmd import open_run
from metewand.runtime import rundir
from metewand.runtime.store import RunView, StoreError, hold_lock

# Temporary directories a session makes inside its run and removes when it ends.
RUN_TEMP_DIRS = (rundir.STAGING, rundir.WORK)


@click.command("clean")
@click.argument("run", required=False)
@click.option("--json", "as_json", is_flag=True, help="One canonical JSON object on stdout.")
@click.option(
    "--orphans",
    is_flag=True,
    help="Instead: remove every metewand accounting group whose creator is gone, run or not.",
)
def clean(run: str | None, as_json: bool, orphans: bool) -> None:
    """Remove what killed runs left behind: processes, accounting groups, temporary dirs.

    RUN is a run directory or an id under ./runs; without RUN, every run under ./runs that no
    live metewand holds open. Only what a run recorded (owned.jsonl) is touched. With
    --orphans (no RUN): the groups any earlier metewand left (`metewand measure` included),
    found by name in every cgroup hierarchy, their members killed; a group whose creator is
    alive is never touched.

    \b
    Examples:
      metewand clean runs/sort1
      metewand clean sort1 --json
      metewand clean
      metewand clean --orphans

    \b
    Exit status: 0 when everything is gone; 1 when a group could not be removed;
    2 when RUN is not a run or a live metewand holds it open (without RUN, such runs are
    skipped and listed).
    """
    if orphans:
        _clean_orphans(run, as_json)
        return
    if run is not None:
        report = _clean_one(open_run(run))
        if isinstance(report, str):
            click.echo(f"error: {report}", err=True)
            raise SystemExit(exit_codes.INVALID_INPUT)
        if as_json:  # one run: its report object
            click.echo(canonical.dumps_str(report))
        reports: dict[str, dict[str, Any] | str] = {str(report["run_dir"]): report}
    else:
        reports = _clean_all(Path(DEFAULT_RUNS_DIR))
        if as_json:  # every run: run dir -> report, or why it was left alone
            click.echo(canonical.dumps_str(reports))
    if not as_json:
        _print(reports)
    if any(isinstance(r, dict) and r["groups_failed"] for r in reports.values()):
        raise SystemExit(exit_codes.BENCHMARK_FAILURES)


def _clean_orphans(run: str | None, as_json: bool) -> None:
    if run is not None:
        click.echo("error: --orphans takes no RUN (it looks at every group)", err=True)
        raise SystemExit(exit_codes.INVALID_INPUT)
    from metewand.measure.orphans import sweep_orphans

    report = sweep_orphans()
    if as_json:
        click.echo(canonical.dumps_str(report.to_json()))
    else:
        click.echo(f"removed {len(report.removed)} orphan group(s)")
    for failure in report.failed:
        click.echo(f"could not remove group {failure}", err=True)
    if report.failed:
        raise SystemExit(exit_codes.BENCHMARK_FAILURES)


def _clean_one(view: RunView) -> dict[str, Any] | str:
    """What was removed from one run, or why it was left alone."""
    from metewand.runtime.owned import sweep

    try:
        with hold_lock(view.run_dir):
            for line in rundir.journal_warnings(view.run_dir):
                click.echo(f"warning: {line}", err=True)
            engines = _browser_leftovers(view)
            report = sweep(view.run_dir).to_json()
    except StoreError as exc:
        return str(exc)
    report["run_dir"] = str(view.run_dir)
    report["engine_processes_killed"] = engines
    report["temp_dirs_removed"] = _remove_temp_dirs(view.run_dir)
    return report


def _clean_all(runs_dir: Path) -> dict[str, dict[str, Any] | str]:
    reports: dict[str, dict[str, Any] | str] = {}
    if not runs_dir.is_dir():
        return reports
    for path in sorted(p for p in runs_dir.iterdir() if (p / rundir.MANIFEST).is_file()):
        try:
            reports[str(path)] = _clean_one(RunView(path))
        except StoreError as exc:
            reports[str(path)] = str(exc)
    return reports


def _print(reports: dict[str, dict[str, Any] | str]) -> None:
    for run_dir, report in reports.items():
        if isinstance(report, str):
            print(f"skipped {run_dir}: {report}", file=sys.stderr)
            continue
        killed = len(report["killed"]) + len(report["engine_processes_killed"])
        click.echo(
            f"{run_dir}: killed {killed} process(es), removed "
            f"{len(report['groups_removed'])} group(s) and "
            f"{len(report['temp_dirs_removed'])} temporary dir(s)"
        )
        for failure in report["groups_failed"]:
            click.echo(f"could not remove group {failure}", err=True)


def _browser_leftovers(view: RunView) -> list[int]:
    """A browser run's engines, found by marker and recorded session (the browser suite's rule)."""
    if view.manifest["data"].get("suite") != "browser":
        return []
    from metewand.suites.browser.leftovers import kill_leftovers

    return kill_leftovers(view.run_dir, view.run_id)


def _remove_temp_dirs(run_dir: Path) -> list[str]:
    removed = []
    for name in RUN_TEMP_DIRS:
        path = run_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
    return removed
