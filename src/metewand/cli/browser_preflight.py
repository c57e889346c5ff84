"""``browser run`` refuses what would waste or spoil a run before the run exists.

- a selected engine that is missing (exit 3), unless ``--allow-missing-engines`` records its
  attempts as ``unsupported`` rows;
- a ``--resource-calibration-baseline`` that names no run, or a run that cannot calibrate this
  one (exit 2, a bad argument): not a browser baseline run, or a provenance fact known before the
  run differs;
- a profiled run that can never be eligible (k < 5, one engine, jobs > 1, no baseline, ...):
  a warning up front, and ``--require-eligible`` refuses it (exit 2).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from metewand.cli import exit_codes

Echo = Callable[[str], None]
# Known only once engines have run (their binaries' hashes and version replies).
FACTS_KNOWN_AFTER_LAUNCH = frozenset({"engine_pins"})


def refuse(echo: Echo, lines: list[str], code: int) -> NoReturn:
    for line in lines:
        echo(f"error: {line}")
    sys.exit(code)


def check_event_loop(echo: Echo) -> None:
    """A ``METEWAND_EVENT_LOOP`` metewand does not know is refused before the run exists."""
    from metewand.suites.browser import event_loop

    try:
        event_loop.describe()
    except event_loop.EventLoopChoiceError as exc:
        refuse(echo, [str(exc)], exc.exit_code)


def check_engines(plan: Any, allow_missing: bool, echo: Echo) -> None:
    if not plan.missing or allow_missing:
        return
    lines = [f"engine {name}: {m.reason} ({m.detail})" for name, m in plan.missing.items()]
    lines.append("install it, leave it out of --engines, or pass --allow-missing-engines")
    refuse(echo, lines, exit_codes.ENVIRONMENT_MISSING)


def never_eligible(config: Any) -> list[str]:
    """Conditions of resource eligibility that the flags alone already break."""
    from metewand.compare.eligibility import MIN_K, REQUIRED_JOBS

    reasons = []
    if len(config.engines) < 2:
        reasons.append(f"{len(config.engines)} engine selected; a comparison needs at least two")
    if config.k < MIN_K:
        reasons.append(f"--k {config.k}; eligibility needs k >= {MIN_K}")
    if config.jobs != REQUIRED_JOBS:
        reasons.append(f"--jobs {config.jobs}; eligibility needs --jobs {REQUIRED_JOBS}")
    if config.score_mode != "independent":
        reasons.append(f"--score-mode {config.score_mode}; eligibility needs independent")
    # an interleaved run calibrates itself (its unprofiled twins); a separate one needs a baseline
    if (
        config.resource.calibration_baseline is None
        and config.resource.calibration_mode != "interleaved"
    ):
        reasons.append(
            "--resource-calibration peer-ab without --resource-calibration-baseline; "
            "eligibility needs a calibration (interleaved, the default, needs none)"
        )
    return reasons


def check_eligibility(config: Any, require: bool, echo: Echo) -> None:
    if config.resource.profile != "engine":
        if require:
            refuse(echo, ["--require-eligible needs --resource-profile engine"], 2)
        return
    reasons = never_eligible(config)
    if reasons and require:
        refuse(echo, ["the resource comparison could never be eligible:", *reasons], 2)
    if reasons:
        echo(
            "warning: the resource comparison of this run cannot be eligible: " + "; ".join(reasons)
        )
    _warn_separate(config, echo)


def _warn_separate(config: Any, echo: Echo) -> None:
    if config.resource.calibration_mode == "separate":
        from metewand.compare.run_warnings import SEPARATE_DRIFT_WARNING

        echo(f"warning: {SEPARATE_DRIFT_WARNING}")


def check_baseline(plan: Any, baseline_dir: Path, echo: Echo) -> None:
    """The baseline must be a profiler-off browser run with this run's provenance facts."""
    from metewand.compare.calibration import PROVENANCE_FACTS
    from metewand.compare.run_facts import MISSING, read_facts
    from metewand.runtime import provenance
    from metewand.runtime.store import RunView, StoreError
    from metewand.suites.browser.runner import manifest_data

    try:
        recorded = RunView(baseline_dir).manifest
    except (StoreError, ValueError) as exc:
        refuse(echo, [f"--resource-calibration-baseline: {exc}"], exit_codes.INVALID_INPUT)
    base = read_facts(recorded)
    planned = read_facts({"data": {**manifest_data(plan, "preflight"), **provenance.collect()}})
    problems = []
    if recorded.get("data", {}).get("suite") != "browser":
        problems.append(f"{baseline_dir} is not a browser run")
    if base.get("resource_profile") != "baseline":
        mode = base.get("resource_profile")
        problems.append(f"{baseline_dir} ran with --resource-profile {mode}, not baseline")
    if base.get("phase_marks", False):
        problems.append(
            f"{baseline_dir} ran with --phase-marks: the A/B's baseline must run "
            "unobserved (rerun it with --no-phase-marks, the baseline's default)"
        )
    for name in PROVENANCE_FACTS:
        if name in FACTS_KNOWN_AFTER_LAUNCH:
            continue
        ours, theirs = planned.values.get(name, MISSING), base.values.get(name, MISSING)
        if theirs is MISSING:
            problems.append(f"{baseline_dir}: {name} not recorded")
        elif ours != theirs:
            problems.append(f"{name} differs: baseline {_short(theirs)}, this run {_short(ours)}")
    if problems:
        lines = [f"--resource-calibration-baseline {baseline_dir} cannot calibrate this run:"]
        refuse(echo, lines + problems, exit_codes.INVALID_INPUT)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
