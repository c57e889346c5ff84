"""Identity of an engine binary: sha256 and ``--version`` output, cached per file state.

Chromium's binary is ~300 MB: hashing it takes about a second, so the digest is cached by
(path, size, mtime, inode) and recomputed only when the file changes.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from metewand.measure.process import run_captured

CHUNK = 1 << 20


def _file_key(path: Path) -> tuple[str, int, int, int]:
    info = os.stat(path)
    return (str(path), info.st_size, info.st_mtime_ns, info.st_ino)


def binary_sha256(path: Path) -> str:
    return _sha256_cached(_file_key(path))


@lru_cache(maxsize=32)
def _sha256_cached(key: tuple[str, int, int, int]) -> str:
    digest = hashlib.sha256()
    with open(key[0], "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def version_output(path: Path, version_argv: tuple[str, ...], timeout: float = 20.0) -> str:
    return _version_cached(_file_key(path), version_argv, timeout)


@lru_cache(maxsize=32)
def _version_cached(key: tuple[str, int, int, int], argv: tuple[str, ...], timeout: float) -> str:
    """stdout (or stderr when stdout is empty) of ``binary <version_argv>``, stripped; an
    error text in angle brackets when the binary cannot report a version."""
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["LIGHTPANDA_DISABLE_TELEMETRY"] = "true"
    try:
        done = run_captured([key[0], *argv], timeout, env=env)
    except OSError as exc:
        return f"<version unavailable: {exc!r}>"
    if done.timed_out:
        return f"<version unavailable: no exit within {timeout:g} s>"
    text = (done.stdout or done.stderr).decode("utf-8", errors="replace").strip()
    if done.returncode != 0:
        return f"<version exit {done.returncode}: {text[:200]}>"
    return text
