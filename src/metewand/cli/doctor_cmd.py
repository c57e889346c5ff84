"""``metewand doctor``: what this machine offers a run, and the command that fixes each problem.

The accounting check opens real accounting (and closes it), so the backend it names is the one a
run would get, with the reasons each better backend was skipped.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from metewand import canonical
from metewand.cli import exit_codes

# The measure modules are imported where used, so `metewand doctor --help` stays fast.
if TYPE_CHECKING:
    from metewand.measure.cgroups import CgroupLayout

PRESSURE = Path("/proc/pressure")
# Above this, a 10% CPU-time change needs more than 10 interleaved pairs (log SD 0.06 needs 9,
# 0.08 needs 14), the sorting example's repetitions: the doctor advises.
UNSTEADY_LOG_SD = 0.065
ENGINE_FIXES = {
    "chrome": "apt-get install -y chromium",
    "lightpanda": "pip install 'metewand[lightpanda]'",
}


def layout_name(layout: CgroupLayout) -> str:
    if layout.v2 is not None and layout.v1:
        return "hybrid"
    if layout.v2 is not None:
        return "unified"
    return "legacy" if layout.v1 else "none"


def accounting_check(layout: CgroupLayout) -> dict[str, Any]:
    from metewand.measure.accounting import AccountingUnavailable, open_accounting

    try:
        accounting = open_accounting("auto", label="metewand-doctor", layout=layout)
    except AccountingUnavailable as exc:
        return {"backend": None, "reason": exc.reason, "fallback_reasons": []}
    try:
        memory = accounting.memory()
        source = memory.peak.source if memory.peak is not None else None
        return {
            "backend": accounting.backend,
            "fallback_reasons": list(accounting.fallback_reasons),
            "memory_source": source,
        }
    finally:
        accounting.close()


def system_checks() -> dict[str, Any]:
    from metewand.measure import host_facts
    from metewand.measure.process import exit_wait_method

    method, why = exit_wait_method()
    swaps = (host_facts.read_text_or_none("/proc/swaps") or "").splitlines()[1:]
    psi = {r: (PRESSURE / r).exists() for r in ("cpu", "memory", "io")}
    return {
        "psi": psi,
        "governor": host_facts.cpu_governors(),
        "swap_devices": len(swaps),
        "clocksource": host_facts.clock_source(),
        "exit_wait": {"method": method, "reason": why},
    }


def foreign_check(look_s: float) -> dict[str, Any] | None:
    """CPU the machine spends outside this command over one look (None: ``look_s`` is 0)."""
    if look_s <= 0:
        return None
    from metewand.measure import foreign
    from metewand.measure.host_gate import GateThresholds

    try:
        figures = foreign.look(look_s, os.getpid())
    except (OSError, ValueError) as exc:
        return {"look_s": look_s, "unavailable": f"{type(exc).__name__}: {exc}"}
    limit = GateThresholds().foreign_cpu_max_cores
    keep = ("machine_cpu_cores", "foreign_cpu_cores", "visible_foreign_cpu_cores", "top_foreign")
    return {"look_s": look_s, "threshold_cores": limit, **{k: figures[k] for k in keep}}


def foreign_line(check: dict[str, Any] | None) -> str | None:
    """``foreign CPU: 1.21 cores over a 5 s look (limit 0.1); top: chromium[812] 0.70, ...``"""
    if check is None:
        return None
    if "unavailable" in check:
        return f"foreign CPU: unavailable ({check['unavailable']})"
    shown = check["top_foreign"][:5]  # the JSON keeps all the look named
    top = ", ".join(f"{t['comm']}[{t['pid']}] {t['cpu_cores']:.2f}" for t in shown)
    return (
        f"foreign CPU: {check['foreign_cpu_cores']:.2f} cores of {check['machine_cpu_cores']:.2f} "
        f"busy over a {check['look_s']:g} s look (a run's gate trips above "
        f"{check['threshold_cores']} sustained); top: {top or 'no visible process'}"
    )


def steadiness_check(enabled: bool) -> dict[str, Any] | None:
    """The CPU speed's steadiness under fixed work (None: skipped)."""
    if not enabled:
        return None
    from metewand.measure import cpu_steadiness

    try:
        return cpu_steadiness.probe()
    except OSError as exc:  # no affinity syscalls here: say so rather than guess
        return {"unavailable": f"cannot pin this thread to each CPU ({exc})"}


