"""report.html's layout (issue #30 item 5): every legend outside every axes, box plots over
passing attempts with the rest counted, provenance grouped in collapsible blocks, sections with
nothing to show left out with a line saying why, the verdict first. Synthetic runs, no engine."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import synthetic_runs as synthetic
from metewand.compare import case_plots, phase_plots, plots
from metewand.compare.cases import TIME_METRIC, case_statistics
from metewand.compare.columns import BROWSER_METRICS, browser_columns
from metewand.compare.efficiency import engine_points
from metewand.compare.fmt import ms_text
from metewand.compare.generate import generate
from metewand.compare.html_parts import flatten
from metewand.compare.report_browser import _metric_rows
from metewand.compare.report_provenance import RUN_GROUP, grouped
from metewand.compare.rundir import load_run
from metewand.compare.suite_registry import suite_kind


def _overlaps(a: object, b: object) -> bool:
    return bool(a.overlaps(b))  # type: ignore[attr-defined]


def _legend_clear_of_axes(fig: Figure) -> None:
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    assert legends, "the figure has a legend"
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= fig.bbox.x1 and box.y0 >= 0 and box.y1 <= fig.bbox.y1
        for ax in fig.axes:
            assert not _overlaps(box, ax.get_window_extent(renderer)), (legend, ax.get_title())


@pytest.fixture(scope="module")
def browser_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic.write_browser_run(tmp_path_factory.mktemp("b") / "run_b", n_tasks=8, k=3)


@pytest.fixture(scope="module")
def compute_summary(tmp_path_factory: pytest.TempPathFactory) -> dict:
    run = synthetic.write_compute_run(tmp_path_factory.mktemp("c") / "run_c", attempts=4, cases=2)
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    return case_statistics(rows, reference="python")


def test_every_chart_keeps_its_legend_outside_the_axes(
    browser_run: Path, compute_summary: dict
) -> None:
    run = load_run(browser_run)
    columns = browser_columns(run.rows)
    scores = suite_kind("browser").scores_of(run.rows, run.manifest, None)
    points = engine_points(run.rows, scores, columns, BROWSER_METRICS)
    _legend_clear_of_axes(plots.efficiency_map(points, BROWSER_METRICS))
    (axis,) = case_plots.scaling_axes(compute_summary)
    _legend_clear_of_axes(case_plots.scaling_chart(compute_summary, axis, [TIME_METRIC]))
    _legend_clear_of_axes(case_plots.phase_chart(compute_summary))
    costs = [
        {
            "case": "t",
            "implementation": "e",
            "groups": {
                "engine": {
                    "phases": [
                        {"name": f"step{i}:Runtime.evaluate", "cpu_ns_median": 1e6}
                        for i in range(12)
                    ]
                }
            },
        }
    ]
    _legend_clear_of_axes(phase_plots.cost_chart(costs))


def test_distributions_count_passing_attempts_and_name_the_rest(browser_run: Path) -> None:
    run = load_run(browser_run)
    rows = _metric_rows(browser_columns(run.rows))
    for engine in {str(r["engine"]) for r in run.rows}:
        mine = [r for r in run.rows if r["engine"] == engine]
        passing = sum(r["status"] == "pass" for r in mine)
        (duration,) = [row for row in rows if row[0] == engine and row[1] == "duration_ms"]
        assert duration[2] == passing and duration[5] == len(mine) - passing
        median = np.median([r["duration_ms"] for r in mine if r["status"] == "pass"])
        assert duration[3] == ms_text(float(median))  # the passing attempts' median, no others


def test_provenance_groups_every_field_once(browser_run: Path) -> None:
    manifest = load_run(browser_run).manifest
    groups = grouped(manifest)
    fields = [path for rows in groups.values() for path, _ in rows]
    assert sorted(fields) == sorted(
        p for p, _ in flatten({k: v for k, v in manifest.items() if k != "tasks"})
    )
    assert list(groups)[0] == RUN_GROUP
    assert any(path.startswith("engines.") for path, _ in groups["Engines"])
    assert any(path.startswith("host.") for path, _ in groups["Host"])


def test_provenance_counts_the_task_digests_instead_of_listing_them(browser_run: Path) -> None:
    """A real corpus run records one digest per task (hundreds): the provenance names how many,
    and the other corpus fields stay as they are."""
    manifest = dict(load_run(browser_run).manifest)
    digests = {f"task_{i}": f"{i:064x}" for i in range(300)}
    manifest["corpus"] = {"sha256": "a" * 64, "shared_sha256": "b" * 64, "task_sha256": digests}
    rows = dict(grouped(manifest)["Corpus and datasets"])
    assert rows["corpus.task_sha256"] == "300 task files (manifest.json)"
    assert rows["corpus.shared_sha256"] == "b" * 64
    assert not any(path.startswith("corpus.task_sha256.") for path in rows)


def test_page_opens_with_the_verdict_and_folds_what_is_long(
    browser_run: Path, tmp_path: Path
) -> None:
    html = generate(browser_run, ["html"], out_dir=tmp_path)["html"].read_text()
    body = html.split("<body>", 1)[1]
    assert body.index('id="verdict"') < body.index("<section")  # before any section
    assert "<b>Question:</b>" in body and "<b>Failures:</b>" in body
    provenance = body.split('<section id="provenance">', 1)[1]
    blocks = re.findall(r"<details( open)?><summary>([^<]+)</summary>", provenance)
    assert [title.split(" (")[0] for _, title in blocks][:1] == [RUN_GROUP]
    assert blocks[0][0] == " open" and all(not opened for opened, _ in blocks[1:])
