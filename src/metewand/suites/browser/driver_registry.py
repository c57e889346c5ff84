"""Registry of driver paths as data: which client library sits between an agent and the engine.

Each ``DriverPath`` names the corpus subset it runs, the task ``driver.kind``, the language, the
client library and its pinned version (the peer's ``harness_pins.json`` pin; a test keeps them
equal), the route the peer's binding catalog gives it, and how its adapter is found.

``resolve_driver(key, configured)`` returns a ``FoundDriver`` (an ``AdapterCommand`` ready to run)
or a ``DriverMissing`` with reason ``driver_unavailable`` and what exactly is missing: the
toolchain, the installed client library, a bridge binary, or (for the Go, Rust and Ruby paths)
the adapter itself. Like Moli and Obscura for engines, a path whose adapter metewand does not ship
is accepted by configured path (``--driver-adapter KEY=PATH`` or ``METEWAND_<KEY>_ADAPTER``): any
executable speaking ``abb_scenario_adapter/1`` is run as that path's adapter, per attempt; one
that also has a served mode (one payload per stdin line, one result line each, as metewand's
adapters' ``--serve``) says so with ``METEWAND_<KEY>_ADAPTER_SERVE`` holding the arguments that
select it (may be empty), and then runs long-lived like a shipped adapter.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from metewand.suites.browser.adapters import AdapterCommand

UNAVAILABLE: Final = "driver_unavailable"
REPO_ROOT: Final = Path(__file__).resolve().parents[4]
NODE_DIR_VARIABLE: Final = (
    "METEWAND_NODE_DRIVERS"  # a drivers/node elsewhere (non-editable install)
)


def node_dir() -> Path:
    return Path(os.environ.get(NODE_DIR_VARIABLE) or REPO_ROOT / "drivers" / "node")


def python_adapter_dir() -> Path:
    return REPO_ROOT / "drivers" / "python"


@dataclass(frozen=True)
class NodePackage:
    """A client library installed by ``npm ci`` into drivers/node."""

    name: str

    def installed_version(self) -> str | None:
        manifest = node_dir() / "node_modules" / self.name / "package.json"
        try:
            return str(json.loads(manifest.read_text())["version"])
        except (OSError, ValueError, KeyError):
            return None

    def how_to_install(self) -> str:
        return f"make install (npm ci in {node_dir()})"


@dataclass(frozen=True)
class PythonPackage:
    """A client library from the ``drivers`` extra of metewand's own environment."""

    name: str

    def installed_version(self) -> str | None:
        try:
            return importlib.metadata.version(self.name)
        except importlib.metadata.PackageNotFoundError:
            return None

    def how_to_install(self) -> str:
        return "pip install -e '.[drivers]' (make install)"


@dataclass(frozen=True)
class Foreign:
    """A library of a language metewand ships no adapter for (Go, Rust, Ruby)."""

    name: str
    toolchain: str  # the command that would build or run an adapter

    def installed_version(self) -> str | None:
        return None

    def how_to_install(self) -> str:
        return f"install {self.toolchain} and configure an adapter for this path"


Library = NodePackage | PythonPackage | Foreign


@dataclass(frozen=True)
class DriverPath:
    key: str  # the binding catalog's driver_id
    task_kind: str  # ``driver.kind`` of its corpus tasks
    subset_dirs: tuple[str, ...]  # corpus directories under tasks/ holding its tasks
    language: str
    library: Library
    version: str  # pinned client version (equal to the peer's harness pin)
    pin_key: str  # its key in harness_pins.json
    route_id: str  # the catalog route it takes on every engine
    adapter: str | None  # adapter file under drivers/<language>/ (None: none shipped)
    bridges: tuple[str, ...] = ()  # executables the route needs on PATH
    native: str = ""  # a native executable inside the installed library (path under node_modules)
    notes: str = ""
    extra_argv: tuple[str, ...] = field(default_factory=tuple)
    binding_key: str = ""  # the catalog driver_id it binds as, when not its own key

    @property
    def catalog_key(self) -> str:
        return self.binding_key or self.key

    @property
    def env_variable(self) -> str:
        return f"METEWAND_{self.key.upper()}_ADAPTER"

    @property
    def serve_env_variable(self) -> str:
        """Set for a configured adapter with a served mode: the arguments selecting it."""
        return f"{self.env_variable}_SERVE"


