"""``metewand browser``: the command group and ``run`` (the browser-engine suite); the read-only
subcommands list, doctor and scenarios are in ``browser_info_cmd``, ops in ``browser_ops_cmd``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from metewand.cli import exit_codes
from metewand.cli.browser_info_cmd import (
    doctor,
    engine_list,
    list_cmd,
    scenarios,
    tasks_dir_option,
)
from metewand.cli.derived import report_flag, write_derived
from metewand.cli.executor_flags import check_executor, executor_options, print_hosts
from metewand.cli.history_hook import add_to_history, history_flags
from metewand.cli.rundirs import find_run_dir, resolve_run_dir
from metewand.runtime import rundir
from metewand.suites.browser.run_config import (
    CALIBRATION_CHOICES,
    DEFAULT_DRIVER_ISOLATION,
    DRIVER_ISOLATIONS,
    ISOLATIONS,
    RESOURCE_PROFILES,
    SCORE_MODES,
    ResourceOptions,
    RunConfig,
    builtin_suite_dir,
)
from metewand.suites.browser.statuses import BROKEN

Echo = Callable[[str], None]


@click.group()
def browser() -> None:
    """Run headless browser engines against a task corpus over CDP.

    \b
    Examples:
      metewand browser doctor
      metewand browser list --json
      metewand browser run --engines chrome,lightpanda --k 3 --seed 7 --tag purpose.negative
    """


@browser.command()
@tasks_dir_option
@click.option("--subset", "subsets", multiple=True, help="Only this subset id (repeatable).")
@click.option("--task", "task_ids", multiple=True, help="Only this task id (repeatable).")
@click.option("--tag", "tags", multiple=True, help="Only tasks with this tag (repeatable).")
@click.option("--engines", default=None, help="Comma-separated engines, e.g. chrome,lightpanda.")
@click.option("--k", "k", type=int, default=1, show_default=True, help="Attempts per task.")
@click.option("--seed", default="0", show_default=True, help="Seed of the engine rotation.")
@click.option("--jobs", type=int, default=1, show_default=True, help="Attempts run at once.")
@click.option(
    "--score-mode",
    type=click.Choice(SCORE_MODES),
    default="independent",
    show_default=True,
    help="independent: each engine's rows scored on their own, every declared check must pass; "
    "peer-compatible: the same, but an L1 server-graded row is the server's verdict alone "
    "(the peer's published grading).",
)
@click.option(
    "--isolation",
    type=click.Choice(ISOLATIONS),
    default="shared",
    show_default=True,
    help="Raw CDP tasks. shared: a fresh page per attempt; context: also a fresh browser "
    "context. Driver paths have --driver-isolation.",
)
@click.option(
    "--driver-isolation",
    type=click.Choice(DRIVER_ISOLATIONS),
    default=DEFAULT_DRIVER_ISOLATION,
    show_default=True,
    help="Driver-path adapters. cleared: each attempt's pages in the engine's default context, "
    "the harness clearing its cookies, the fixture origins' storage and the HTTP cache after the "
    "attempt; context: in a browser context of the attempt's own (paths whose library opens pages "
    "only in the default context are cleared after); shared: in the default context, nothing "
    "cleared, as the peer's adapters (state passes between attempts). Rows say which in "
    "isolation and state_clear (docs/driver-ops.md).",
)
@click.option(
    "--adapter-mode",
    type=click.Choice(["long-lived", "per-attempt"]),
    default="long-lived",
    show_default=True,
    help="Driver-path adapters: one served adapter per driver x engine process in each slot "
    "(each attempt still opens its own page), or a fresh process per attempt.",
)
@click.option(
    "--phase-marks/--no-phase-marks",
    default=None,
    help="Read the engine group's and the harness's cheap counters at each page creation, "
    "navigation, step, driver op and grade (the rows' phases field). Default: on, off with "
    "--resource-profile baseline (the A/B's unobserved side); a resumed run keeps its own, "
    "and refuses the other flag (exit 2).",
)
@click.option("--run-id", default=None, help="Name of the run directory (default: timestamp).")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="Where runs live (relative to the current directory).",
)
@click.option("--resume", default=None, help="Finish an interrupted run (its dir or id).")
@click.option("--keep-going", is_flag=True, help="Skip invalid task files instead of exiting 2.")
@click.option(
    "--timeout-scale",
    type=float,
    default=1.0,
    show_default=True,
    help="Multiply every task's timeouts (e.g. 2 on a slow host).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar or lines.")
@click.option("--quiet", is_flag=True, help="Only errors.")
@click.option(
    "--resource-profile",
    type=click.Choice(RESOURCE_PROFILES),
    default="off",
    show_default=True,
    help="off: functional run; baseline: profiler-off A/B baseline; engine: profiled run.",
)
@click.option(
    "--resource-sample-interval-ms",
    type=int,
    default=500,
    show_default=True,
    help="PSS/process sampling interval of a profiled attempt.",
)
@click.option(
    "--resource-calibration-baseline",
    default=None,
    metavar="RUN",
    help="Profiler-off run (directory or id under --out) to calibrate against.",
)
@click.option(
    "--resource-calibration",
    type=click.Choice(list(CALIBRATION_CHOICES)),
    default=None,
    help="interleaved (the default of a profiled run): every attempt also runs once unprofiled "
    "beside it on the same engine process (its row is marked calibration_twin and kept out of "
    "scores and resource medians); peer-ab (alias separate; the default with "
    "--resource-calibration-baseline): the peer's A/B against a separate profiler-off run, whose "
    "figure also holds whatever drifted on the host between the two runs.",
)
@click.option(
    "--resource-calibration-every",
    type=int,
    default=1,
    show_default=True,
    metavar="N",
    help="Interleaved calibration: twins in one round of every N (a seeded sample of the "
    "rounds; 1: every round). A large run needs far fewer pairs than attempts for the "
    "observer's figure: 4 makes a profiled run 1.25x its attempts instead of 2x.",
)
@click.option(
    "--resource-max-observer-effect-pct",
    type=float,
    default=10.0,
    show_default=True,
    help="Largest acceptable profiler overhead (duration, collection wall).",
)
@click.option(
    "--reference-engine",
    default=None,
    help="Engine the others are compared against (paired ratios need one).",
)
@click.option(
    "--host-telemetry",
    type=click.Choice(["on", "off"]),
    default="on",
    show_default=True,
    help="Record host load, memory, swap and PSI beside the run.",
)
@click.option(
    "--host-sample-interval-s",
    type=float,
    default=2.0,
    show_default=True,
    help="Seconds between host telemetry samples (the foreign-CPU gate needs 3 in a row).",
)
@click.option(
    "--host-foreign-cpu-max",
    type=float,
    default=0.10,
    show_default=True,
    metavar="CORES",
    help="Pollution gate: CPU used beside the benchmark above this many cores for 3 host "
    "samples in a row trips foreign_cpu_load.",
)
@click.option(
    "--cold-start-samples",
    type=int,
    default=5,
    show_default=True,
    help="Profiled runs: engine cold starts measured before the attempts.",
)
@click.option(
    "--settle-limit-ms",
    type=int,
    default=1000,
    show_default=True,
    help="Resource profiles: after each attempt, wait up to this long for the engine to go "
    "quiet, so its teardown is charged to it and not to the next attempt (0: no wait).",
)
@click.option(
    "--fail-on",
    default="",
    metavar="STATUS,...",
    help="Also exit 1 when any attempt ends with one of these statuses (e.g. fail,timeout); "
    "infra and crash always do.",
)
@click.option(
    "--require-eligible",
    is_flag=True,
    help="Refuse a profiled run whose resource comparison could never be eligible.",
)
@click.option(
    "--allow-missing-engines",
    is_flag=True,
    help="Record a missing engine's attempts as unsupported instead of exiting 3.",
)
@executor_options("--jobs slots on this machine, each with its own engines")
@report_flag
@history_flags
def run(**opts: object) -> None:
    """Run tasks x engines x k attempts; rows go to OUT/RUN_ID/results.jsonl.

    Exit status: 0 when the run completed, whatever the engines' verdicts (they are the
    result); 1 when an attempt ended infra or crash, or with a --fail-on status; 2 invalid input
    or a calibration baseline that is missing or cannot calibrate this run (nothing run); 3 a
    missing engine, or --executor dask without a usable cluster (the run is left interrupted).
    Ctrl-C stops every engine, marks the run interrupted and exits 130; --resume finishes it.
    With --executor dask each round (a task attempt on every engine) runs whole on one worker.

    \b
    Examples:
      metewand browser run --engines chrome,lightpanda --k 1
      metewand browser run --tasks ../shared/corpus/lexbench --subset l1.raw_cdp \\
          --tag purpose.smoke --engines chrome --k 3 --jobs 2 --run-id lex1
      metewand browser run --resume lex1 --no-progress
      metewand browser run --engines chrome,lightpanda --task own_ax_tree \\
          --resource-profile baseline --run-id base1
      metewand browser run --engines chrome,lightpanda --task own_ax_tree \\
          --resource-profile engine --resource-calibration-baseline base1 \\
          --reference-engine chrome --run-id prof1
      metewand browser run --engines chrome --task own_ax_tree --fail-on fail,timeout
      metewand browser run --engines chrome,lightpanda --task own_ax_tree \\
          --executor dask --dask-local 2
    """
    from metewand.cli.progress import progress_mode, reporter_factory
    from metewand.suites.browser.runner import run_browser

    executor = _executor(opts)
    quiet = bool(opts["quiet"])
    mode = progress_mode(bool(opts["no_progress"]), quiet)
    fail_on = _statuses(str(opts["fail_on"]))

    def echo(text: str) -> None:
        if not quiet or text.startswith("error"):
            click.echo(text, err=True)

    # Every path is resolved here, once, against the directory the command was run from.
    out_dir = Path(str(opts["out_dir"])).absolute()
    resume = opts["resume"]
    if resume is not None:
        resume = str(resolve_run_dir(str(resume), out_dir, what="--resume"))
    config = plan = None
    if resume is None:
        if not opts["engines"]:
            raise click.UsageError("--engines is required (unless --resume)")
        config, plan = _checked_plan(opts, out_dir, echo)
    result = run_browser(
        config,
        out_dir,
        opts["run_id"],  # type: ignore[arg-type]
        resume,
        reporter_factory(mode),
        echo,
        plan=plan,
        executor=executor,
        resume_phase_marks=opts["phase_marks"],  # type: ignore[arg-type]
    )
    if result.exit_code != exit_codes.OK or result.run_dir is None:
        sys.exit(result.exit_code)
    if not write_derived(result.run_dir, echo, skip=bool(opts["no_report"])):
        sys.exit(exit_codes.BENCHMARK_FAILURES)
    if executor.kind == "dask":
        print_hosts(result.run_dir, echo)
    add_to_history(result.run_dir, out_dir, opts["history_path"], bool(opts["no_history"]), echo)  # type: ignore[arg-type]
    sys.exit(_outcome(result.run_dir, fail_on, echo))


def _executor(opts: dict[str, object]) -> Any:
    """The executor flags, checked (exit 2 when they disagree, 3 without the dask extra)."""
    scheduler, local = opts["scheduler"], opts["dask_local"]
    jobs_source = click.get_current_context().get_parameter_source("jobs")
    jobs_given = jobs_source is click.core.ParameterSource.COMMANDLINE
    return check_executor(str(opts["executor"]), scheduler, local, jobs_given)  # type: ignore[arg-type]


def _statuses(text: str) -> frozenset[str]:
    from metewand.suites.browser.statuses import STATUSES

    chosen = frozenset(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(chosen - set(STATUSES))
    if unknown:
        raise click.BadParameter(
            f"unknown status(es) {unknown}; choose from {list(STATUSES)}", param_hint="--fail-on"
        )
    return chosen


def _checked_plan(opts: dict[str, object], out_dir: Path, echo: Echo) -> tuple[RunConfig, Any]:
    """The run's plan, after every refusal that can be decided before the run exists."""
    from metewand.cli import browser_preflight as preflight
    from metewand.suites.browser.run_plan import PlanError, build_plan

    run_id = opts["run_id"]
    if run_id is not None and rundir.new_run_dir(out_dir, str(run_id)).exists():
        preflight.refuse(
            echo,
            [
                f"run {run_id!r} exists in {out_dir}; resume it with "
                f"--resume {run_id} or choose another --run-id"
            ],
            2,
        )
    baseline = opts["resource_calibration_baseline"]
    baseline_dir = None
    if baseline is not None:
        baseline_dir = find_run_dir(str(baseline), out_dir)
        if baseline_dir is None:
            preflight.refuse(
                echo,
                [
                    f"--resource-calibration-baseline {baseline!r}: no run "
                    f"directory (looked in {out_dir})"
                ],
                2,
            )
        opts = {**opts, "resource_calibration_baseline": str(baseline_dir)}
    preflight.check_event_loop(echo)
    config = _config(opts)
    try:
        plan = build_plan(config)
    except PlanError as exc:
        preflight.refuse(echo, exc.lines, exc.exit_code)
    preflight.check_engines(plan, bool(opts["allow_missing_engines"]), echo)
    if baseline_dir is not None:
        preflight.check_baseline(plan, baseline_dir, echo)
    preflight.check_eligibility(config, bool(opts["require_eligible"]), echo)
    return config, plan


