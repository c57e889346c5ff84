"""Source bundles and local-tree hashes, as the Rust metewand defines them.

A source bundle (its ``docs/source-bundles.md``) is the set of repository entries a list of
paths and globs selects: ``?``, ``*`` (never across ``/``), ``**`` (alone, ``**/`` at the start,
``/**`` at the end or ``/**/`` inside), ``[abc]``, ``[!abc]`` and ``{a,b}``; case-sensitive, no
backslash escapes, dotfiles not special. Every declaration must match at least one entry;
matches are deduplicated and sorted by UTF-8 bytes; a recursive glob never follows a symlinked
directory; a selected symlink must resolve inside the repository, and a selected directory's
whole tree is checked the same way.

Its identity resource is ``{"entries": [...]}`` with, per selected path, a file's SHA-256 and
executable bit, a directory's local-tree hash, or a symlink's exact target.

The local-tree hash (``docs/local-tree-hashing.md``) is SHA-256 over ``"metewand-local-tree\\0"``,
``u32(1)``, ``u64(entry count)`` and each entry in UTF-8 path order: ``bytes(path) "d"`` for a
directory, ``bytes(path) "f" exec_u8 u64(size) content`` for a file, ``bytes(path) "l"
bytes(target)`` for a symlink (never followed), where ``bytes(x) = u64(len(x)) x``. The root is
not an entry; timestamps, owners and permission bits other than "any x bit" are not hashed.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from typing import Any

from metewand import canonical
from metewand.errors import InvalidInput

LOCAL_TREE_DOMAIN = b"metewand-local-tree\x00"
LOCAL_TREE_HASH_VERSION = 1
_GLOB_META = set("*?[]{}")


class SourceBundleError(InvalidInput):
    """``kind``: empty, invalid_pattern, unmatched_pattern, path_access, path_escape,
    non_utf8_path, non_normalized_path, unsupported_entry or changed_during_read."""

    def __init__(self, kind: str, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.kind, self.path = kind, path


# -- the local-tree hash -------------------------------------------------------------------


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def _bytes(data: bytes) -> bytes:
    return _u64(len(data)) + data


def _tree_entries(root: str, rel: str = "") -> list[tuple[str, str]]:
    """(relative path, absolute path) of every entry under ``root``, never following links."""
    out = []
    with os.scandir(os.path.join(root, rel) if rel else root) as entries:
        for entry in entries:
            if "\\" in entry.name:
                raise SourceBundleError(
                    "non_normalized_path", entry.name, "a backslash is not a portable path"
                )
            path = f"{rel}/{entry.name}" if rel else entry.name
            _utf8(path)
            out.append((path, entry.path))
            if entry.is_dir(follow_symlinks=False):
                out.extend(_tree_entries(root, path))
    return out


def _utf8(path: str) -> bytes:
    try:
        return path.encode("utf-8")
    except UnicodeEncodeError as exc:  # undecodable bytes arrive as surrogate escapes
        raise SourceBundleError(
            "non_utf8_path", path.encode("utf-8", "replace").decode(), "not UTF-8"
        ) from exc


def local_tree_sha256(root: str) -> str:
    """The version-1 local-tree hash of the directory ``root`` (64 lowercase hex digits)."""
    if not os.path.isdir(root):
        raise SourceBundleError("path_access", root, "is not a directory")
    entries = sorted(_tree_entries(root), key=lambda e: _utf8(e[0]))
    digest = hashlib.sha256(LOCAL_TREE_DOMAIN)
    digest.update(LOCAL_TREE_HASH_VERSION.to_bytes(4, "big") + _u64(len(entries)))
    for rel, full in entries:
        digest.update(_bytes(rel.encode("utf-8")))
        mode = os.lstat(full).st_mode
        if stat.S_ISDIR(mode):
            digest.update(b"d")
        elif stat.S_ISLNK(mode):
            digest.update(b"l" + _bytes(_utf8(os.readlink(full))))
        elif stat.S_ISREG(mode):
            _hash_file(digest, full, rel, mode)
        else:
            raise SourceBundleError(
                "unsupported_entry", rel, "sockets, FIFOs and devices are refused"
            )
    return digest.hexdigest()


def _hash_file(digest: Any, full: str, rel: str, mode: int) -> None:
    with open(full, "rb") as fh:
        content = fh.read()
        after = os.fstat(fh.fileno()).st_size
    if after != len(content):
        raise SourceBundleError("changed_during_read", rel, "its size changed while it was read")
    executable = b"\x01" if mode & 0o111 else b"\x00"
    digest.update(b"f" + executable + _u64(len(content)))
    digest.update(content)


# -- globs ---------------------------------------------------------------------------------


def glob_regex(pattern: str) -> re.Pattern[str]:
    """The regular expression of one glob (whole-path match, ``*`` never crosses ``/``)."""
    parts = pattern.split("/")
    out = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            if len(parts) == 1:
                out.append(".*")
            elif last:
                out.append(".+")  # "dir/**": everything beneath, not dir itself
            else:
                out.append("(?:[^/]*/)*")
            continue
        if "**" in part:
            raise SourceBundleError(
                "invalid_pattern", pattern, "'**' must be a whole path component"
            )
        out.append(_component_regex(part, pattern) + ("" if last else "/"))
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _component_regex(part: str, pattern: str) -> str:
    out, i = [], 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = part.find("]", i + 2)
            if end < 0:
                raise SourceBundleError("invalid_pattern", pattern, "unclosed character class")
            body = part[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            escaped = "".join("\\" + c if c in "\\^[]" else c for c in body)
            out.append(f"[{'^' if negate else ''}{escaped}]")
            i = end
        elif ch == "{":
            end = part.find("}", i)
            if end < 0 or "{" in part[i + 1 : end]:
                raise SourceBundleError("invalid_pattern", pattern, "unclosed or nested {…}")
            choices = part[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_component_regex(c, pattern) for c in choices) + ")")
            i = end
        elif ch in "]}":
            raise SourceBundleError("invalid_pattern", pattern, f"unopened {ch!r}")
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


# -- expansion -----------------------------------------------------------------------------


def _contained(root: str, rel: str) -> None:
    full = os.path.join(root, rel)
    try:
        resolved = os.path.realpath(full, strict=True)
    except OSError as exc:
        kind = "path_escape" if os.path.islink(full) else "path_access"
        raise SourceBundleError(kind, rel, f"cannot be resolved: {exc.strerror}") from exc
    if resolved != root and not resolved.startswith(root + os.sep):
        raise SourceBundleError(
            "path_escape", rel, f"resolves outside the repository to {resolved}"
        )


def _descendants(root: str, rel: str) -> list[str]:
    return [path for path, _ in _tree_entries(root, rel)]


def _candidates(root: str, pattern: str) -> list[str]:
    prefix: list[str] = []
    for part in pattern.split("/"):
        if _GLOB_META & set(part):
            break
        prefix.append(part)
    literal = len(prefix) == len(pattern.split("/"))
    rel = "/".join(prefix)
    full = os.path.join(root, rel) if rel else root
    if not os.path.lexists(full):
        return []
    if rel:
        _contained(root, rel)
    if literal:
        return [rel]
    if not os.path.isdir(full) or os.path.islink(full):
        return []
    return _descendants(root, rel)


def expand_source_bundle(root: str, patterns: list[str] | tuple[str, ...]) -> list[str]:
    """The selected repository paths in UTF-8 byte order (see the module's docstring)."""
    if not patterns:
        raise SourceBundleError("empty", "", "a source bundle needs at least one path")
    root = os.path.realpath(root)
    selected: set[str] = set()
    for pattern in patterns:
        regex = glob_regex(pattern)
        matches = [c for c in _candidates(root, pattern) if regex.match(c)]
        if not matches:
            raise SourceBundleError(
                "unmatched_pattern", pattern, "did not match any repository entry"
            )
        selected.update(matches)
    paths = sorted(selected, key=_utf8)
    for rel in paths:
        _contained(root, rel)
        if os.path.isdir(os.path.join(root, rel)) and not os.path.islink(os.path.join(root, rel)):
            for child in _descendants(root, rel):
                _contained(root, child)
    return paths


def _entry(root: str, rel: str) -> dict[str, Any]:
    full = os.path.join(root, rel)
    mode = os.lstat(full).st_mode
    if stat.S_ISLNK(mode):
        return {"kind": "symlink", "path": rel, "target": os.readlink(full)}
    if stat.S_ISDIR(mode):
        return {"kind": "directory", "path": rel, "tree_sha256": local_tree_sha256(full)}
    if stat.S_ISREG(mode):
        with open(full, "rb") as fh:
            content = fh.read()
        if len(content) != os.stat(full).st_size:
            raise SourceBundleError("changed_during_read", rel, "its size changed while read")
        return {
            "executable": bool(mode & 0o111),
            "kind": "file",
            "path": rel,
            "sha256": hashlib.sha256(content).hexdigest(),
        }
    raise SourceBundleError("unsupported_entry", rel, "sockets, FIFOs and devices are refused")


def source_bundle_resource(root: str, patterns: list[str] | tuple[str, ...]) -> dict[str, Any]:
    root = os.path.realpath(root)
    return {"entries": [_entry(root, rel) for rel in expand_source_bundle(root, patterns)]}


def source_bundle_id(root: str, patterns: list[str] | tuple[str, ...]) -> str:
    """``mw1-source-bundle-…`` of the entries ``patterns`` select under ``root``."""
    resource = source_bundle_resource(root, patterns)
    return canonical.identity("source-bundle", {"version": 1, "value": resource})


def bundle_directory(root: str, patterns: tuple[str, ...] | list[str]) -> tuple[str, list[str]]:
    """(directory, selected paths) for a fixed dataset's bundle: one selected directory is the
    dataset itself; otherwise the deepest directory holding every selected path."""
    paths = expand_source_bundle(root, patterns)
    real = os.path.realpath(root)
    if len(paths) == 1 and os.path.isdir(os.path.join(real, paths[0])):
        return paths[0], paths
    parents = [os.path.dirname(p) for p in paths]
    return os.path.commonpath(parents) if all(parents) else "", paths


def copy_bundle(root: str, patterns: tuple[str, ...] | list[str], destination: str) -> None:
    """Copy what ``patterns`` select into ``destination``, relative to ``bundle_directory``:
    the directory a worker sees as the fixed dataset holds exactly the declared entries."""
    import shutil

    real = os.path.realpath(root)
    base, paths = bundle_directory(real, patterns)
    os.makedirs(destination, exist_ok=True)
    for rel in paths:
        source = os.path.join(real, rel)
        target = os.path.join(destination, os.path.relpath(rel, base) if base else rel)
        if os.path.islink(source):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(os.readlink(source), target)
        elif os.path.isdir(source):
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(source, target)
