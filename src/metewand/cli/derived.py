"""After a run: ask ``compare`` for the run's derived files (the suites write rows and raw files only).

The same writer serves ``metewand report``, so what a run leaves and what ``report`` regenerates
are the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click


def report_flag(command: Any) -> Any:
    return click.option(
        "--no-report",
        is_flag=True,
        help="Do not write the derived files (scores, scorecard, report.html, CSV, resource "
        "summary) at the end; `metewand report RUN` writes the same files later. Saves the "
        "report's plotting (~1.5 s of CPU a run on a 2-vCPU host) in scripts that only compare "
        "runs or keep history.",
    )(command)


def write_derived(run_dir: Path | str, echo: Callable[[str], None], skip: bool = False) -> bool:
    """Write the files the run's suite derives at the end of a run; False (said) if they could
    not be written: the rows are safe and ``metewand report RUN`` writes them again. ``skip``
    (``--no-report``): write nothing, and say how to get them."""
    if skip:
        echo(f"derived files not written (--no-report): metewand report {run_dir} writes them")
        return True
    from metewand import canonical  # here, not at import: `metewand run --help` stays light
    from metewand.compare.generate import write_after_run
    from metewand.compare.rundir import RunDirError

    try:
        written = write_after_run(run_dir)
    except (RunDirError, OSError) as exc:
        echo(
            f"error: derived files of {run_dir} not written: {exc} "
            f"(the rows are kept; metewand report {run_dir} writes them)"
        )
        return False
    if "resource_summary" in written:
        summary = canonical.loads(written["resource_summary"].read_bytes())
        eligible = summary.get("resource_comparison_eligible")
        echo(f"resource summary: resource_comparison_eligible={eligible}")
        hosts = summary.get("hosts")
        if isinstance(hosts, dict) and len(hosts.get("places") or []) > 1:
            verdicts = ", ".join(
                f"{place} {'eligible' if r['resource_comparison_eligible'] else 'not eligible'}"
                for place, r in hosts["per_host"].items()
            )
            echo(f"resource comparison per host: {verdicts}; {hosts['statement']}")
    return True
