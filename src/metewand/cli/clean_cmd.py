"""``metewand clean RUN``: remove what a killed run left behind, for runs never resumed.

``--resume`` does the same before it runs anything; this is for a run that will not be resumed.
Only what the run recorded is touched (``runtime.owned``; a browser run's engines also by their
run marker), and only while no live metewand holds the run open.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from metewand import canonical
from metewand.cli import exit_codes
from metewand.cli.store_cmd import open_run
from metewand.runtime.store import RunView, StoreError, hold_lock

# Temporary directories a session makes inside its run and removes when it ends.
RUN_TEMP_DIRS = (".staging", ".work")


@click.command("clean")
@click.argument("run")
@click.option("--json", "as_json", is_flag=True, help="One canonical JSON object on stdout.")
def clean(run: str, as_json: bool) -> None:
    """Kill the processes and remove the accounting groups and temporary dirs a killed run
    RUN left behind (RUN: a run directory or an id under ./runs).

    \b
    Examples:
      metewand clean runs/20250101T120000Z-ab12cd
      metewand clean 20250101T120000Z-ab12cd --json

    \b
    Exit status: 0 when everything is gone; 1 when a group could not be removed;
    2 when RUN is not a run or a live metewand holds it open.
    """
    from metewand.runtime.owned import sweep

    view = open_run(run)
    try:
        with hold_lock(view.run_dir):
            engines = _browser_leftovers(view)
            report = sweep(view.run_dir).to_json()
            report["engine_processes_killed"] = engines
            report["temp_dirs_removed"] = _remove_temp_dirs(view.run_dir)
    except StoreError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(exit_codes.INVALID_INPUT) from None
    if as_json:
        click.echo(canonical.dumps_str(report))
    else:
        killed = len(report["killed"]) + len(engines)
        click.echo(
            f"{view.run_dir}: killed {killed} process(es), removed "
            f"{len(report['groups_removed'])} group(s) and "
            f"{len(report['temp_dirs_removed'])} temporary dir(s)"
        )
        for failure in report["groups_failed"]:
            click.echo(f"could not remove group {failure}", err=True)
    if report["groups_failed"]:
        raise SystemExit(exit_codes.BENCHMARK_FAILURES)


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
