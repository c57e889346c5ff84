"""The read-only ``metewand browser`` subcommands: ``list`` (tasks, subsets, engines and driver
paths), ``doctor`` (engines found and ready, the machine's load) and ``scenarios`` (generated tasks
against their specs). ``run`` is in ``browser_cmd``, which adds these to its group."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import click

from metewand import canonical
from metewand.cli import exit_codes
from metewand.suites.browser.engines import ENGINES, Missing, UnknownEngine, resolve
from metewand.suites.browser.run_config import builtin_suite_dir

# --tasks of every browser subcommand that reads a corpus (run, list, scenarios)
tasks_dir_option = click.option(
    "--tasks",
    "tasks_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Task corpus directory (default: the built-in suite).",
)


def engine_list(text: str) -> tuple[str, ...]:
    """``--engines chrome, lightpanda`` as its engine names."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


@click.command(name="list")
@tasks_dir_option
@click.option("--json", "as_json", is_flag=True, help="Canonical JSON on stdout.")
def list_cmd(tasks_dir: Path | None, as_json: bool) -> None:
    """Tasks and subsets of a corpus, and the engines registry (found or missing).

    \b
    Examples:
      metewand browser list
      metewand browser list --tasks ../shared/corpus/lexbench --json
    """
    from metewand.suites.browser.selection import tag_counts
    from metewand.suites.browser.tasks import load_corpus

    corpus = load_corpus(tasks_dir or builtin_suite_dir())
    subsets = []
    for subset in corpus.manifest.subsets if corpus.manifest else []:
        status = corpus.subset_status(subset)
        tags = tag_counts(t for t in corpus.tasks if t.subset_id == subset.subset_id)
        subsets.append(
            {
                "subset_id": subset.subset_id,
                "layer": subset.layer_id,
                "driver": subset.driver,
                "tasks": len(status.task_ids),
                "task_ids": status.task_ids,
                "not_run_yet": len(status.pending),
                "why_no_runnable_task": status.why_not_runnable,
                "tags": tags,
            }
        )
    engines = []
    for name in ENGINES:
        found = resolve(name)
        engines.append(
            {
                "engine": name,
                "found": not isinstance(found, Missing),
                "detail": found.detail if isinstance(found, Missing) else str(found.binary),
            }
        )
    drivers = _driver_listing()
    data = {
        "corpus": str(corpus.root),
        "invalid": [str(e) for e in corpus.errors],
        "not_run_yet": len(corpus.pending),
        "subsets": subsets,
        "engines": engines,
        "drivers": drivers,
    }
    if as_json:
        click.echo(canonical.dumps(data).decode())
        return
    click.echo(
        f"corpus {corpus.root}: {len(corpus.tasks)} valid tasks, "
        f"{len(corpus.pending)} not run yet, {len(corpus.errors)} invalid"
    )
    for error in corpus.errors:
        click.echo(f"  invalid: {error}")
    for s in subsets:
        why = f"  ({s['not_run_yet']} not run yet)" if s["not_run_yet"] and s["tasks"] else ""
        why = f"  no runnable task: {s['why_no_runnable_task']}" if not s["tasks"] else why
        click.echo(f"  {s['subset_id']:<28} {s['driver']:<28} {s['tasks']:>4} tasks{why}")
        _echo_tags(s["tags"])  # type: ignore[arg-type]
    click.echo("engines:")
    for e in engines:
        click.echo(f"  {e['engine']:<12} {'found' if e['found'] else 'missing':<8} {e['detail']}")
    click.echo("driver paths:")
    for d in drivers:
        state = "found" if d["found"] else "missing"
        click.echo(f"  {d['driver_path']:<24} {state:<8} {d['detail']}")


def _echo_tags(tags: dict[str, int]) -> None:
    """``tags: version.v0_1 23, family.own 21, ...`` under a subset, wrapped (names whole)."""
    if not tags:
        return
    text = ", ".join(f"{tag}\N{NO-BREAK SPACE}{count}" for tag, count in tags.items())
    for line in textwrap.wrap(
        text,
        width=96,
        initial_indent="      tags: ",
        subsequent_indent="            ",
        break_on_hyphens=False,
    ):
        click.echo(line.replace("\N{NO-BREAK SPACE}", " "))  # a tag and its count stay together


def _driver_listing() -> list[dict[str, object]]:
    """Each driver path of the registry: found (with its installed version and adapter) or
    missing (with what exactly is missing)."""
    from metewand.suites.browser.driver_registry import ALL_PATHS, DriverMissing, resolve_driver

    out: list[dict[str, object]] = []
    for key, path in ALL_PATHS.items():  # the catalog's drivers and the probe-script paths
        found = resolve_driver(key)
        entry: dict[str, object] = {
            "driver_path": key,
            "task_kind": path.task_kind,
            "language": path.language,
            "library": path.library.name,
            "pinned_version": path.version,
        }
        if isinstance(found, DriverMissing):
            entry.update(found=False, version=None, reason=found.reason, detail=found.detail)
        else:
            detail = f"{path.library.name} {found.version} ({found.source})"
            entry.update(found=True, version=found.version, reason=None, detail=detail)
        out.append(entry)
    return out


