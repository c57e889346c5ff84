"""Sections of report.html for a browser run (engines x tasks x attempts)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from metewand.compare import plots, stats
from metewand.compare.columns import BROWSER_METRICS, GroupColumns
from metewand.compare.driver_costs import DRIVER_NOTE, TABLE_HEAD, table_rows
from metewand.compare.efficiency import EnginePoint, engine_points
from metewand.compare.fmt import bytes_text, ms_text, rate_text, unavailable
from metewand.compare.html_parts import Omitted, esc, figure, paragraph, section, table
from metewand.compare.intersection import Intersection
from metewand.compare.report_browser_phases import where_section
from metewand.compare.report_resources import NOT_PROFILED
from metewand.compare.rundir import RunData
from metewand.suites.browser.statuses import STATUSES

NO_MARKS = "run recorded without phase marks (--no-phase-marks, or a baseline run)"
EXCLUDED_LISTED = 200  # non-pass attempts listed one by one; the counts cover all of them
TASKS_LISTED = 5000


def _rate_row(name: list[str], block: Mapping[str, Any]) -> list[Any]:
    att, tasks = block["attempts"], block["tasks"]
    return [
        *name,
        rate_text(tasks["passed"], tasks["total"], tasks["rate"]),
        tasks["incomplete"],
        rate_text(att["passed"], att["total"], att["rate"]),
        *[att["by_status"].get(s, 0) for s in STATUSES],
    ]


def pass_tables(scores: Mapping[str, Any]) -> str:
    head = ["tasks passed (all-k)", "incomplete tasks", "attempts passed", *STATUSES]
    numeric = range(1, 12)
    parts = [
        paragraph(f"k = {scores['k']}: {scores['task_rule']}. Counts are shown beside every rate."),
        "<h3>Per engine</h3>",
        table(
            ["engine", *head], [_rate_row([e], b) for e, b in scores["by_engine"].items()], numeric
        ),
    ]
    for title, key, label in (
        ("Per layer", "by_engine_layer", "layer"),
        ("Per subset", "by_engine_subset", "subset"),
    ):
        rows = [
            _rate_row([engine, name], block)
            for engine, groups in scores[key].items()
            for name, block in groups.items()
        ]
        parts += [f"<h3>{esc(title)}</h3>", table(["engine", label, *head], rows, numeric)]
    if scores.get("by_driver_engine"):
        parts += [
            "<h3>Per driver path</h3>",
            paragraph(DRIVER_NOTE),
            table(TABLE_HEAD, table_rows(scores["by_driver_engine"])),
        ]
    return section("scores", "Functional scores", *parts)


def _has_resource(columns: Mapping[str, GroupColumns]) -> bool:
    return any(
        np.isfinite(group.array(metric)).any()
        for group in columns.values()
        for metric in BROWSER_METRICS
    )


def efficiency_section(points: list[EnginePoint], profiled: bool) -> str | Omitted:
    if not profiled:
        return Omitted("Efficiency map", NOT_PROFILED)
    uri = plots.to_data_uri(plots.efficiency_map(points, BROWSER_METRICS))
    rows = []
    for p in points:
        success = rate_text(p.tasks_passed, p.tasks_total)
        if p.success is not None:
            success += f" [CI {p.success.low * 100:.1f}-{p.success.high * 100:.1f}%]"
        mem, cpu = p.costs.get("pss_peak_bytes"), p.costs.get("cpu_total_ms")
        mem_text = (
            f"{bytes_text(mem.estimate)} [CI {bytes_text(mem.low)}-{bytes_text(mem.high)}]"
            if mem
            else unavailable(p.missing_reason.get("pss_peak_bytes", "not measured"))
        )
        cpu_text = (
            f"{ms_text(cpu.estimate)} [CI {ms_text(cpu.low)}-{ms_text(cpu.high)}]"
            if cpu
            else unavailable(p.missing_reason.get("cpu_total_ms", "not measured"))
        )
        rows.append(
            [
                p.engine,
                success,
                mem_text,
                p.samples["pss_peak_bytes"],
                cpu_text,
                p.samples["cpu_total_ms"],
            ]
        )
    head = ["engine", "task success (all-k)", "median peak PSS", "n", "median CPU", "n"]
    caption = (
        "Task success rate (all-k rule, Wilson 95% CI) against the median peak PSS and the median "
        "CPU time over the all-pass intersection (bootstrap 95% CI of the median)."
    )
    return section(
        "efficiency",
        "Efficiency map",
        figure(
            uri,
            "efficiency map: success rate vs median peak memory and CPU",
            caption,
            "efficiency-map",
        ),
        table(head, rows, (3, 5)),
    )


def _metric_rows(columns: Mapping[str, GroupColumns]) -> list[list[Any]]:
    """Per engine x metric over passing attempts; the not-passing ones are counted, not mixed in."""
    rows = []
    for engine, group in columns.items():
        passed = group.pass_mask()
        left_out = int((~passed).sum())
        for metric, show in (
            ("duration_ms", ms_text),
            ("cpu_total_ms", ms_text),
            ("pss_peak_bytes", bytes_text),
            ("fixture_app_bytes", bytes_text),
        ):
            values = group.array(metric)
            finite = values[passed & np.isfinite(values)]
            missing = group.missing_where(metric, passed)
            missing_text = ", ".join(f"{r} x{n}" for r, n in sorted(missing.items())) or "none"
            if finite.size == 0:
                rows.append(
                    [engine, metric, 0, unavailable(missing_text), "", left_out, missing_text]
                )
                continue
            median, p95 = show(stats.median(finite)), show(stats.p95(finite))
            rows.append([engine, metric, int(finite.size), median, p95, left_out, missing_text])
    return rows


def distribution_section(columns: Mapping[str, GroupColumns], profiled: bool) -> str:
    metrics = ("cpu_total_ms", "pss_peak_bytes", "duration_ms") if profiled else ("duration_ms",)
    uri = plots.to_data_uri(plots.distributions(columns, metrics))
    head = [
        "engine",
        "metric",
        "n passing",
        "median",
        "p95",
        "not passing (left out)",
        "unavailable on passing (reason x count)",
    ]
    return section(
        "distributions",
        "Distributions per engine (passing attempts)",
        figure(
            uri,
            "boxplots of CPU, peak memory and duration per engine, passing attempts",
            "Passing attempts only (a failure that ends early would look cheap); the attempts "
            "left out are counted under each box. Boxes: quartiles; whiskers: 1.5 IQR; fliers "
            "hidden.",
            "distributions",
        ),
        table(head, _metric_rows(columns), (2, 5)),
    )


def task_titles(run: RunData) -> dict[str, str]:
    """Task id -> title for the report.

    Rows and the manifest's ``tasks`` map win; otherwise the task file the row names
    (``task_path`` under the manifest's ``corpus.path``) gives its ``title``, else its
    ``description``. A task whose file is gone keeps an empty title.
    """
    titles: dict[str, str] = {}
    listed = run.manifest.get("tasks")
    if isinstance(listed, Mapping):
        for task_id, meta in listed.items():
            if isinstance(meta, Mapping) and isinstance(meta.get("title"), str):
                titles[str(task_id)] = str(meta["title"])
    corpus = run.manifest.get("corpus")
    root = corpus.get("path") if isinstance(corpus, Mapping) else None
    for row in run.rows:
        task_id = str(row.get("task_id"))
        if isinstance(row.get("title"), str):
            titles[task_id] = str(row["title"])
        elif task_id not in titles and isinstance(root, str) and row.get("task_path"):
            titles[task_id] = _title_from_file(Path(root) / str(row["task_path"]))
    return titles


def _title_from_file(path: Path) -> str:
    try:
        task = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return ""
    if not isinstance(task, Mapping):
        return ""
    for field in ("title", "description"):
        if isinstance(task.get(field), str) and task[field].strip():
            return str(task[field])
    return ""


def excluded_section(
    run: RunData, scores: Mapping[str, Any], titles: Mapping[str, str] | None = None
) -> str:
    titles = task_titles(run) if titles is None else titles
    by_engine = [
        [e, *[b["attempts"]["by_status"].get(s, 0) for s in STATUSES[1:]]]
        for e, b in scores["by_engine"].items()
    ]
    listed = [r for r in run.rows if r.get("status") != "pass"]
    rows = [
        [
            r.get("key"),
            titles.get(str(r.get("task_id")), ""),
            r.get("status"),
            r.get("failure_class"),
            r.get("origin"),
            r.get("secondary_status") or "",
            r.get("reason"),
        ]
        for r in listed[:EXCLUDED_LISTED]
    ]
    note = f"{len(listed)} non-pass attempts; the first {min(len(listed), EXCLUDED_LISTED)} are listed."
    return section(
        "excluded",
        "Excluded outcomes",
        paragraph(
            "Attempts that did not pass keep their raw data but are excluded from the cost "
            "figures, so failing fast is never shown as efficiency."
        ),
        table(["engine", *STATUSES[1:]], by_engine, range(1, 6)),
        paragraph(note, "muted"),
        table(
            [
                "attempt key",
                "task title",
                "status",
                "failure class",
                "origin",
                "secondary",
                "reason",
            ],
            rows,
        ),
    )


def task_section(
    run: RunData, scores: Mapping[str, Any], all_titles: Mapping[str, str] | None = None
) -> str:
    """Per task: attempts passed out of attempts per engine, and whether all k passed."""
    all_titles = task_titles(run) if all_titles is None else all_titles
    engines = list(scores["engines"])
    cells: dict[tuple[str, str, str], dict[str, list[int]]] = {}
    titles: dict[tuple[str, str, str], str] = {}
    for row in run.rows:
        task = (str(row.get("layer")), str(row.get("subset")), str(row.get("task_id")))
        counts = cells.setdefault(task, {}).setdefault(str(row.get("engine")), [0, 0])
        counts[0] += row.get("status") == "pass"
        counts[1] += 1
        titles.setdefault(task, all_titles.get(task[2], ""))
    k = int(scores["k"])
    rows = []
    for task in sorted(cells)[:TASKS_LISTED]:
        per_engine = []
        for engine in engines:
            passed, total = cells[task].get(engine, [0, 0])
            verdict = "pass" if total >= k and passed == total else "no"
            per_engine.append(f"{passed}/{total} ({verdict})" if total else unavailable("no rows"))
        rows.append([task[2], titles[task], task[1], *per_engine])
    note = f"{len(cells)} tasks; attempts passed / attempts per engine, and the all-k verdict."
    return section(
        "tasks",
        "Per task",
        paragraph(note, "muted"),
        table(["task", "title", "subset", *engines], rows),
    )


def flags_section(columns: Mapping[str, GroupColumns]) -> str | Omitted:
    rows = [[e, f, n] for e, g in columns.items() for f, n in sorted(g.flags.items())]
    if not rows:
        return Omitted("Measurement quality flags", "no attempt recorded a quality flag")
    return section(
        "flags",
        "Measurement quality flags",
        table(["engine", "quality flag", "attempts"], rows, (2,)),
    )


def browser_sections(
    run: RunData,
    scores: Mapping[str, Any],
    columns: Mapping[str, GroupColumns],
    intersection: Intersection | None = None,
) -> list[tuple[str, str, str | Omitted]]:
    """``intersection``: the resource summary's all-pass intersection, when one was built."""
    profiled = _has_resource(columns)
    points = (
        engine_points(run.rows, scores, columns, BROWSER_METRICS, intersection) if profiled else []
    )
    titles = task_titles(run)  # one pass over the rows (and task files) for both tables
    where = where_section(run, scores)
    return [
        ("efficiency", "Efficiency", efficiency_section(points, profiled)),
        ("scores", "Scores", pass_tables(scores)),
        ("distributions", "Distributions", distribution_section(columns, profiled)),
        ("excluded", "Excluded", excluded_section(run, scores, titles)),
        ("tasks", "Tasks", task_section(run, scores, titles)),
        (
            "where-cost",
            "Where the CPU goes",
            where or Omitted("Where the time and CPU go", NO_MARKS),
        ),
        ("flags", "Flags", flags_section(columns)),
    ]