def _outcome(run_dir: Path, fail_on: frozenset[str], echo: Echo) -> int:
    """0 when the run completed, whatever the engines' verdicts (they are the result); 1 when an
    attempt ended infra or crash (the harness or an engine process broke), or hit --fail-on."""
    from metewand.compare import compare_suites  # noqa: F401  (registers the suite kinds)
    from metewand.compare.run_warnings import run_warnings
    from metewand.compare.rundir import load_run

    run = load_run(run_dir)
    for line in run_warnings(run):
        echo(f"warning: {line}")
    # an interleaved calibration's twins ran on the same engines: their crash is a crash too
    statuses = {str(row.get("status")) for row in [*run.rows, *run.calibration_twins]}
    broken = statuses & BROKEN
    hit = statuses & fail_on
    if broken or hit:
        echo(f"exit 1: attempts ended {', '.join(sorted(broken | hit))}")
        return exit_codes.BENCHMARK_FAILURES
    return exit_codes.OK


def _calibration(opts: dict[str, object]) -> str:
    """The calibration mode the run records: the one asked for (``peer-ab`` is ``separate``),
    else ``ResourceOptions.calibration_mode``'s choice."""
    asked = opts["resource_calibration"]
    if asked is not None:
        return CALIBRATION_CHOICES[str(asked)]
    unasked = ResourceOptions(
        profile=str(opts["resource_profile"]),
        calibration_baseline=opts["resource_calibration_baseline"],  # type: ignore[arg-type]
    )
    return unasked.calibration_mode


