"""What the driver paths need on this machine: Node and its version, the npm install against the
lock, chromedriver against chromium, each Python client's import and version, and every driver
path found or missing with why (``driver_report``). Nothing is launched but ``--version``."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import re
import shutil
import subprocess
from typing import Any, Final

from metewand.suites.browser.driver_registry import (
    DRIVER_PATHS,
    DriverMissing,
    PythonPackage,
    node_dir,
    resolve_driver,
)

NODE_MIN_MAJOR: Final = 20  # the peer's language_runtimes pin (node >= 20.0.0)
VERSION_TIMEOUT_S: Final = 10.0
# The import name of each Python client (its distribution name differs).
PYTHON_MODULES: Final = {"selenium": "selenium", "pydoll-python": "pydoll", "cdp-use": "cdp_use"}


def _version_output(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout or done.stderr).strip() or None


def node_check() -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        return {"found": False, "ok": False, "detail": "node not on PATH"}
    version = _version_output([node, "--version"]) or ""
    match = re.match(r"v(\d+)\.", version)
    major = int(match.group(1)) if match else None
    ok = major is not None and major >= NODE_MIN_MAJOR
    detail = "" if ok else f"node {version or '?'} is older than {NODE_MIN_MAJOR}"
    return {"found": True, "ok": ok, "path": node, "version": version, "detail": detail}


def npm_install_check() -> dict[str, Any]:
    """drivers/node/node_modules against package-lock.json: every locked package installed at
    its locked version (a stale or partial install names what differs)."""
    root = node_dir()
    modules = root / "node_modules"
    try:
        lock = json.loads((root / "package-lock.json").read_text())
    except (OSError, ValueError) as exc:
        return {"ok": False, "detail": f"no readable {root / 'package-lock.json'}: {exc}"}
    if not modules.is_dir():
        return {"ok": False, "detail": f"{modules} absent; run make install (npm ci)"}
    differing: list[str] = []
    locked = {k: v for k, v in lock.get("packages", {}).items() if k.startswith("node_modules/")}
    for key, entry in locked.items():
        try:
            installed = json.loads((root / key / "package.json").read_text()).get("version")
        except (OSError, ValueError):
            installed = None
        if installed != entry.get("version") and not entry.get("optional"):
            differing.append(
                f"{key.removeprefix('node_modules/')} {installed or 'absent'} "
                f"(locked {entry.get('version')})"
            )
    detail = "; ".join(differing[:5]) + (
        f" and {len(differing) - 5} more" if len(differing) > 5 else ""
    )
    return {
        "ok": not differing,
        "locked": len(locked),
        "differing": len(differing),
        "detail": (detail + "; run make install") if differing else "",
    }


def chromedriver_check() -> dict[str, Any]:
    """Debian's chromium-driver must be chromium's own build (chromedriver refuses other majors)."""
    driver, chromium = shutil.which("chromedriver"), shutil.which("chromium")
    if driver is None:
        return {
            "found": False,
            "ok": False,
            "detail": "chromedriver not on PATH (apt-get install chromium-driver)",
        }
    driver_version = _version_output([driver, "--version"]) or ""
    browser_version = (_version_output([chromium, "--version"]) or "") if chromium else ""
    number = re.compile(r"(\d+)\.(\d+)\.(\d+)\.(\d+)")
    found_driver, found_browser = number.search(driver_version), number.search(browser_version)
    ok = bool(found_driver and found_browser and found_driver.group(0) == found_browser.group(0))
    detail = (
        ""
        if ok
        else f"chromedriver {found_driver and found_driver.group(0)} vs chromium {found_browser and found_browser.group(0)}"
    )
    return {
        "found": True,
        "ok": ok,
        "path": driver,
        "version": found_driver.group(0) if found_driver else None,
        "chromium_version": found_browser.group(0) if found_browser else None,
        "detail": detail,
    }


def python_client_checks() -> list[dict[str, Any]]:
    out = []
    for path in DRIVER_PATHS.values():
        if not isinstance(path.library, PythonPackage):
            continue
        name = path.library.name
        entry: dict[str, Any] = {"package": name, "pinned": path.version}
        try:
            entry["version"] = importlib.metadata.version(name)
            importlib.import_module(PYTHON_MODULES.get(name, name))
            entry["import"] = "ok"
        except importlib.metadata.PackageNotFoundError:
            entry.update({"version": None, "import": "not installed"})
        except Exception as exc:  # an import that breaks is the finding, whatever it raises
            entry["import"] = f"{type(exc).__name__}: {exc}"
        entry["ok"] = entry.get("import") == "ok" and entry.get("version") == path.version
        out.append(entry)
    return out


def driver_paths() -> list[dict[str, Any]]:
    rows = []
    for key, path in DRIVER_PATHS.items():
        found = resolve_driver(key)
        if isinstance(found, DriverMissing):
            rows.append(
                {
                    "driver": key,
                    "language": path.language,
                    "found": False,
                    "reason": found.reason,
                    "detail": found.detail,
                }
            )
        else:
            rows.append(
                {
                    "driver": key,
                    "language": path.language,
                    "found": True,
                    "version": found.version,
                    "detail": found.source,
                }
            )
    return rows


def driver_report() -> dict[str, Any]:
    return {
        "node": node_check(),
        "npm_install": npm_install_check(),
        "chromedriver": chromedriver_check(),
        "python_clients": python_client_checks(),
        "paths": driver_paths(),
    }


def driver_lines(report: dict[str, Any]) -> list[str]:
    """The text form: one line per check, one per driver path."""
    node, npm, chromedriver = report["node"], report["npm_install"], report["chromedriver"]
    lines = [
        f"node: {node.get('version') or 'missing'} {'ok' if node['ok'] else node['detail']}",
        f"npm install: {'ok' if npm['ok'] else npm['detail']}"
        + (f" ({npm['locked']} locked packages)" if npm.get("locked") else ""),
        f"chromedriver: {chromedriver.get('version') or 'missing'} "
        f"{'matches chromium' if chromedriver['ok'] else chromedriver['detail']}",
    ]
    for client in report["python_clients"]:
        state = "ok" if client["ok"] else f"import {client.get('import')}"
        lines.append(
            f"python {client['package']}: {client.get('version')} (pinned {client['pinned']}) {state}"
        )
    for row in report["paths"]:
        state = f"found {row['version']}" if row["found"] else f"missing ({row['reason']})"
        lines.append(f"driver {row['driver']:<24} {state}: {row['detail']}")
    return lines