def _node(
    key: str,
    kind: str,
    dirs: tuple[str, ...],
    package: str,
    version: str,
    *,
    route_id: str,
    adapter: str | None,
    pin_key: str = "",
    notes: str = "",
    native: str = "",
) -> DriverPath:
    library = NodePackage(package)
    pin = pin_key or package
    return DriverPath(
        key,
        kind,
        dirs,
        "node",
        library,
        version,
        pin,
        route_id,
        adapter,
        notes=notes,
        native=native,
    )


DRIVER_PATHS: Final[dict[str, DriverPath]] = {
    p.key: p
    for p in (
        _node(
            "playwright",
            "framework_playwright",
            ("L1/playwright", "L2/playwright"),
            "playwright-core",
            "1.61.1",
            route_id="playwright_cdp",
            adapter="adapters/playwright.js",
        ),
        _node(
            "puppeteer",
            "framework_puppeteer",
            ("L1/puppeteer", "L2/puppeteer"),
            "puppeteer-core",
            "25.3.0",
            route_id="puppeteer_cdp",
            adapter="adapters/puppeteer.js",
        ),
        _node(
            "chrome_remote_interface",
            "thin_chrome_remote_interface",
            ("L1/chrome_remote_interface",),
            "chrome-remote-interface",
            "0.34.0",
            route_id="chrome_remote_interface_cdp",
            adapter="adapters/cri.js",
        ),
        _node(
            "chrome_devtools_mcp",
            "mcp_chrome_devtools",
            ("L1/chrome_devtools_mcp",),
            "chrome-devtools-mcp",
            "1.6.0",
            route_id="chrome_devtools_mcp_cdp",
            adapter="adapters/cdt_mcp.js",
            notes="an MCP client; the server runs as the adapter's child over stdio",
        ),
        _node(
            "agent_browser",
            "tool_agent_browser",
            ("L1/agent_browser_scenarios",),
            "agent-browser",
            "0.31.1",
            route_id="agent_browser_cdp",
            adapter="adapters/agent_browser.js",
            native="agent-browser/bin/agent-browser-linux-{arch}",
            notes="the CLI is a native binary inside the npm package (declares node >= 24; "
            "the binary does not use Node)",
        ),
        _node(
            "stagehand",
            "framework_stagehand",
            ("L1/stagehand",),
            "@browserbasehq/stagehand",
            "3.7.0",
            pin_key="stagehand",
            route_id="stagehand_cdp",
            adapter="adapters/stagehand.js",
            notes="deterministic API only (LOCAL env, cdpUrl): no model client",
        ),
        DriverPath(
            "selenium",
            "webdriver_selenium",
            ("L1/selenium",),
            "python",
            PythonPackage("selenium"),
            "4.46.0",
            "selenium",
            "chromedriver_cdp",
            "selenium_adapter.py",
            bridges=("chromedriver",),
            notes="Debian chromium-driver attached through debuggerAddress",
        ),
        DriverPath(
            "pydoll",
            "thin_pydoll",
            ("L1/pydoll",),
            "python",
            PythonPackage("pydoll-python"),
            "2.23.1",
            "pydoll-python",
            "pydoll_cdp",
            "pydoll_adapter.py",
        ),
        DriverPath(
            "cdp_use",
            "thin_cdp_use",
            ("L1/cdp_use",),
            "python",
            PythonPackage("cdp-use"),
            "1.4.5",
            "cdp-use",
            "cdp_use_cdp",
            "cdp_use_adapter.py",
        ),
        DriverPath(
            "chromedp",
            "thin_chromedp",
            ("L1/chromedp",),
            "go",
            Foreign("github.com/chromedp/chromedp", "go"),
            "v0.16.0",
            "chromedp",
            "chromedp_cdp",
            None,
        ),
        DriverPath(
            "rod",
            "thin_rod",
            ("L1/rod",),
            "go",
            Foreign("github.com/go-rod/rod", "go"),
            "v0.116.2",
            "rod",
            "rod_cdp",
            None,
        ),
        DriverPath(
            "chromiumoxide",
            "thin_chromiumoxide",
            ("L1/chromiumoxide",),
            "rust",
            Foreign("chromiumoxide", "cargo"),
            "0.9.1",
            "chromiumoxide",
            "chromiumoxide_cdp",
            None,
        ),
        DriverPath(
            "ferrum",
            "thin_ferrum",
            ("L1/ferrum",),
            "ruby",
            Foreign("ferrum", "ruby"),
            "0.17.2",
            "ferrum",
            "ferrum_cdp",
            None,
        ),
    )
}

