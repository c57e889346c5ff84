"""The peer's harness (Lexbench-Headless-Browser's ``runner.run``) made runnable on this host, for
benchmarks that run it beside metewand (harness_vs_peer.py).

``prepare(peer)`` readies a scratch checkout you cloned (outside any repository) the way its
docs/RUNNING.md asks, with this host's parts: the engines metewand's registry finds linked at the
peer's conventional paths (Debian's Chromium ELF, the Lightpanda wheel's binary) and named with
their real version and sha256 in ``build_artifacts/active-set.json`` (the peer's own override
file; its pins name builds this host does not have), the machine's chromedriver copied under
``build_artifacts/chromedriver/bin`` with its digest (the peer refuses a bridge outside its
checkout), and ``node_modules`` linked to ours (the same locked client versions). Its Python
adapters run on ``python3`` from PATH, so ``command`` puts this environment's interpreter (with
the pinned selenium, pydoll and cdp-use) first on PATH. Nothing of the peer is changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from metewand.suites.browser.driver_registry import node_dir
from metewand.suites.browser.engines import Missing, resolve

ENGINE_PATHS = {  # the peer's conventional binary paths (its docs/RUNNING.md)
    "chrome": "build_artifacts/chrome-for-testing/bin/chrome",
    "lightpanda": "build_artifacts/lightpanda/zig-out/bin/lightpanda",
}
BRIDGE = "build_artifacts/chromedriver/bin/chromedriver"


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _version(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def _engine(peer: Path, name: str) -> dict[str, str]:
    found = resolve(name)
    if isinstance(found, Missing):
        raise SystemExit(f"{name}: not installed here ({found.detail})")
    link = peer / ENGINE_PATHS[name]
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(found.binary)
    version_argv = [str(found.binary), *found.spec.version_argv]
    words = _version(version_argv).split()
    version = next((w for w in words if w[:1].isdigit()), " ".join(words))
    sha = _sha256(found.binary)
    return {"version": version, "sha256": sha, "sha256_12": sha[:12]}


def _bridge(peer: Path) -> dict[str, str] | None:
    machine = shutil.which("chromedriver")
    if machine is None:
        return None
    copy = peer / BRIDGE
    copy.parent.mkdir(parents=True, exist_ok=True)
    if not copy.exists():
        shutil.copy2(machine, copy)
    version = _version([str(copy), "--version"]).split()[1]
    return {"version": version, "binary_path": BRIDGE, "sha256_12": _sha256(copy)[:12]}


def prepare(peer: Path, engines: list[str]) -> None:
    """Ready a scratch checkout of the peer (idempotent)."""
    if not (peer / "runner" / "run.py").is_file():
        raise SystemExit(f"{peer}: not a checkout of the peer (no runner/run.py)")
    modules = peer / "node_modules"
    if not modules.exists():
        modules.symlink_to(node_dir() / "node_modules")
    active: dict[str, object] = {"engines": {name: _engine(peer, name) for name in engines}}
    bridge = _bridge(peer)
    if bridge is not None:
        active["harness_drivers"] = {"chromedriver": bridge}
    (peer / "build_artifacts" / "active-set.json").write_text(json.dumps(active, indent=1))


def environment() -> dict[str, str]:
    """The peer's runner spawns ``python3`` and ``node`` from PATH: this interpreter's bin first
    (the pinned Python clients), and the agent-browser CLI where its adapter looks for it."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    native = node_dir() / "node_modules" / "agent-browser" / "bin" / "agent-browser-linux-x64"
    if native.exists():
        env["AB_BIN"] = str(native)
    env["LIGHTPANDA_DISABLE_TELEMETRY"] = "true"
    return env


def command(
    subset: str, tasks: list[str], engine: str, out: Path, run_id: str, seed: str
) -> list[str]:
    """The peer's run of ``tasks`` of ``subset`` on one engine, k=1, one job, its defaults
    otherwise (host telemetry on, resource profile off), without its report step."""
    argv = [sys.executable, "-m", "runner.run", "run", "--subset", subset]
    for task in tasks:
        argv += ["--task", task]
    argv += ["--engines", engine, "--k", "1", "--jobs", "1", "--seed", seed]
    argv += ["--score-mode", "independent", "--out", str(out), "--run-id", run_id]
    return [*argv, "--no-progress", "--no-report", "--quiet"]
