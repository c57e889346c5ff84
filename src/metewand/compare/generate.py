"""Regenerate a run's reports from its directory alone: scores.json, scorecard.md, report.html.

scores.json and scorecard.md carry no timestamps and no paths, so regenerating them from the same
rows gives byte-identical files. Files are replaced atomically (temp file + rename).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from metewand import canonical
from metewand.compare.case_text import cases_csv
from metewand.compare.report_html import render_report
from metewand.compare.report_resources import RESOURCE_CARD, RESOURCE_SUMMARY, resource_context
from metewand.compare.run_warnings import markdown_block, run_warnings
from metewand.compare.rundir import load_run
from metewand.compare.scorecard import scorecard_md
from metewand.compare.scores import scores_bytes, scores_for
from metewand.runtime import rundir
from metewand.runtime.rundir import write_atomic as write_atomic

SCORES = rundir.SCORES
SCORECARD = rundir.SCORECARD
REPORT = rundir.REPORT
CASES_CSV = rundir.CASES_CSV
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
    run = load_run(run_dir)
    target = Path(out_dir) if out_dir is not None else run.path
    target.mkdir(parents=True, exist_ok=True)
    wanted = set(formats)
    scores = scores_for(run.kind, run.rows, run.manifest, reference_implementation)
    written: dict[str, Path] = {}
    if "json" in wanted:
        written["json"] = target / SCORES
        write_atomic(written["json"], scores_bytes(scores))
    ctx = resource_context(run, baseline, reference_engine)
    if "md" in wanted:
        written["md"] = target / SCORECARD
        card_md = _with_warnings(scorecard_md(scores), run_warnings(run, ctx.summary))
        write_atomic(written["md"], card_md.encode("utf-8"))
    card = ctx.card()
    if ctx.summary is not None and card is not None:
        written["resource_summary"] = target / RESOURCE_SUMMARY
        write_atomic(written["resource_summary"], canonical.line(ctx.summary))
        written["resource_card"] = target / RESOURCE_CARD
        write_atomic(written["resource_card"], card.encode("utf-8"))
    if "csv" in wanted and run.kind == "compute":
        written["cases_csv"] = target / CASES_CSV
        write_atomic(written["cases_csv"], cases_csv(scores["cases"]).encode("utf-8"))
    if "html" in wanted:
        written["html"] = target / REPORT
        write_atomic(written["html"], render_report(run, scores, ctx).encode("utf-8"))
    return written


def _with_warnings(card: str, warnings: list[str]) -> str:
    """The warnings right under the scorecard's title line, where a reader starts."""
    if not warnings:
        return card
    title, _, rest = card.partition("\n\n")
    return f"{title}\n\n{markdown_block(warnings)}{rest}"