# Required peers of a locked client library, pinned beside it: drivers/node/.npmrc sets
# legacy-peer-deps (Stagehand's optional puppeteer-core ^24 peer conflicts with the locked 25.3.0,
# and it is unused), under which npm installs no peer by itself.
NODE_PEER_PINS: Final = {"zod": "3.25.76"}  # Stagehand's zod ^3.25.76 || ^4.2.0
# Libraries the adapters themselves require, pinned beside the clients: ws for the served
# chrome-devtools-mcp adapter's CDP relay (drivers/node/adapters/cdp_relay.js), the version the
# lock already held for chrome-remote-interface.
NODE_ADAPTER_PINS: Final = {"ws": "7.5.14"}

BY_TASK_KIND: Final = {p.task_kind: p for p in DRIVER_PATHS.values()}

# node_cdp_probe scripts run through an adapter of ours, keyed by script file name (like the L2
# probes): the peer's agent-browser tool probe is a harness of its own, not a catalog driver, so
# its key is the probe path's name and it binds as the agent-browser driver.
PROBE_TASK_KIND: Final = "node_cdp_probe"
PROBE_PATHS: Final[dict[str, DriverPath]] = {
    "l1_ab_probe.js": DriverPath(
        "node_cdp_probe:l1_ab_probe.js",
        PROBE_TASK_KIND,
        ("L1/agent_browser",),
        "node",
        NodePackage("agent-browser"),
        "0.31.1",
        "agent-browser",
        "agent_browser_cdp",
        "adapters/agent_browser_tool.js",
        native="agent-browser/bin/agent-browser-linux-{arch}",
        notes="the agent-browser CLI per AB_STEPS command, graded by AB_CHECKS",
        binding_key="agent_browser",
    ),
}
ALL_PATHS: Final = DRIVER_PATHS | {p.key: p for p in PROBE_PATHS.values()}


def path_for_driver(driver: Mapping[str, Any]) -> DriverPath | None:
    """The adapter path a task's driver block runs through, or None (raw CDP, native probes)."""
    kind = str(driver.get("kind"))
    if kind == PROBE_TASK_KIND:
        return PROBE_PATHS.get(str(driver.get("script", "")).rsplit("/", 1)[-1])
    return BY_TASK_KIND.get(kind)


@dataclass(frozen=True)
class FoundDriver:
    path: DriverPath
    command: AdapterCommand
    version: str  # the version actually installed (or "configured" for a foreign adapter)
    source: str  # where the adapter came from


@dataclass(frozen=True)
class DriverMissing:
    path: DriverPath
    reason: str
    detail: str


def _runtime_argv(path: DriverPath) -> list[str] | None:
    """The interpreter for a shipped adapter, or None when it is not installed."""
    if path.language == "node":
        node = shutil.which("node")
        return [node] if node else None
    if path.language == "python":
        return [sys.executable]
    return None


def _adapter_file(path: DriverPath) -> Path | None:
    if path.adapter is None:
        return None
    base = node_dir() if path.language == "node" else python_adapter_dir()
    return base / path.adapter


def _configured(path: DriverPath, configured: str | None) -> FoundDriver | DriverMissing | None:
    chosen = configured or os.environ.get(path.env_variable)
    if not chosen:
        return None
    candidate = Path(chosen)
    if not (candidate.is_file() and os.access(candidate, os.X_OK)):
        return DriverMissing(
            path, UNAVAILABLE, f"configured adapter {chosen} is not an executable file"
        )
    argv = (str(candidate), *path.extra_argv)
    serve = os.environ.get(path.serve_env_variable)
    try:
        serve_argv = (*argv, *shlex.split(serve)) if serve is not None else ()
    except ValueError as exc:  # unbalanced quotes
        return DriverMissing(path, UNAVAILABLE, f"{path.serve_env_variable}={serve!r}: {exc}")
    command = AdapterCommand(argv, serve_argv=serve_argv)
    # the row names the adapter, not the host's path to it
    return FoundDriver(path, command, "configured", f"configured {candidate.name}")


