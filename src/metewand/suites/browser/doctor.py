"""``engine_report(name)``: find an engine, launch it, check CDP readiness, estimate what the
resource observer will cost on it here, tear it down.

Used by ``metewand browser doctor``. Never raises for an engine problem: the report says what
failed (``reason``) so a missing or broken engine is visible, not dropped.

The observer estimate: a profiled attempt takes two full PSS scans of the engine's tree inside
its collection window, and a scan's cost depends on this host (cores, memory speed) and on the
engine's tree. Timing a few scans of the idle, just-launched tree tells a user before an A/B how
long tasks must be for the collection-wall overhead to stay under a gate. An idle tree has no
page open, so the figure is a lower bound.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from metewand.measure import procfs
from metewand.measure.pss import PssScanner
from metewand.measure.quiet import wait_quiet
from metewand.suites.browser import event_loop
from metewand.suites.browser.binary_identity import binary_sha256, version_output
from metewand.suites.browser.engine_process import EngineLaunchError, EngineProcess
from metewand.suites.browser.engines import Missing, resolve
from metewand.suites.browser.profiler import PSS_READERS


def engine_report(name: str, configured_path: str | Path | None = None) -> dict[str, Any]:
    """Keys: engine, found, path, found_by, sha256, version, ready, ready_ms, product,
    json_version, teardown_clean, observer, reason, detail. Unknown names raise
    ``UnknownEngine``."""
    resolved = resolve(name, configured_path)
    report: dict[str, Any] = {
        "engine": name,
        "found": False,
        "path": None,
        "found_by": None,
        "sha256": None,
        "version": None,
        "ready": False,
        "ready_ms": None,
        "product": None,
        "json_version": None,
        "teardown_clean": None,
        "observer": None,
        "reason": None,
        "detail": None,
    }
    if isinstance(resolved, Missing):
        report.update(reason=resolved.reason, detail=resolved.detail)
        return report
    report.update(found=True, path=str(resolved.binary), found_by=resolved.found_by)
    report["sha256"] = binary_sha256(resolved.binary)
    report["version"] = version_output(resolved.binary, resolved.spec.version_argv)
    with tempfile.TemporaryDirectory(prefix="metewand-doctor-") as logs:
        process = EngineProcess(resolved, Path(logs))
        event_loop.run(_launch_and_check(process, report))
    return report


async def _launch_and_check(process: EngineProcess, report: dict[str, Any]) -> None:
    try:
        await process.start()
        report.update(ready=True, ready_ms=process.ready_ms, json_version=process.json_version)
        version = await process.cdp_version()
        report["product"] = version.get("product")
        if process.pid is not None:
            report["observer"] = await observer_estimate(process.pid)
    except EngineLaunchError as exc:
        report.update(reason="engine_not_ready", detail=str(exc))
    except (ConnectionError, TimeoutError) as exc:
        report.update(reason="cdp_unreachable", detail=repr(exc))
    finally:
        teardown = await process.stop()
        report["teardown_clean"] = teardown.clean


OBSERVER_SCANS = 5
GATES_PCT = (10, 5)


async def observer_estimate(root_pid: int) -> dict[str, Any]:
    """Median wall of a full PSS scan of the idle tree, what two of them add to an attempt, and
    the shortest task whose collection-wall overhead stays under each gate."""
    settled = await wait_quiet(root_pid, limit_s=3.0)
    with PssScanner(workers=PSS_READERS) as scanner:
        scanner.scan(procfs.descendants(root_pid))  # start the reader threads outside the timing
        scans = [scanner.scan(procfs.descendants(root_pid)) for _ in range(OBSERVER_SCANS)]
    median = statistics.median(scan.wall_ns / 1e6 for scan in scans)
    per_attempt = 2 * median
    return {
        "processes": scans[-1].process_count,
        "tree_quiet": settled.quiet,
        "pss_scan_wall_ms_median": round(median, 3),
        "per_attempt_ms": round(per_attempt, 3),
        "min_task_ms_for_gate": {f"{g}%": round(per_attempt * 100 / g) for g in GATES_PCT},
        "lower_bound": "idle tree without a page: an attempt's tree is larger",
    }


def observer_line(observer: dict[str, Any] | None) -> str | None:
    """One line for the text doctors: the estimate in words."""
    if not observer:
        return None
    gates = ", ".join(
        f"≤{gate} needs tasks ≥ {ms} ms" for gate, ms in observer["min_task_ms_for_gate"].items()
    )
    count = observer["processes"]
    return (
        f"  observer: a PSS scan of its {count} idle process{'es' if count != 1 else ''} takes "
        f"{observer['pss_scan_wall_ms_median']:.1f} ms, so a profiled attempt adds ≥ "
        f"{observer['per_attempt_ms']:.0f} ms; collection-wall overhead {gates}"
    )
