"""What a run ran on and with: host facts and the exact metewand source that ran it.

Every fact that cannot be read is recorded as ``{"unavailable": "<reason>"}`` rather than
omitted or guessed, so two manifests can be compared field by field.
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import metewand
from metewand.measure.cgroups import detect_layout

SOURCE_SCHEMA = "abb_runner_source/1"
# Files whose content changes what metewand does: code, schemas, bundled data.
SOURCE_SUFFIXES = (".py", ".json", ".toml", ".js", ".html", ".css", ".c", ".txt")
SKIPPED_PARTS = frozenset({"__pycache__"})


def unavailable(reason: str) -> dict[str, str]:
    return {"unavailable": reason}


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _cpu_model() -> str | dict[str, str]:
    text = _read("/proc/cpuinfo")
    if text is None:
        return unavailable("/proc/cpuinfo unreadable")
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Hardware", "Processor"):
            return value.strip()
    return unavailable("no model name in /proc/cpuinfo")


def _memory_bytes() -> int | dict[str, str]:
    text = _read("/proc/meminfo")
    for line in (text or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return unavailable("no MemTotal in /proc/meminfo")


def _governors() -> dict[str, Any]:
    """Governor per CPU, folded to one value when all agree."""
    root = Path("/sys/devices/system/cpu")
    found = {}
    for cpu_dir in sorted(root.glob("cpu[0-9]*")):
        value = _read(str(cpu_dir / "cpufreq" / "scaling_governor"))
        if value is not None:
            found[cpu_dir.name] = value
    if not found:
        return unavailable("no cpufreq scaling_governor exposed (virtual machine or no driver)")
    values = set(found.values())
    return {"all": values.pop()} if len(values) == 1 else {"per_cpu": found}


def _clock_source() -> str | dict[str, str]:
    path = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
    return _read(path) or unavailable(f"{path} unreadable")


def _cgroup_layout() -> dict[str, Any]:
    try:
        return detect_layout().to_json()
    except OSError as exc:
        return unavailable(f"cgroup layout unreadable: {exc}")


def host_facts() -> dict[str, Any]:
    uname = os.uname()
    return {
        "hostname": socket.gethostname(),
        "kernel": f"{uname.sysname} {uname.release}",
        "kernel_version": uname.version,
        "arch": uname.machine,
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count() or unavailable("os.cpu_count() unknown"),
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
        "memory_bytes": _memory_bytes(),
        "cpu_governor": _governors(),
        "clock_source": _clock_source(),
        "cgroup_layout": _cgroup_layout(),
        "libc": " ".join(platform.libc_ver()) or unavailable("libc unknown"),
    }


def package_root() -> Path:
    return Path(metewand.__file__).resolve().parent


def source_files(root: Path) -> list[Path]:
    """The effective source files under ``root``, sorted by relative POSIX path."""
    found = [
        path
        for path in root.rglob("*")
        if path.is_file()
        and path.suffix in SOURCE_SUFFIXES
        and not SKIPPED_PARTS.intersection(path.relative_to(root).parts)
    ]
    return sorted(found, key=lambda p: p.relative_to(root).as_posix().encode("utf-8"))


def source_tree(root: Path | None = None, list_files: bool = True) -> dict[str, Any]:
    """``abb_runner_source/1``: sha256 over sorted ``relpath NUL filesha256 LF`` lines.

    It hashes the files on disk, so uncommitted edits change it.
    """
    root = root or package_root()
    digest = hashlib.sha256()
    files = []
    for path in source_files(root):
        relative = path.relative_to(root).as_posix()
        file_sha = hashlib.sha256(path.read_bytes()).hexdigest()
        digest.update(f"{relative}\0{file_sha}\n".encode())
        files.append({"path": relative, "sha256": file_sha})
    out: dict[str, Any] = {
        "schema": SOURCE_SCHEMA,
        "tree_sha256": digest.hexdigest(),
        "file_count": len(files),
    }
    if list_files:
        out["files"] = files
    return out


def git_state(directory: Path | None = None) -> dict[str, Any]:
    """Commit and dirty flag of the checkout holding ``directory``, when there is one."""
    cwd = directory or package_root()
    try:
        commit = _git(cwd, "rev-parse", "HEAD")
        dirty = bool(_git(cwd, "status", "--porcelain", "--", "."))
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return unavailable("not a git checkout (or git missing)")
    return {"commit": commit, "dirty": dirty}


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=10
    )
    return done.stdout.strip()


def runner_facts(list_files: bool = False) -> dict[str, Any]:
    return {
        "metewand_version": metewand.__version__,
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "executable": sys.executable,
        "source": source_tree(list_files=list_files),
        "git": git_state(),
    }


def collect(list_files: bool = False) -> dict[str, Any]:
    """``{"host": ..., "runner": ...}`` for a run manifest's ``data``."""
    return {"host": host_facts(), "runner": runner_facts(list_files=list_files)}
