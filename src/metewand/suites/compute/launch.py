"""Turn manifest launch definitions into launch specs: build steps, argv, worker identities."""

from __future__ import annotations

import os
import subprocess
import threading
from dataclasses import dataclass, field

from metewand import canonical
from metewand.suites.compute.manifest import Launch
from metewand.suites.compute.session import LaunchSpec

BUILD_TIMEOUT_S = 300.0


@dataclass
class BuildResult:
    build_dir: str
    error: str | None = None


@dataclass
class Builder:
    """Runs each launch's build command once per run (cwd = the manifest's directory)."""

    root: str
    build_root: str
    _done: dict[str, BuildResult] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def build(self, name: str, launch: Launch) -> BuildResult:
        with self._lock:
            if name not in self._done:
                self._done[name] = self._run(name, launch)
            return self._done[name]

    def _run(self, name: str, launch: Launch) -> BuildResult:
        build_dir = os.path.join(self.build_root, name)
        os.makedirs(build_dir, exist_ok=True)
        if not launch.build:
            return BuildResult(build_dir)
        argv = [a.replace("{build}", build_dir) for a in launch.build]
        try:
            proc = subprocess.run(
                argv, cwd=self.root, capture_output=True, timeout=BUILD_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return BuildResult(build_dir, f"build of {name} failed: {exc}")
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace")[-2000:]
            return BuildResult(build_dir, f"build of {name} exited {proc.returncode}: {tail}")
        return BuildResult(build_dir)


def worker_id(role: str, name: str, launch: Launch) -> str:
    return canonical.identity(
        "resolved-worker",
        {"version": 1, "role": role, "name": name, "launch": launch.identity_record()},
    )


def launch_spec(
    role: str, name: str, launch: Launch, cwd: str, build_dir: str, capabilities: tuple = ()
) -> LaunchSpec:
    argv = [a.replace("{build}", build_dir) for a in launch.argv]
    return LaunchSpec(
        argv=argv,
        role=role,
        worker_id=worker_id(role, name, launch),
        cwd=cwd,
        env=dict(launch.env),
        capabilities=capabilities,
    )
