"""After a run: ask ``compare`` for the run's derived files (the suites write rows and raw files only).

The same writer serves ``metewand report``, so what a run leaves and what ``report`` regenerates
are the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def write_derived(run_dir: Path | str, echo: Callable[[str], None]) -> bool:
    """Write the files the run's suite derives at the end of a run; False (said) if they could
    not be written: the rows are safe and ``metewand report RUN`` writes them again."""
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