@click.command()
@click.option(
    "--engines",
    default=",".join(ENGINES),
    show_default=True,
    help="Comma-separated engines to check.",
)
@click.option("--json", "as_json", is_flag=True, help="Canonical JSON on stdout.")
@click.option(
    "--foreign-look-s",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Text output: first watch the machine this long for CPU used outside metewand and "
    "name the top consumers (0: skip; --json keeps its list of engine reports).",
)
def doctor(engines: str, as_json: bool, foreign_look_s: float) -> None:
    """Engines found, versions and CDP readiness (each engine is launched once), and how busy
    the machine is outside metewand.

    Exits 3 when an engine is found but does not become ready.

    \b
    Examples:
      metewand browser doctor
      metewand browser doctor --engines chrome --json
      metewand browser doctor --engines chrome --foreign-look-s 1
    """
    from metewand.cli.doctor_cmd import foreign_check, foreign_line
    from metewand.suites.browser.doctor import engine_report, observer_line

    look = None if as_json else foreign_check(foreign_look_s)  # before any engine starts
    try:
        reports = [engine_report(name) for name in engine_list(engines)]
    except UnknownEngine as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(canonical.dumps(reports).decode())
    else:
        if (line := foreign_line(look)) is not None:
            click.echo(line)
        for r in reports:
            state = "ready" if r["ready"] else (r["reason"] or "not ready")
            ready_ms = f" in {r['ready_ms']:.0f} ms" if r["ready_ms"] is not None else ""
            click.echo(
                f"{r['engine']:<12} {state}{ready_ms}  {r['version'] or ''}  "
                f"{r['path'] or r['detail']}"
            )
            if (line := observer_line(r.get("observer"))) is not None:
                click.echo(line)
    found_ready = [r for r in reports if r["found"] and not r["ready"]]
    sys.exit(exit_codes.ENVIRONMENT_MISSING if found_ready else exit_codes.OK)


@click.command()
@click.option(
    "--check",
    "do_check",
    is_flag=True,
    help="Compare the corpus's generated scenario tasks with the expansion of their specs.",
)
@tasks_dir_option
@click.option(
    "--strict",
    is_flag=True,
    help="Also count expansions with no file and files whose spec is absent as "
    "differences (for a whole corpus; a partial one holds some back).",
)
@click.option("--json", "as_json", is_flag=True, help="Canonical JSON on stdout.")
def scenarios(do_check: bool, tasks_dir: Path | None, strict: bool, as_json: bool) -> None:
    """Scenario × driver expansion: check that generated tasks match tasks/scenarios/ specs.

    Exits 0 when every generated task equals its spec's expansion, 1 listing each difference
    (file and key), 3 when the corpus has no scenario specs.

    \b
    Examples:
      metewand browser scenarios --check --tasks ../shared/corpus/lexbench
      metewand browser scenarios --check --tasks ../shared/corpus/lexbench --json
    """
    from metewand.suites.browser.scenarios import SCENARIO_DIR, check

    if not do_check:
        raise click.UsageError("nothing to do: pass --check")
    root = tasks_dir or builtin_suite_dir()
    specs_dir = root / "tasks" / SCENARIO_DIR
    if not specs_dir.is_dir():
        click.echo(f"error: no scenario specs: {specs_dir} is not a directory", err=True)
        sys.exit(exit_codes.ENVIRONMENT_MISSING)
    report = check(root / "tasks", strict=strict)
    failing = report.failing
    if as_json:
        data = {
            "tasks": str(root / "tasks"),
            "specs": report.specs,
            "expansions": report.expansions,
            "matched": report.matched,
            "missing": report.missing,
            "orphaned": report.orphaned,
            "strict": strict,
            "differences": [d.__dict__ for d in failing],
        }
        click.echo(canonical.dumps(data).decode())
    else:
        for difference in failing:
            click.echo(difference.line())
        held = "" if strict else " (not differences without --strict: a partial corpus)"
        click.echo(
            f"{report.specs} specs, {report.expansions} expansions: {report.matched} "
            f"generated files match, {len(failing)} differences; {len(report.missing)} "
            f"expansions have no file, {len(report.orphaned)} files have no spec{held}"
        )
    sys.exit(exit_codes.OK if not failing else exit_codes.BENCHMARK_FAILURES)