def _config(opts: dict[str, object]) -> RunConfig:
    tasks_dir = opts["tasks_dir"] or builtin_suite_dir()
    resource = ResourceOptions(
        profile=str(opts["resource_profile"]),
        sample_interval_ms=int(opts["resource_sample_interval_ms"]),  # type: ignore[call-overload]
        calibration_baseline=opts["resource_calibration_baseline"],  # type: ignore[arg-type]
        calibration=_calibration(opts),
        calibration_every=int(opts["resource_calibration_every"]),  # type: ignore[call-overload]
        max_observer_effect_pct=float(opts["resource_max_observer_effect_pct"]),  # type: ignore[arg-type]
        reference_engine=opts["reference_engine"],  # type: ignore[arg-type]
        host_telemetry=opts["host_telemetry"] == "on",
        host_sample_interval_s=float(opts["host_sample_interval_s"]),  # type: ignore[arg-type]
        host_foreign_cpu_max=float(opts["host_foreign_cpu_max"]),  # type: ignore[arg-type]
        cold_start_samples=int(opts["cold_start_samples"]),  # type: ignore[call-overload]
        settle_limit_ms=int(opts["settle_limit_ms"]),  # type: ignore[call-overload]
    )
    return RunConfig(
        tasks_dir=str(Path(str(tasks_dir)).resolve()),
        engines=engine_list(str(opts["engines"])),
        k=int(opts["k"]),  # type: ignore[call-overload]
        seed=str(opts["seed"]),
        jobs=int(opts["jobs"]),  # type: ignore[call-overload]
        score_mode=str(opts["score_mode"]),
        isolation=str(opts["isolation"]),
        subsets=tuple(opts["subsets"]),  # type: ignore[arg-type]
        task_ids=tuple(opts["task_ids"]),  # type: ignore[arg-type]
        tags=tuple(opts["tags"]),  # type: ignore[arg-type]
        keep_going=bool(opts["keep_going"]),
        timeout_scale=float(opts["timeout_scale"]),  # type: ignore[arg-type]
        adapter_mode=str(opts["adapter_mode"]).replace("-", "_"),
        driver_isolation=str(opts["driver_isolation"]),
        phase_marks=opts["phase_marks"],  # type: ignore[arg-type]  # None: the profile's default
        resource=resource,
    )


def _register_subcommands() -> None:
    from metewand.cli.browser_ops_cmd import ops

    for command in (list_cmd, doctor, scenarios, ops):
        browser.add_command(command)


_register_subcommands()
