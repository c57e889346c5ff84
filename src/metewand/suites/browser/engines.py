"""Registry of browser engines as data: where the binary comes from, argv, env, CDP discovery.

Adding an engine is adding an ``EngineSpec`` to ``ENGINES``; nothing else branches on names.

Binary resolution order for ``resolve(name, configured_path)``: the configured path (CLI or
config file), then the engine's environment variable (``METEWAND_<NAME>_BIN``), then the spec's
``sources`` in order. A configured path that does not exist is reported missing; it never falls
back silently to another binary.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from metewand.errors import InvalidInput

LOOPBACK: Final = "127.0.0.1"
MISSING_REASON: Final = "engine_binary_missing"

# Every hostname except loopback fails to resolve inside Chrome, so a task can never reach the
# network by accident. localhost stays usable (Chrome also hard-wires it to loopback).
CHROME_HOST_RULES: Final = "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1 , EXCLUDE localhost"

# Proxies from the caller's environment would route fixture traffic off loopback.
PROXY_VARIABLES: Final = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
)


@dataclass(frozen=True)
class FixedPath:
    """A well-known install location."""

    path: str

    def find(self) -> Path | None:
        candidate = Path(self.path)
        return candidate if _is_executable_file(candidate) else None

    def describe(self) -> str:
        return f"path {self.path}"


@dataclass(frozen=True)
class PackageBinary:
    """A binary shipped inside an installed Python package (the real executable, not the
    console-script shim in bin/ that re-executes it through Python)."""

    package: str
    relative: str

    def find(self) -> Path | None:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            return None
        for folder in spec.submodule_search_locations:
            candidate = Path(folder) / self.relative
            if _is_executable_file(candidate):
                return candidate
        return None

    def describe(self) -> str:
        return f"python package {self.package}/{self.relative}"


BinarySource = FixedPath | PackageBinary


@dataclass(frozen=True)
class EngineSpec:
    """How to find, start and talk to one engine.

    ``argv`` is a template after the binary: ``{host}``, ``{port}``, ``{user_data_dir}`` and
    ``{start_url}`` (the first page, ``about:blank`` for a run) are substituted at launch. ``discovery`` names how the CDP endpoint is found (``json_version``:
    ``GET /json/version`` → ``webSocketDebuggerUrl``).
    """

    name: str
    sources: tuple[BinarySource, ...]
    argv: tuple[str, ...]
    version_argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    env_remove: tuple[str, ...] = PROXY_VARIABLES
    uses_user_data_dir: bool = False
    discovery: str = "json_version"
    ready_timeout_s: float = 20.0
    notes: str = ""
    # each CDP connection starts with no cookies or storage and takes its own with it when it
    # closes (Lightpanda): nothing for the harness to clear after an attempt (state_clear)
    state_per_connection: bool = False
    # serves many CDP clients at once (Chrome): the harness may keep a connection of its own open
    # beside an adapter's (state_clear.KeptClears)
    serves_many_clients: bool = False

    @property
    def env_var(self) -> str:
        return f"METEWAND_{self.name.upper()}_BIN"


# Chromium (156 here) builds its omnibox popup as a WebUI page: every window -- the first one,
# and one per browser context a driver opens -- gets an invisible chrome://omnibox-popup renderer
# that burns about a second of CPU, which no headless user ever sees. Charged to the engine under
# test it is a cost of the browser's UI, not of the page; with these two features off the omnibox
# keeps its non-WebUI popup, which is built only when someone types into it.
CHROME_DISABLED_FEATURES: Final = ("WebUIOmniboxPopup", "WebUIOmniboxAimPopup")

CHROME_ARGV: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-quic",
    f"--disable-features={','.join(CHROME_DISABLED_FEATURES)}",
    "--no-proxy-server",
    "--password-store=basic",
    "--use-mock-keychain",
    f"--host-resolver-rules={CHROME_HOST_RULES}",
    "--user-data-dir={user_data_dir}",
    "--remote-debugging-address={host}",
    "--remote-debugging-port={port}",
    "{start_url}",
)

SERVE_ARGV: Final = ("serve", "--host", "{host}", "--port", "{port}")

ENGINES: Final[dict[str, EngineSpec]] = {
    spec.name: spec
    for spec in (
        EngineSpec(
            name="chrome",
            # Debian's /usr/bin/chromium is a shell launcher that sources /etc/chromium.d
            # (extra flags, extension loading, API keys) and then execs the ELF below; launching
            # the ELF directly keeps the command line exactly what this registry says.
            sources=(
                FixedPath("/usr/lib/chromium/chromium"),
                FixedPath("/usr/bin/chromium"),
                FixedPath("/usr/bin/chromium-browser"),
                FixedPath("/usr/bin/google-chrome"),
            ),
            argv=CHROME_ARGV,
            version_argv=("--version",),
            # No session bus: Chrome otherwise waits on D-Bus timeouts in containers.
            env={"DBUS_SESSION_BUS_ADDRESS": "unix:path=/dev/null"},
            uses_user_data_dir=True,
            notes="fresh --user-data-dir and TMPDIR per launch, removed at teardown",
            serves_many_clients=True,
        ),
        EngineSpec(
            name="lightpanda",
            sources=(PackageBinary("lightpanda", "lightpanda"),),
            argv=SERVE_ARGV,
            version_argv=("version",),
            env={"LIGHTPANDA_DISABLE_TELEMETRY": "true"},
            notes="browser state is per CDP connection: one connection per attempt",
            state_per_connection=True,
        ),
        EngineSpec(name="moli", sources=(), argv=SERVE_ARGV, version_argv=("--version",)),
        EngineSpec(
            name="obscura",
            sources=(),
            argv=(*SERVE_ARGV, "--allow-private-network"),
            version_argv=("--version",),
        ),
    )
}


class UnknownEngine(InvalidInput, ValueError):
    """An engine name that is not in the registry."""

    def __init__(self, name: str) -> None:
        known = ", ".join(sorted(ENGINES))
        super().__init__(f"unknown engine {name!r}; known engines: {known}")
        self.name = name


@dataclass(frozen=True)
class ResolvedEngine:
    """An engine whose binary was found. ``found_by`` says how (for provenance)."""

    spec: EngineSpec
    binary: Path
    found_by: str

    @property
    def name(self) -> str:
        return self.spec.name

    def argv(
        self,
        port: int,
        user_data_dir: Path | None = None,
        host: str = LOOPBACK,
        start_url: str = "about:blank",
    ) -> list[str]:
        values = {
            "host": host,
            "port": str(port),
            "user_data_dir": str(user_data_dir or ""),
            "start_url": start_url,
        }
        return [str(self.binary), *(part.format(**values) for part in self.spec.argv)]

    def environment(
        self, base: Mapping[str, str] | None = None, tmp_dir: Path | None = None
    ) -> dict[str, str]:
        """The engine's environment; ``tmp_dir`` becomes its ``TMPDIR`` (a private dir the
        launcher removes, since a signalled engine never cleans its own temp files)."""
        env = dict(os.environ if base is None else base)
        for key in self.spec.env_remove:
            env.pop(key, None)
        env.update(self.spec.env)
        if tmp_dir is not None:
            env["TMPDIR"] = str(tmp_dir)
        return env


@dataclass(frozen=True)
class Missing:
    """An engine that cannot run here; its rows are ``unsupported`` with this reason."""

    name: str
    reason: str
    detail: str


def spec_for(name: str) -> EngineSpec:
    try:
        return ENGINES[name]
    except KeyError:
        raise UnknownEngine(name) from None


def resolve(
    name: str,
    configured_path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> ResolvedEngine | Missing:
    """Find the engine's binary (see the module docstring for the order)."""
    spec = spec_for(name)
    env = os.environ if environ is None else environ
    explicit = configured_path if configured_path is not None else env.get(spec.env_var)
    if explicit:
        how = "configured" if configured_path is not None else f"env {spec.env_var}"
        candidate = Path(explicit)
        if _is_executable_file(candidate):
            return ResolvedEngine(spec, candidate.absolute(), f"{how}: {candidate}")
        return Missing(name, MISSING_REASON, f"{how} path {candidate} is not an executable file")
    for source in spec.sources:
        found = source.find()
        if found is not None:
            return ResolvedEngine(spec, found.absolute(), source.describe())
    return Missing(name, MISSING_REASON, _missing_detail(spec))


def _missing_detail(spec: EngineSpec) -> str:
    tried = [source.describe() for source in spec.sources]
    tried_text = "; tried " + ", ".join(tried) if tried else ""
    return f"no binary configured (set {spec.env_var} or pass a path){tried_text}"


def _is_executable_file(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)
