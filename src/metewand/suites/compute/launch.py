"""Turn manifest launch definitions into launch specs: build steps, argv, worker identities."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from metewand.measure.process import Process
from metewand.suites.compute.manifest import Launch, Manifest
from metewand.suites.compute.plan import Plan
from metewand.suites.compute.session import LaunchSpec

BUILD_TIMEOUT_S = 300.0


@dataclass
class BuildResult:
    build_dir: str
    error: str | None = None


class Contains(Protocol):
    """What the builder needs of ``workers.Containment`` (a group per process tree)."""

    def open(self, label: str, measuring: bool = True) -> tuple[Any, ...]: ...


@dataclass
class Builder:
    """Runs each launch's build command once per run (cwd = the manifest's directory).

    The command runs in an accounting group of its own; the build is over when the command
    itself exits (not when its output pipes close), and whatever it left running (``sleep &``)
    is killed with the group.
    """

    root: str
    build_root: str
    containment: Contains | None = None
    on_start: Callable[[int], None] | None = None  # told each build command's pid
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
        accounting = None
        if self.containment is not None:
            accounting = self.containment.open(f"build-{name}"[:24], measuring=False)[0]
        # Output goes to a file: a pipe would stay open as long as anything the build left
        # behind holds it, and reading it to the end would wait for that too.
        with tempfile.TemporaryFile(dir=self.build_root) as log:
            try:
                status = self._spawn(argv, log, accounting)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return BuildResult(build_dir, f"build of {name} failed: {exc}")
            finally:
                _release(accounting)
            if status != 0:
                log.seek(0)
                tail = log.read().decode("utf-8", "replace")[-2000:]
                return BuildResult(build_dir, f"build of {name} exited {status}: {tail}")
        return BuildResult(build_dir)

    def _spawn(self, argv: list[str], log: Any, accounting: Any) -> int:
        join = accounting.preexec_join() if accounting is not None else None
        proc = Process.start(argv, cwd=self.root, stdout=log, stderr=log, join=join)
        if accounting is not None:
            accounting.attach(proc.pid)
        if self.on_start is not None:
            self.on_start(proc.pid)
        try:
            exited = proc.wait_exited(BUILD_TIMEOUT_S)
        finally:
            status = proc.kill()  # the group's kill covers what it left running (``sleep &``)
            proc.close()
        if not exited or status is None:
            raise subprocess.TimeoutExpired(argv, BUILD_TIMEOUT_S)
        return status


def _release(accounting: Any) -> None:
    """Kill what the build left in its group, then remove the group."""
    if accounting is not None:
        with contextlib.suppress(Exception):
            accounting.close()


def launch_spec(
    role: str,
    launch: Launch,
    cwd: str,
    build_dir: str,
    capabilities: tuple = (),
    definitions: Any = None,
) -> LaunchSpec:
    """How to start one worker. ``definitions`` (``definitions.Definitions``) gives the worker its
    resolved-worker id (what the hello carries); without it (tests) the id covers the argv."""
    from metewand.suites.compute import resolved
    from metewand.suites.compute.session import worker_env

    argv = [a.replace("{build}", build_dir) for a in launch.argv]
    if definitions is not None:
        fields = resolved.worker(
            definitions.source_bundle_of(launch),
            definitions.environment_id(launch),
            argv,
            worker_env(dict(launch.env)),
        )
    else:
        fields = resolved.worker(None, "", argv, dict(launch.env))
    return LaunchSpec(
        argv=argv,
        role=role,
        worker_id=resolved.worker_id(fields),
        cwd=cwd,
        env=dict(launch.env),
        capabilities=capabilities,
        transport=launch.protocol_transport or "pipes",
        resolved=fields,
    )


def _command_found(command: str, root: str) -> bool:
    """A bare name is looked up on PATH; a path is taken against the manifest's directory."""
    if "/" not in command:
        return shutil.which(command) is not None
    path = os.path.join(root, command)
    return os.path.isfile(path) and os.access(path, os.X_OK)


def missing_commands(manifest: Manifest, plan: Plan) -> list[str]:
    """Programs and build commands the planned attempts would start but that do not exist,
    and what else of the plan this host cannot run (``runnable.refusals``).

    Checked before a run is created, so a typo fails the command (exit 3) instead of failing
    every attempt. ``{build}/…`` programs are made by a build step and cannot be checked here.
    """
    from metewand.suites.compute.runnable import planned_launches, refusals

    missing = refusals(manifest, plan)
    refused = {line.split(": ")[1].rsplit(".", 1)[0] for line in missing}
    where_file = os.path.basename(manifest.path)
    for where, launch in sorted(planned_launches(manifest, plan).items()):
        if where in refused:
            continue
        key = "program" if launch.runner == "command" or not launch.source_patterns else "runner"
        checks = [(key, launch.argv[0])] if launch.argv else []
        checks += [("build", launch.build[0])] if launch.build else []
        for key, command in checks:
            if command.startswith("{build}") or _command_found(command, manifest.root):
                continue
            place = "on PATH" if "/" not in command else f"as an executable file in {manifest.root}"
            missing.append(f"{where_file}: {where}.{key}: command {command!r} not found {place}")
    return missing
