"""``metewand demo``: the main job on built-in defaults, ending with a verdict per suite.

It runs, one after the other, the same commands a user would type:

1. ``doctor`` (informative: what this machine can measure, how busy it is);
2. the compute example (``run`` on the packaged ``sorting`` example) and its report;
3. a calibrated browser comparison of chrome and lightpanda on the built-in suite: one profiled
   run whose observer is calibrated by interleaved unobserved twins, and its reports. By
   default on the tasks tagged ``purpose.demo`` (6 tasks whose Chrome attempts last ~430-680 ms,
   long enough for the observer's two exact PSS walks to stay under the calibration's 10% on a
   2-vCPU host; the whole demo is meant to take under three minutes on a quiet 2-core host, and
   took 163 s at load ~1); ``--full`` takes the whole suite (29 tasks, several times longer).

Then it prints the verdict of each suite (``compare.verdict``): the question, the answer with its
key figures and CIs, eligibility with the failed conditions in words, the failures grouped by
cause, and where the reports are. Each step is a child process of this interpreter, so every run
gets a fresh event loop and a failure in one step is reported without hiding the others. Engines
that are missing are reported by the runs themselves (their rows are ``unsupported``), never faked.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from metewand.cli import exit_codes
from metewand.cli.examples_cmd import example_manifest
from metewand.runtime import rundir

DEMO_TAG = "purpose.demo"
DEMO_EXAMPLE = "sorting"
DOCTOR_LOOK_S = "2"  # doctor's look at the host's foreign CPU: enough to name a busy host


def _color() -> bool | None:
    """click strips styles off a terminal by itself; NO_COLOR (no-color.org) turns them off."""
    return False if os.environ.get("NO_COLOR") else None


@dataclass
class DemoLog:
    verdict_runs: list[Path] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def step(self, title: str, args: list[str], *, required: bool = True) -> bool:
        click.secho(f"\n== {title}", bold=True, color=_color())
        click.echo("$ metewand " + shlex.join(args))
        code = subprocess.call([sys.executable, "-m", "metewand", *args])
        if code != 0 and required:
            self.failures.append(f"{title} (exit {code})")
        return code == 0


def _report(log: DemoLog, run_dir: Path, extra: list[str], *, verdict: bool) -> None:
    if not (run_dir / rundir.RESULTS).exists():
        log.failures.append(f"report of {run_dir} (no {rundir.RESULTS})")
        return
    if log.step(f"report {run_dir.name}", ["report", str(run_dir), *extra]) and verdict:
        log.verdict_runs.append(run_dir)


def _compute(log: DemoLog, out: Path, stamp: str, manifest: Path) -> None:
    if not manifest.exists():
        log.failures.append(f"compute example: {manifest} not found (pass --compute-manifest)")
        return
    run_id = f"demo-compute-{stamp}"
    log.step("compute example", ["run", str(manifest), "--out", str(out), "--run-id", run_id])
    _report(log, out / run_id, [], verdict=True)


def _browser(log: DemoLog, out: Path, stamp: str, engines: str, k: int, full: bool) -> None:
    common = [
        "browser",
        "run",
        "--engines",
        engines,
        "--k",
        str(k),
        "--jobs",
        "1",
        "--seed",
        "metewand-demo-v1",
        "--score-mode",
        "independent",
        "--out",
        str(out),
        "--allow-missing-engines",
        *([] if full else ["--tag", DEMO_TAG]),
    ]
    run_id = f"demo-browser-on-{stamp}"
    reference = engines.split(",")[0]
    # interleaved calibration (the default of a profiled run): every observed attempt has an
    # unobserved twin in the same round, so the observer's cost is not mixed with the drift
    # between two separate runs, as an off run followed by an on run would be
    log.step(
        "browser profiled run (profiler on, calibrated by interleaved unobserved twins)",
        [
            *common,
            "--resource-profile",
            "engine",
            "--resource-calibration",
            "interleaved",
            "--run-id",
            run_id,
            "--reference-engine",
            reference,
        ],
    )
    _report(log, out / run_id, ["--reference-engine", reference], verdict=True)


def _verdicts(log: DemoLog) -> None:
    from metewand.compare import compare_suites  # noqa: F401  (registers the suite kinds)
    from metewand.compare.rundir import RunDirError, load_run
    from metewand.compare.verdict import render, verdict_of

    for run_dir in log.verdict_runs:
        click.secho("\n== verdict", bold=True, color=_color())
        try:
            verdict = verdict_of(load_run(run_dir))
        except RunDirError as exc:
            log.failures.append(f"verdict of {run_dir}: {exc}")
            continue
        if verdict is None:
            log.failures.append(f"verdict of {run_dir}: its suite has none")
            continue
        click.echo("\n".join(render(verdict)))


@click.command()
@click.option("--out", "out_dir", default="runs", show_default=True, help="Where runs are written.")
@click.option(
    "--engines",
    default="chrome,lightpanda",
    show_default=True,
    help="Comma-separated engines of the browser pair of runs.",
)
@click.option(
    "--k",
    "k",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Attempts per task and engine (eligibility needs k >= 5).",
)
@click.option(
    "--full", is_flag=True, help=f"The whole built-in browser suite, not only its {DEMO_TAG} tasks."
)
@click.option(
    "--compute-manifest",
    type=click.Path(path_type=Path),
    default=None,
    help=f"Compute manifest (default: the packaged {DEMO_EXAMPLE} example).",
)
@click.option("--skip-browser", is_flag=True, help="Only the compute example.")
@click.option("--skip-compute", is_flag=True, help="Only the browser comparison.")
def demo(
    out_dir: str,
    engines: str,
    k: int,
    full: bool,
    compute_manifest: Path | None,
    skip_browser: bool,
    skip_compute: bool,
) -> None:
    """Run metewand's main job end to end and end with a verdict per suite.

    \b
    Examples:
      metewand demo
      metewand demo --skip-browser
      metewand demo --full
    """
    started = time.monotonic()
    out = Path(out_dir).resolve()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    log = DemoLog()
    engines_checked = "" if skip_browser else engines  # no browser runs: no engine to launch
    # the demo runs no driver-path adapter: doctor's driver listing would only be noise here
    log.step(
        "doctor",
        ["doctor", "--engines", engines_checked, "--no-drivers", "--foreign-look-s", DOCTOR_LOOK_S],
        required=False,
    )
    if not skip_compute:
        _compute(log, out, stamp, compute_manifest or example_manifest(DEMO_EXAMPLE))
    if not skip_browser:
        _browser(log, out, stamp, engines, k, full)
    _verdicts(log)
    click.echo(f"\ndemo took {time.monotonic() - started:.0f} s")
    for failure in log.failures:
        click.secho(f"failed: {failure}", fg="red", err=True, color=_color())
    sys.exit(exit_codes.BENCHMARK_FAILURES if log.failures else exit_codes.OK)