def steadiness_line(check: dict[str, Any] | None) -> str | None:
    """``CPU steadiness: 20 ms of fixed work took 0.70-1.29x its median (log SD 0.18) ...``"""
    if check is None:
        return None
    if "unavailable" in check:
        return f"CPU steadiness: unavailable ({check['unavailable']})"
    low, high = check["range_of_median"]
    cpus = ", ".join(f"{c}: {v['median_ms']:.1f} ms" for c, v in check["cpus"].items())
    needed = ", ".join(f"{n} for a {c} change" for c, n in check["pairs_needed"].items())
    return (
        f"CPU steadiness: {check['slice_ms']:.0f} ms of fixed work took {low:.2f}-{high:.2f}x its "
        f"median over {check['slices_per_cpu']} slices per CPU (log SD {check['log_sd']:.3f}; "
        f"medians {cpus})\n  interleaved pairs a CPU-time comparison needs here: {needed} "
        "(two-sided 5% test, 80% power)"
    )


def lightpanda_wheel() -> str | None:
    import importlib.metadata  # scans every installed distribution: only when asked

    try:
        return importlib.metadata.version("lightpanda")
    except importlib.metadata.PackageNotFoundError:
        return None


def engine_checks(names: list[str]) -> list[dict[str, Any]]:
    from metewand.suites.browser.doctor import engine_report

    return [engine_report(name) for name in names]


def driver_checks() -> dict[str, Any]:
    from metewand.suites.browser.driver_doctor import driver_report

    return driver_report()


def problems_of(report: dict[str, Any]) -> list[dict[str, str]]:
    """Each problem with its severity (required: a run needs it) and the fixing command."""
    found: list[dict[str, str]] = []
    acc = report["accounting"]
    if acc["backend"] is None:
        found.append(_problem("required", "no accounting backend: " + acc["reason"], "run as root"))
    elif acc["backend"] == "proc":
        found.append(
            _problem("advice", "CPU from /proc only (child-exit loss risk)", "run as root")
        )
    if not all(report["system"]["psi"].values()):
        found.append(_problem("advice", "PSI unavailable", "boot with psi=1"))
    if report["system"]["swap_devices"]:
        found.append(_problem("advice", "swap is on: memory figures can move", "swapoff -a"))
    for engine in report["engines"]:
        if not engine.get("found") or not engine.get("ready"):
            fix = ENGINE_FIXES.get(engine["engine"], f"configure a path for {engine['engine']}")
            what = f"engine {engine['engine']}: {engine.get('reason')} {engine.get('detail') or ''}"
            found.append(_problem("required", what.strip(), fix))
    steady = report.get("cpu_steadiness") or {}
    if steady.get("log_sd", 0) > UNSTEADY_LOG_SD:
        found.append(
            _problem(
                "advice",
                f"CPU speed unsteady: fixed work's CPU time has log SD {steady['log_sd']:.3f}, so "
                f"a 10% change needs about {steady['pairs_needed']['10%']} interleaved pairs",
                "raise repetitions to that many, compare CPU on an interleaved A/B run, or "
                "benchmark on a dedicated (bare-metal) host",
            )
        )
    look = report.get("foreign_cpu") or {}
    if look.get("foreign_cpu_cores", 0) > look.get("threshold_cores", float("inf")):
        busy = foreign_line(look) or ""
        fix = "wait for that work to end or stop it: a run now would trip foreign_cpu_load"
        found.append(_problem("advice", "host busy: " + busy.removeprefix("foreign CPU: "), fix))
    found.extend(driver_problems(report.get("drivers")))
    if report["lightpanda_wheel"] is None and "lightpanda" in report["engines_checked"]:
        found.append(_problem("required", "lightpanda wheel missing", ENGINE_FIXES["lightpanda"]))
    return found


def driver_problems(drivers: dict[str, Any] | None) -> list[dict[str, str]]:
    """Driver paths are optional for a run (a missing one is reported ``unsupported``): advice."""
    if drivers is None:
        return []
    found = []
    checks = (
        ("node", "apt-get install nodejs (>= 20)"),
        ("npm_install", "make install"),
        ("chromedriver", "apt-get install chromium-driver (chromium's own version)"),
    )
    for name, fix in checks:
        if not drivers[name]["ok"]:
            found.append(_problem("advice", f"{name}: {drivers[name]['detail']}", fix))
    for client in drivers["python_clients"]:
        if not client["ok"]:
            what = f"python driver {client['package']}: {client.get('version')} (pinned {client['pinned']}), import {client.get('import')}"
            found.append(_problem("advice", what, "pip install -e '.[drivers]' (make install)"))
    return found


def _problem(severity: str, message: str, fix: str) -> dict[str, str]:
    return {"severity": severity, "message": message, "fix": fix}


