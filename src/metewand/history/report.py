"""``history report --out DIR``: index.html, one page per suite, and the compare reports each
change point links to (``compare/<base>__<new>.html``, the two runs around the step, written
when both run directories still exist; otherwise the change is listed without a link)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metewand.history import site
from metewand.history.check import Detection, Settings, described, detect
from metewand.history.series import Filters, default_metric, read_series, suites_in
from metewand.history.store import reading

COMPARE_DIR = "compare"


@dataclass
class Written:
    pages: list[Path]
    changes: int
    compare_pages: int
    missing_runs: int


def _compare_page(
    out: Path, change: dict[str, Any], metric: str, cache: dict[str, str | None]
) -> str | None:
    """The compare report of the runs around a change, written once; None when a run's
    directory is gone or the two cannot be compared."""
    base, new = change["base_run"], change["new_run"]
    name = f"{base['run_id']}__{new['run_id']}.html"
    if name in cache:
        return cache[name]
    from metewand.compare import compare_render
    from metewand.compare.run_compare import compare_runs
    from metewand.compare.rundir import load_run
    from metewand.errors import MetewandError
    from metewand.runtime.rundir import write_text_atomic

    link: str | None = None
    if (
        base["run_dir"]
        and new["run_dir"]
        and Path(base["run_dir"]).is_dir()
        and Path(new["run_dir"]).is_dir()
    ):
        try:
            result = compare_runs(load_run(base["run_dir"]), load_run(new["run_dir"]), metric)
            (out / COMPARE_DIR).mkdir(parents=True, exist_ok=True)
            write_text_atomic(out / COMPARE_DIR / name, compare_render.html(result))
            link = f"{COMPARE_DIR}/{name}"
        except (MetewandError, OSError):
            link = None
    cache[name] = link
    return link


def _charts(detection: Detection, out: Path, cache: dict[str, str | None]) -> list[site.GroupChart]:
    """A chart per group (the run-wide factor's first, when there is one), its change points
    and outliers as ``detect`` found them (the same function ``check`` uses)."""
    charts = []
    groups = [*([detection.run_wide] if detection.run_wide else []), *detection.groups]
    for group in groups:
        one, analysis = group.series, group.analysis
        changes = [
            described(detection, group, cp, False)
            for cp in (analysis.change_points if analysis else [])
        ]
        links = {}
        for change in changes:
            link = _compare_page(out, change, detection.metric, cache)
            if link:
                links[change["position"]] = link
        title = f"{one.task} x {one.subject}" + (f" [{one.driver}]" if one.driver else "")
        outliers = [group.kept[i] for i in analysis.outliers] if analysis else []
        # the run-wide group's values are factors (1 = the groups' own level), not the metric
        metric = "run factor" if group is detection.run_wide else detection.metric
        charts.append(site.GroupChart(title, metric, one.points, changes, outliers, links))
    return charts


def write_report(
    path: Path, out: Path, metric: str | None, filters: Filters, settings: Settings
) -> Written:
    pages: dict[str, str] = {}
    index: list[tuple[str, str, int, int]] = []
    cache: dict[str, str | None] = {}
    changes = 0
    with reading(path) as con:
        suites = [filters.suite] if filters.suite else suites_in(con)
        for suite in suites:
            chosen = metric or default_metric(con, suite)
            series = read_series(con, chosen, Filters(**{**filters.__dict__, "suite": suite}))
            detection = detect(series, suite, chosen, settings)
            charts = _charts(detection, out, cache)
            found = sum(len(c.changes) for c in charts)
            changes += found
            runs = max((len(s.points) for s in series), default=0)
            note = (
                f"{len(series)} groups, up to {runs} runs each; change points (as "
                f"`history check` finds them): each run's {settings.statistic}, the run-wide "
                "factor divided out, PELT (ruptures) + a robust location test, alpha "
                f"{settings.alpha}, steps of at least {settings.min_step:.0%} and "
                f"{settings.noise_multiple}x the group's historical noise (typical: "
                f"{detection.typical_noise:.1%})"
            )
            pages[f"{suite}.html"] = site.suite_page(suite, chosen, charts, note)
            index.append((suite, chosen, len(charts), found))
    pages["index.html"] = site.index_page(index)
    written = site.write_pages(out, pages)
    linked = sum(1 for v in cache.values() if v)
    return Written(written, changes, linked, sum(1 for v in cache.values() if not v))
