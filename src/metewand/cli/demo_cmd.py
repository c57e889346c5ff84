"""``metewand demo``: the main job on built-in defaults.

It runs, one after the other, the same commands a user would type:

1. ``doctor`` (informative: what this machine can measure);
2. the compute example (``run`` on ``examples/sorting``) and its report;
3. a calibrated browser comparison of chrome and lightpanda on the built-in suite: a
   profiler-off baseline run, then the profiled run calibrated against it, and its report.

Each step is a child process of this interpreter, so every run gets a fresh event loop and a
failure in one step is reported without hiding the others. Engines that are missing are
reported by the runs themselves (their rows are ``unsupported``), never faked.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

import metewand
from metewand.runtime import rundir

from . import exit_codes


def _color() -> bool | None:
    """click strips styles off a terminal by itself; NO_COLOR (no-color.org) turns them off."""
    return False if os.environ.get("NO_COLOR") else None


def _repo_examples() -> Path:
    # src/metewand/__init__.py -> the repository root holds examples/
    return Path(metewand.__file__).resolve().parents[2] / "examples"


@dataclass
class DemoLog:
    reports: list[Path] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def step(self, title: str, args: list[str], *, required: bool = True) -> bool:
        click.secho(f"\n== {title}", bold=True, color=_color())
        click.echo("$ metewand " + " ".join(args))
        code = subprocess.call([sys.executable, "-m", "metewand", *args])
        if code != 0 and required:
            self.failures.append(f"{title} (exit {code})")
        return code == 0


def _report(log: DemoLog, run_dir: Path, extra: list[str]) -> None:
    if not (run_dir / rundir.RESULTS).exists():
        log.failures.append(f"report of {run_dir} (no {rundir.RESULTS})")
        return
    if log.step(f"report {run_dir.name}", ["report", str(run_dir), *extra]):
        log.reports.append(run_dir / rundir.REPORT)


def _compute(log: DemoLog, out: Path, stamp: str, manifest: Path) -> None:
    if not manifest.exists():
        log.failures.append(f"compute example: {manifest} not found (pass --compute-manifest)")
        return
    run_id = f"demo-compute-{stamp}"
    log.step("compute example", ["run", str(manifest), "--out", str(out), "--run-id", run_id])
    _report(log, out / run_id, [])


def _browser(log: DemoLog, out: Path, stamp: str, engines: str, k: int) -> None:
    common = [
        "browser", "run", "--engines", engines, "--k", str(k), "--jobs", "1",
        "--seed", "metewand-demo-v1", "--score-mode", "independent", "--out", str(out),
        "--allow-missing-engines",
    ]  # fmt: skip
    off_id, on_id = f"demo-browser-off-{stamp}", f"demo-browser-on-{stamp}"
    log.step(
        "browser baseline (profiler off)",
        [*common, "--resource-profile", "baseline", "--run-id", off_id],
    )
    reference = engines.split(",")[0]
    log.step(
        "browser profiled run (profiler on, calibrated against the baseline)",
        [
            *common, "--resource-profile", "engine", "--run-id", on_id,
            "--resource-calibration-baseline", str(out / off_id),
            "--reference-engine", reference,
        ],
    )  # fmt: skip
    _report(log, out / off_id, [])
    _report(log, out / on_id, ["--baseline", str(out / off_id), "--reference-engine", reference])


@click.command()
@click.option("--out", "out_dir", default="runs", show_default=True, help="Where runs are written.")
@click.option("--engines", default="chrome,lightpanda", show_default=True,
              help="Comma-separated engines of the browser pair of runs.")  # fmt: skip
@click.option("--k", "k", type=click.IntRange(min=1), default=5, show_default=True,
              help="Attempts per task and engine (eligibility needs k >= 5).")  # fmt: skip
@click.option(
    "--compute-manifest",
    type=click.Path(path_type=Path),
    default=None,
    help="Compute manifest (default: examples/sorting/metewand.toml of this checkout).",
)
@click.option("--skip-browser", is_flag=True, help="Only the compute example.")
@click.option("--skip-compute", is_flag=True, help="Only the browser comparison.")
def demo(
    out_dir: str,
    engines: str,
    k: int,
    compute_manifest: Path | None,
    skip_browser: bool,
    skip_compute: bool,
) -> None:
    """Run metewand's main job end to end and print where the reports are.

    \b
    Examples:
      metewand demo
      metewand demo --skip-browser
    """
    out = Path(out_dir).resolve()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    log = DemoLog()
    log.step("doctor", ["doctor"], required=False)
    if not skip_compute:
        manifest = compute_manifest or _repo_examples() / "sorting" / "metewand.toml"
        _compute(log, out, stamp, manifest)
    if not skip_browser:
        _browser(log, out, stamp, engines, k)
    click.secho("\n== reports", bold=True, color=_color())
    for path in log.reports:
        click.echo(str(path))
    for failure in log.failures:
        click.secho(f"failed: {failure}", fg="red", err=True, color=_color())
    sys.exit(exit_codes.BENCHMARK_FAILURES if log.failures else exit_codes.OK)