def build_report(
    engines: list[str], look_s: float = 0.0, drivers: bool = True, cpu_probe: bool = True
) -> dict[str, Any]:
    from metewand.measure.cgroups import detect_layout

    look = foreign_check(look_s)  # first, before this command launches any engine
    steadiness = steadiness_check(cpu_probe)  # also before: an engine's start would disturb it
    layout = detect_layout()
    report: dict[str, Any] = {
        "foreign_cpu": look,
        "cpu_steadiness": steadiness,
        "cgroup_layout": {"name": layout_name(layout), **layout.to_json()},
        "accounting": accounting_check(layout),
        "system": system_checks(),
        "lightpanda_wheel": lightpanda_wheel(),
        "engines_checked": engines,
        "engines": engine_checks(engines) if engines else [],
        "drivers": driver_checks() if drivers else None,
    }
    report["problems"] = problems_of(report)
    return report


def _print_text(report: dict[str, Any]) -> None:
    from metewand.suites.browser.doctor import observer_line

    layout, acc, system = report["cgroup_layout"], report["accounting"], report["system"]
    v2 = layout["v2"]
    click.echo(f"cgroup layout: {layout['name']}")
    if v2 is not None:
        ctrls = ", ".join(v2["controllers"]) or "no controllers"
        click.echo(f"  cgroup2 at {v2['mountpoint']} ({ctrls}), own group {v2['own_dir']}")
    click.echo(f"  cgroup1 controllers: {', '.join(layout['v1']) or 'none'}")
    for what, why in layout["reasons"].items():
        click.echo(f"  unusable {what}: {why}")
    click.echo(f"accounting backend: {acc['backend']} (memory from {acc.get('memory_source')})")
    for reason in acc.get("fallback_reasons", []):
        click.echo(f"  skipped {reason}")
    click.echo(f"PSI: {', '.join(r for r, ok in system['psi'].items() if ok) or 'unavailable'}")
    gov = system["governor"]
    missing = gov.get("unavailable") or {}
    governor = ", ".join(gov.get("distinct") or []) or (
        f"unavailable ({missing.get('reason')}: {missing.get('detail')})"
    )
    click.echo(f"CPU governor: {governor}")
    click.echo(f"swap devices: {system['swap_devices']}; clocksource: {system['clocksource']}")
    wait = system["exit_wait"]
    click.echo(
        f"process exit wait: {wait['method']}" + (f" ({wait['reason']})" if wait["reason"] else "")
    )
    click.echo(f"lightpanda wheel: {report['lightpanda_wheel'] or 'not installed'}")
    for line in (foreign_line(report["foreign_cpu"]), steadiness_line(report["cpu_steadiness"])):
        if line is not None:
            click.echo(line)
    for engine in report["engines"]:
        state = "ready" if engine.get("ready") else f"NOT READY ({engine.get('reason')})"
        click.echo(f"engine {engine['engine']}: {state} {engine.get('path')}")
        click.echo(f"  version {engine.get('version')}; sha256 {engine.get('sha256')}")
        if (line := observer_line(engine.get("observer"))) is not None:
            click.echo(line)
    if report.get("drivers") is not None:
        from metewand.suites.browser.driver_doctor import driver_lines

        click.echo("driver paths:")
        for line in driver_lines(report["drivers"]):
            click.echo(f"  {line}")
    for problem in report["problems"]:
        click.echo(f"{problem['severity']}: {problem['message']}\n  fix: {problem['fix']}")


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Canonical JSON on stdout.")
@click.option("--engines", default="chrome,lightpanda", show_default=True, help="'' to skip.")
@click.option(
    "--foreign-look-s",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Watch the machine this long for CPU used outside metewand, naming the top "
    "consumers (0: skip).",
)
@click.option(
    "--drivers/--no-drivers",
    default=True,
    show_default=True,
    help="Check Node, the npm install, chromedriver, the Python driver clients and "
    "every browser driver path.",
)
@click.option(
    "--cpu-probe/--no-cpu-probe",
    default=True,
    show_default=True,
    help="Time fixed work in slices on each CPU (~1.6 s): how steady the CPU speed is, and how "
    "many interleaved pairs a CPU-time comparison needs here.",
)
def doctor(
    as_json: bool, engines: str, foreign_look_s: float, drivers: bool, cpu_probe: bool
) -> None:
    """Check what a run needs: accounting backend, PSI, governor, swap, clock, engines, browser
    driver paths (Node, npm install, chromedriver, Python clients), and how busy the machine is
    outside metewand.

    \b
    Exit 0 when everything a run needs is present, 3 when something required is missing.
    Examples:
      metewand doctor
      metewand doctor --json --engines chrome
      metewand doctor --engines '' --foreign-look-s 1
      metewand doctor --engines '' --no-drivers --foreign-look-s 0 --no-cpu-probe
    """
    names = [e.strip() for e in engines.split(",") if e.strip()]
    report = build_report(names, foreign_look_s, drivers, cpu_probe)
    if as_json:
        sys.stdout.write(canonical.dumps_str(report) + "\n")
    else:
        _print_text(report)
    if any(p["severity"] == "required" for p in report["problems"]):
        sys.exit(exit_codes.ENVIRONMENT_MISSING)
