"""``engine_report(name)``: find an engine, launch it, check CDP readiness, tear it down.

Used by ``metewand browser doctor``. Never raises for an engine problem: the report says what
failed (``reason``) so a missing or broken engine is visible, not dropped.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from metewand.suites.browser.binary_identity import binary_sha256, version_output
from metewand.suites.browser.engine_process import EngineLaunchError, EngineProcess
from metewand.suites.browser.engines import Missing, resolve


def engine_report(name: str, configured_path: str | Path | None = None) -> dict[str, Any]:
    """Keys: engine, found, path, found_by, sha256, version, ready, ready_ms, product,
    json_version, teardown_clean, reason, detail. Unknown names raise ``UnknownEngine``."""
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
        asyncio.run(_launch_and_check(process, report))
    return report


async def _launch_and_check(process: EngineProcess, report: dict[str, Any]) -> None:
    try:
        await process.start()
        report.update(ready=True, ready_ms=process.ready_ms, json_version=process.json_version)
        version = await process.cdp_version()
        report["product"] = version.get("product")
    except EngineLaunchError as exc:
        report.update(reason="engine_not_ready", detail=str(exc))
    except (ConnectionError, TimeoutError) as exc:
        report.update(reason="cdp_unreachable", detail=repr(exc))
    finally:
        teardown = await process.stop()
        report["teardown_clean"] = teardown.clean
