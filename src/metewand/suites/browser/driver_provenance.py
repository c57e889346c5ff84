"""Run-level provenance of the driver paths a run uses: each path's client library, its pinned
and installed versions, and the hash of what locks it (the npm lockfile's integrity entry for a
Node library, the installed distribution's RECORD for a Python one), as the peer's manifest lists
its drivers. No host path is written: the adapter is named relative to the repository."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections.abc import Iterable
from typing import Any

from metewand.suites.browser.driver_registry import (
    REPO_ROOT,
    DriverMissing,
    DriverPath,
    NodePackage,
    PythonPackage,
    node_dir,
    path_for_driver,
    resolve_driver,
)


def _node_lock(package: str) -> dict[str, Any]:
    lock_file = node_dir() / "package-lock.json"
    try:
        text = lock_file.read_text()
        entry = json.loads(text).get("packages", {}).get(f"node_modules/{package}", {})
    except (OSError, ValueError):
        return {"lock": None, "lock_sha256": None, "integrity": None}
    return {
        "lock": "drivers/node/package-lock.json",
        "lock_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "integrity": entry.get("integrity"),
    }


def _python_lock(distribution: str) -> dict[str, Any]:
    try:
        record = importlib.metadata.distribution(distribution).read_text("RECORD")
    except importlib.metadata.PackageNotFoundError:
        record = None
    return {
        "lock": f"{distribution} RECORD" if record else None,
        "lock_sha256": hashlib.sha256(record.encode()).hexdigest() if record else None,
        "integrity": None,
    }


def path_provenance(path: DriverPath) -> dict[str, Any]:
    found = resolve_driver(path.key)
    entry: dict[str, Any] = {
        "driver_path": path.key,
        "language": path.language,
        "library": path.library.name,
        "pinned": path.version,
        "route_id": path.route_id,
    }
    if isinstance(found, DriverMissing):
        return entry | {"installed": None, "adapter": None, "missing": found.detail}
    adapter = found.command.argv[1] if len(found.command.argv) > 1 else found.command.argv[0]
    try:
        adapter = str(__import__("pathlib").Path(adapter).resolve().relative_to(REPO_ROOT))
    except ValueError:
        adapter = "configured adapter"  # outside the repository: its host path is not recorded
    entry |= {"installed": found.version, "adapter": adapter}
    if isinstance(path.library, NodePackage):
        entry |= _node_lock(path.library.name)
    elif isinstance(path.library, PythonPackage):
        entry |= _python_lock(path.library.name)
    return entry


def run_drivers(driver_blocks: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each driver path the run's tasks use, keyed by the library (as the peer keys them)."""
    paths = {p.key: p for p in (path_for_driver(block) for block in driver_blocks) if p is not None}
    return {p.library.name: path_provenance(p) for p in sorted(paths.values(), key=lambda p: p.key)}
