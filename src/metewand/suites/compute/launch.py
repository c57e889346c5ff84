"""Turn manifest launch definitions into launch specs: build steps, argv, worker identities."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from dataclasses import dataclass, field

from metewand import canonical
from metewand.suites.compute.manifest import Launch, Manifest
from metewand.suites.compute.plan import Plan
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


def _command_found(command: str, root: str) -> bool:
    """A bare name is looked up on PATH; a path is taken against the manifest's directory."""
    if "/" not in command:
        return shutil.which(command) is not None
    path = os.path.join(root, command)
    return os.path.isfile(path) and os.access(path, os.X_OK)


def missing_commands(manifest: Manifest, plan: Plan) -> list[str]:
    """Programs and build commands the planned attempts would start but that do not exist.

    Checked before a run is created, so a typo fails the command (exit 3) instead of failing
    every attempt. ``{build}/…`` programs are made by a build step and cannot be checked here.
    """
    launches: dict[str, Launch] = {}
    for attempt in plan.attempts:
        impl = manifest.implementations[attempt.implementation]
        launches[f"implementations.{impl.name}"] = impl.launch
        problem = manifest.problems[attempt.problem]
        launches[f"problems.{problem.name}.evaluator"] = problem.evaluator
        dataset = attempt.dataset.definition
        if dataset.materializer is not None:
            launches[f"datasets.{dataset.name}.materializer"] = dataset.materializer
    missing = []
    where_file = os.path.basename(manifest.path)
    for where, launch in sorted(launches.items()):
        checks = [("program", launch.argv[0])] if launch.argv else []
        checks += [("build", launch.build[0])] if launch.build else []
        for key, command in checks:
            if command.startswith("{build}") or _command_found(command, manifest.root):
                continue
            place = "on PATH" if "/" not in command else f"as an executable file in {manifest.root}"
            missing.append(f"{where_file}: {where}.{key}: command {command!r} not found {place}")
    return missing