def resolve_driver(key: str, configured: str | None = None) -> FoundDriver | DriverMissing:
    """Find the adapter for driver path ``key``; a configured adapter wins, and a configured
    path that is not there is missing (never a silent fall back to the shipped adapter)."""
    path = ALL_PATHS[key]
    chosen = _configured(path, configured)
    if chosen is not None:
        return chosen
    if isinstance(path.library, Foreign):
        toolchain = "found" if shutil.which(path.library.toolchain) else "not installed"
        return DriverMissing(
            path,
            UNAVAILABLE,
            f"{path.language} {path.library.name} {path.version}: no metewand adapter "
            f"({path.library.toolchain} toolchain {toolchain}); configure one with {path.env_variable}",
        )
    runtime = _runtime_argv(path)
    if runtime is None:
        return DriverMissing(path, UNAVAILABLE, f"{path.language} runtime not found on PATH")
    adapter = _adapter_file(path)
    if adapter is None or not adapter.is_file():
        return DriverMissing(
            path, UNAVAILABLE, f"{path.library.name} {path.version}: {path.notes or 'no adapter'}"
        )
    installed = path.library.installed_version()
    if installed is None:
        return DriverMissing(
            path, UNAVAILABLE, f"{path.library.name} not installed; {path.library.how_to_install()}"
        )
    if installed != path.version:
        return DriverMissing(
            path, UNAVAILABLE, f"{path.library.name} {installed} installed, {path.version} pinned"
        )
    if path.native and not _native_ready(path.native):
        return DriverMissing(path, UNAVAILABLE, _native_problem(path.native))
    for bridge in path.bridges:
        if shutil.which(bridge) is None:
            return DriverMissing(path, UNAVAILABLE, f"bridge {bridge} not found on PATH")
    argv = (*runtime, str(adapter), *path.extra_argv)
    command = AdapterCommand(argv, serve_argv=(*argv, "--serve"))  # shipped adapters serve
    return FoundDriver(path, command, installed, f"shipped {_repo_relative(adapter)}")


def _repo_relative(file: Path) -> str:
    """A shipped adapter as rows and listings name it: relative to the repository."""
    try:
        return str(file.resolve().relative_to(REPO_ROOT))
    except ValueError:  # drivers/node elsewhere (METEWAND_NODE_DRIVERS)
        return f"{file.parent.name}/{file.name}"


def _native_binary(relative: str) -> Path:
    import platform

    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return node_dir() / "node_modules" / relative.format(arch=arch)


def _native_ready(relative: str) -> bool:
    binary = _native_binary(relative)
    return binary.is_file() and os.access(binary, os.X_OK)


def _native_problem(relative: str) -> str:
    binary = _native_binary(relative)
    if not binary.is_file():
        return f"native binary {binary} not in the installed package (no build for this platform)"
    # npm ci --ignore-scripts skips the package's postinstall, whose only local effect is chmod +x.
    return f"native binary {binary} is not executable; make install sets its mode"


def load_binding(catalog_file: Path, engine: str, key: str) -> dict[str, object] | None:
    """The catalog's binding for (engine, driver) with its route expanded, as the payload's
    ``binding`` field carries it; None when the catalog binds no such pair."""
    catalog = json.loads(catalog_file.read_text())
    routes = {r["route_id"]: r for r in catalog.get("routes", [])}
    for binding in catalog.get("bindings", []):
        if binding.get("browser_id") == engine and binding.get("driver_id") == key:
            route = routes.get(binding.get("route_ref"))
            return {
                "binding_id": binding["binding_id"],
                "browser_id": engine,
                "driver_id": key,
                "route": route,
                "fallback_allowed": bool(binding.get("fallback_allowed", False)),
            }
    return None
