"""The one writer of a run's derived files, from its directory alone: scores.json, scorecard.md,
report.html, the suite's CSV files, and a profiled run's resource_summary.json + resource-card.md.

``metewand report`` calls ``generate``; ``run`` and ``browser run`` call ``write_after_run`` once
the run has finished (a suite writes rows and raw files only, and never imports ``compare``).
What differs between suites comes from ``compare.suite_registry``.

scores.json and scorecard.md carry no timestamps and no paths, so regenerating them from the same
rows gives byte-identical files. Files are replaced atomically (temp file + rename).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from metewand import canonical
from metewand.compare import compare_suites  # noqa: F401  (the edge: registers the suite kinds)
from metewand.compare.hosts import hosts_block
from metewand.compare.report_hosts import hosts_markdown
from metewand.compare.report_html import render_report
from metewand.compare.report_resources import RESOURCE_CARD, RESOURCE_SUMMARY, resource_context
from metewand.compare.run_warnings import markdown_block, run_warnings
from metewand.compare.rundir import RunData, load_run
from metewand.compare.scores import scores_bytes
from metewand.compare.suite_registry import suite_kind
from metewand.runtime import rundir
from metewand.runtime.rundir import write_atomic as write_atomic

SCORES = rundir.SCORES
SCORECARD = rundir.SCORECARD
REPORT = rundir.REPORT
FORMATS = ("md", "json", "html", "csv")


def generate(
    run_dir: str | Path,
    formats: Iterable[str] = ("md", "json", "html"),
    out_dir: str | Path | None = None,
    baseline: Path | None = None,
    reference_engine: str | None = None,
    reference_implementation: str | None = None,
) -> dict[str, Path]:
    """Write the requested reports; returns {format: path}.

    A profiled browser run also gets ``resource_summary.json`` and ``resource-card.md``
    (regenerated with the given baseline and reference engine) whatever the formats.
    """
    return _write(load_run(run_dir), formats, out_dir, baseline, reference_engine,
                  reference_implementation)  # fmt: skip


def _write(
    run: RunData,
    formats: Iterable[str],
    out_dir: str | Path | None = None,
    baseline: Path | None = None,
    reference_engine: str | None = None,
    reference_implementation: str | None = None,
) -> dict[str, Path]:
    target = Path(out_dir) if out_dir is not None else run.path
    target.mkdir(parents=True, exist_ok=True)
    wanted = set(formats)
    kind = suite_kind(run.kind)
    scores = kind.scores_of(run.rows, run.manifest, reference_implementation)
    hosts = hosts_block(run.rows, run.dask_hosts, run.lost_tries)
    if hosts is not None:  # a Dask run: per host; a local run's files stay as they were
        scores["hosts"] = hosts
    written: dict[str, Path] = {}
    if "json" in wanted:
        written["json"] = target / SCORES
        write_atomic(written["json"], scores_bytes(scores))
    ctx = resource_context(run, baseline, reference_engine)
    if "md" in wanted:
        written["md"] = target / SCORECARD
        text = kind.scorecard_of(scores)
        if hosts is not None:
            text += "\n".join(hosts_markdown(hosts)) + "\n"
        card_md = _with_warnings(text, run_warnings(run, ctx.summary))
        write_atomic(written["md"], card_md.encode("utf-8"))
    card = ctx.card()
    if ctx.summary is not None and card is not None:
        written["resource_summary"] = target / RESOURCE_SUMMARY
        write_atomic(written["resource_summary"], canonical.line(ctx.summary))
        written["resource_card"] = target / RESOURCE_CARD
        write_atomic(written["resource_card"], card.encode("utf-8"))
    for key, (name, text) in (kind.csv_files(scores) if "csv" in wanted else {}).items():
        written[key] = target / name
        write_atomic(written[key], text.encode("utf-8"))
    if "html" in wanted:
        written["html"] = target / REPORT
        write_atomic(written["html"], render_report(run, scores, ctx).encode("utf-8"))
    return written


def write_after_run(run_dir: str | Path) -> dict[str, Path]:
    """The derived files a finished run gets at once (its suite's ``run_end_formats``; a profiled
    run's resource summary and card come with them). ``metewand report`` regenerates all of them.
    """
    run = load_run(run_dir)
    formats = suite_kind(run.kind).run_end_formats
    return _write(run, formats) if formats else {}


def _with_warnings(card: str, warnings: list[str]) -> str:
    """The warnings right under the scorecard's title line, where a reader starts."""
    if not warnings:
        return card
    title, _, rest = card.partition("\n\n")
    return f"{title}\n\n{markdown_block(warnings)}{rest}"
