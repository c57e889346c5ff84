"""What a run ran on and with: host facts and the exact metewand source that ran it.

Every fact that cannot be read is recorded as ``{"unavailable": "<reason>"}`` rather than
omitted or guessed, so two manifests can be compared field by field.
"""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from metewand.measure.host_facts import machine_facts, unavailable
from metewand.measure.process import run_captured
from metewand.version import tool_version

SOURCE_SCHEMA = "abb_runner_source/1"
GIT_TIMEOUT_S = 10.0
# Files whose content changes what metewand does: code, schemas, bundled data.
SOURCE_SUFFIXES = (".py", ".json", ".toml", ".js", ".html", ".css", ".c", ".txt")
# data/examples holds the shipped examples (user code a compute run hashes on its own): a link in
# a checkout, which rglob does not follow, real files in a wheel; skipped so both hash alike.
SKIPPED_PARTS = frozenset({"__pycache__", "examples"})


# The manifest's host facts live in ``measure.host_facts``; this name is what run manifests and
# their tests have always called.
host_facts = machine_facts


def package_root() -> Path:
    return Path(__file__).resolve().parents[1]  # src/metewand (runtime/..)


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
    argv = ["git", *args]
    done = run_captured(argv, GIT_TIMEOUT_S, cwd=cwd)
    if done.timed_out:
        raise subprocess.TimeoutExpired(argv, GIT_TIMEOUT_S)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(int(done.returncode or 0), argv, done.stdout)
    return done.stdout.decode("utf-8", "replace").strip()


def benchmarked_tree(directory: Path | str) -> dict[str, Any]:
    """The git state of the tree a run benchmarks (the history's commit axis, issue #23).

    ``directory`` is what the run benchmarks: a compute manifest's directory, a browser run's
    task corpus. The built-in browser suite lives inside metewand itself, so for a directory
    inside the installed package the working directory the run started from stands in (a CI
    job runs metewand from the checkout it benchmarks). Outside a git checkout every field is
    ``unavailable`` with the reason, never a guess.
    """
    path = Path(directory).resolve()
    if path == package_root() or package_root() in path.parents:
        path = Path.cwd()
    try:
        top = _git(path, "rev-parse", "--show-toplevel")
        commit = _git(path, "rev-parse", "HEAD")
        branch = _git(path, "rev-parse", "--abbrev-ref", "HEAD")
        dirty = bool(_git(path, "status", "--porcelain", "--untracked-files=no"))
        commit_time = _git(path, "log", "-1", "--format=%cI", "HEAD")
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return {
            "path": str(path),
            **unavailable(f"{path} is not in a git checkout (or git missing)"),
        }
    return {
        "path": top,
        "commit": commit,
        "branch": None if branch == "HEAD" else branch,  # a detached HEAD names no branch
        "dirty": dirty,
        "commit_time": commit_time,
    }


def runner_facts(list_files: bool = False) -> dict[str, Any]:
    return {
        "metewand_version": tool_version(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "executable": sys.executable,
        "source": source_tree(list_files=list_files),
        "git": git_state(),
    }


def collect(list_files: bool = False) -> dict[str, Any]:
    """``{"host": ..., "runner": ...}`` for a run manifest's ``data``."""
    return {"host": host_facts(), "runner": runner_facts(list_files=list_files)}


def without_files(facts: dict[str, Any]) -> dict[str, Any]:
    """``collect(list_files=True)``'s facts as ``collect()`` gives them (no per-file list): one
    collection serves the manifest's short form and the peer manifest's long one."""
    runner = facts["runner"]
    source = {key: value for key, value in runner["source"].items() if key != "files"}
    return {**facts, "runner": {**runner, "source": source}}
