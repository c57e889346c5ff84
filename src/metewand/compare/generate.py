"""The one writer of a run's derived files, from its directory alone: scores.json, scorecard.md,
report.html, results.csv and the suite's CSV files, and a profiled run's resource_summary.json + resource-card.md.

``metewand report`` calls ``generate``; ``run`` and ``browser run`` call ``write_after_run`` once
the run has finished (a suite writes rows and raw files only, and never imports ``compare``).
What differs between suites comes from ``compare.suite_registry``; each output format is an
``Exporter`` in ``EXPORTERS`` (a new format is a function and a line there).

scores.json and scorecard.md carry no timestamps and no paths, so regenerating them from the same
rows gives byte-identical files. Files are replaced atomically (temp file + rename).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metewand import canonical
from metewand.compare import compare_suites  # noqa: F401  (the edge: registers the suite kinds)
from metewand.compare.hosts import hosts_block
from metewand.compare.report_hosts import hosts_markdown
from metewand.compare.report_resources import (
    RESOURCE_CARD,
    RESOURCE_SUMMARY,
    ResourceContext,
    resource_context,
)
from metewand.compare.results_csv import rows_to_csv
from metewand.compare.run_warnings import markdown_block, run_warnings
from metewand.compare.rundir import RunData, load_run
from metewand.compare.scores import scores_bytes
from metewand.compare.suite_registry import SuiteKind, suite_kind
from metewand.runtime import rundir
from metewand.runtime.rundir import write_atomic as write_atomic

SCORES = rundir.SCORES
SCORECARD = rundir.SCORECARD
REPORT = rundir.REPORT


@dataclass(frozen=True)
class Derived:
    """What every exporter reads: the run, its suite kind, its scores (with the per-host block
    of a Dask run) and its resource context (summary and card of a profiled run, or none)."""

    run: RunData
    kind: SuiteKind
    scores: dict[str, Any]
    hosts: dict[str, Any] | None
    resources: ResourceContext


# An output format (as hyperfine's ExportType): Derived -> {written key: (file name, bytes)}.
Exporter = Callable[[Derived], dict[str, tuple[str, bytes]]]


def _scores_json(d: Derived) -> dict[str, tuple[str, bytes]]:
    return {"json": (SCORES, scores_bytes(d.scores))}


def _scorecard_md(d: Derived) -> dict[str, tuple[str, bytes]]:
    text = d.kind.scorecard_of(d.scores)
    if d.hosts is not None:
        text += "\n".join(hosts_markdown(d.hosts)) + "\n"
    card = _with_warnings(text, run_warnings(d.run, d.resources.summary))
    return {"md": (SCORECARD, card.encode("utf-8"))}


def _csv(d: Derived) -> dict[str, tuple[str, bytes]]:
    """results.csv (every row) and the suite's own CSV files (a compute run's cases.csv)."""
    files = {"csv": (rundir.RESULTS_CSV, rows_to_csv(d.run.rows))}
    files.update(d.kind.csv_files(d.scores))
    return {key: (name, text.encode("utf-8")) for key, (name, text) in files.items()}


def _report_html(d: Derived) -> dict[str, tuple[str, bytes]]:
    # here, not at import: report.html draws with matplotlib (~0.9 s of CPU to import on a 2-vCPU
    # host), which a run whose suite derives no HTML (a browser run: scores.json) never needs
    from metewand.compare.report_html import render_report

    return {"html": (REPORT, render_report(d.run, d.scores, d.resources).encode("utf-8"))}


EXPORTERS: dict[str, Exporter] = {
    "md": _scorecard_md,
    "json": _scores_json,
    "html": _report_html,
    "csv": _csv,
}
FORMATS = tuple(EXPORTERS)


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
    return _write(run, formats, out_dir, baseline, reference_engine, reference_implementation)


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
    kind = suite_kind(run.kind)
    scores = kind.scores_of(run.rows, run.manifest, reference_implementation)
    hosts = hosts_block(run.rows, run.dask_hosts, run.lost_tries)
    if hosts is not None:  # a Dask run: per host; a local run's files stay as they were
        scores["hosts"] = hosts
    derived = Derived(run, kind, scores, hosts, resource_context(run, baseline, reference_engine))
    files: dict[str, tuple[str, bytes]] = {}
    for name in (f for f in FORMATS if f in set(formats)):
        files.update(EXPORTERS[name](derived))
    files.update(_resource_files(derived.resources))
    written = {}
    for key, (name, data) in files.items():
        written[key] = target / name
        write_atomic(written[key], data)
    return written


def _resource_files(ctx: ResourceContext) -> dict[str, tuple[str, bytes]]:
    """A profiled run's summary and card, whatever the formats (they are its run-end files)."""
    card = ctx.card()
    if ctx.summary is None or card is None:
        return {}
    return {
        "resource_summary": (RESOURCE_SUMMARY, canonical.line(ctx.summary)),
        "resource_card": (RESOURCE_CARD, card.encode("utf-8")),
    }


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
