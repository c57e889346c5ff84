"""The Rust dialect's reader: key checks worded as Rust's (``unknown field``), names, repository
paths, integers, the JSON value domain and worker launches, every error naming the file and the
key path.

The shape pass (``manifest_rust``), the repository pass (``manifest_rust_repository``), the
relationship checks and the problem-contract reader (``contract``) all build on it; it imports
the types (``manifest``) and the metewand dialect's reader, never a pass.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from metewand.canonical import SAFE_INTEGER_MAX
from metewand.suites.compute.manifest import (
    INTERPRETED_RUNNERS,
    NAME_RE,
    RUNNERS,
    Launch,
)
from metewand.suites.compute.manifest_reader import Reader
from metewand.suites.compute.schema_catalog import repository_path_problem
from metewand.suites.compute.toml_values import domain_problem

RUNNER_PROGRAMS = {"python": sys.executable, "r": "Rscript", "julia": "julia"}
WORKER_KEYS = (
    "runner",
    "entrypoint",
    "program",
    "args",
    "sources",
    "environment",
    "protocol_transport",
)


class RustReader(Reader):
    """Collects every shape error of one manifest, each as ``file: key.path: message``."""

    UNKNOWN, MISSING = "unknown field", "missing field"

    def __init__(self, path: str, label: str | None = None) -> None:
        super().__init__(path, label)
        # (section, definition, field) -> repository path of a schema, bound to the catalog
        # once the repository pass has loaded it.
        self.schema_paths: dict[tuple[str, str, str], str] = {}

    def table(  # type: ignore[override]
        self, value: Any, where: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        return super().table(value, where, {key: key in required for key in (*allowed, *required)})

    def name(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not NAME_RE.match(value):
            self.error(where, f"name {value!r} must match ^[A-Za-z0-9][A-Za-z0-9._-]*$")
            return ""
        return value

    def _unique(self, value: Any, where: str, what: str, item: Any) -> tuple[str, ...]:
        """A non-empty array of unique items, each checked by ``item(value, where)``."""
        if not isinstance(value, list) or not value:
            self.error(where, f"must be a non-empty array of {what}")
            return ()
        items = tuple(item(v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(set(items)) != len(items):
            self.error(where, "cannot contain duplicates")
        return items

    def name_list(self, value: Any, where: str) -> tuple[str, ...]:
        return self._unique(value, where, "names", self.name)

    def repo_path(self, value: Any, where: str, root_ok: bool = False) -> str:
        if not isinstance(value, str):
            self.error(where, "must be a repository path (a string)")
            return ""
        if root_ok and value == ".":
            return value
        if problem := repository_path_problem(value):
            self.error(where, problem)
        return value

    def repo_paths(self, value: Any, where: str) -> tuple[str, ...]:
        return self._unique(value, where, "repository paths", self.repo_path)

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            self.error(where, "must be a non-empty string")
            return ""
        return value

    def choice(self, value: Any, where: str, choices: tuple[str, ...]) -> str:
        if value not in choices:
            self.error(where, f"must be one of {', '.join(choices)}; got {value!r}")
            return choices[0]
        return str(value)

    def safe_int(self, value: Any, where: str, minimum: int) -> int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        if not ok or not minimum <= value <= SAFE_INTEGER_MAX:
            self.error(where, f"must be a safe integer >= {minimum}")
            return minimum
        return int(value)

    def boolean(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            self.error(where, "must be true or false")
            return False
        return value

    def version(self, value: Any, where: str) -> None:
        if value != 1 or isinstance(value, bool):
            self.error(where, f"expected version 1, found {value!r}")

    def json_object(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.error(where, "must be an object (a table)")
            return {}
        if problem := domain_problem(value):
            self.error(where, problem)
        return value

    def named(self, doc: dict[str, Any], key: str) -> dict[str, Any]:
        value = doc.get(key, {})
        if not isinstance(value, dict):
            self.error(key, "must be a table")
            return {}
        return {name: entry for name, entry in value.items() if self.name(name, f"{key}.{name}")}


def worker(r: RustReader, t: dict[str, Any], where: str) -> Launch:
    """A worker launch: interpreted (python, r, julia) or command."""
    runner = r.choice(t.get("runner"), f"{where}.runner", RUNNERS)
    environment = r.name(t.get("environment"), f"{where}.environment") if "environment" in t else ""
    if "environment" not in t:
        r.error(f"{where}.environment", "worker is missing `environment`")
    args = t.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) and "\x00" not in a for a in args):
        r.error(f"{where}.args", "must be an array of strings (no NUL byte)")
        args = []
    transport = t.get("protocol_transport")
    if transport is not None:
        transport = r.choice(transport, f"{where}.protocol_transport", ("pipes", "stdio"))
    if runner in INTERPRETED_RUNNERS:
        return _interpreted(r, t, where, runner, environment, args, transport)
    if "entrypoint" in t:
        r.error(f"{where}.entrypoint", "a command worker cannot declare `entrypoint`")
    program = r.text(t.get("program"), f"{where}.program")
    if "\x00" in program:
        r.error(f"{where}.program", "must not contain a NUL byte")
    sources = r.repo_paths(t["sources"], f"{where}.sources") if "sources" in t else None
    resolved = os.path.normpath(os.path.join(r.root, program)) if "/" in program else program
    return Launch(
        "command",
        (resolved, *args),
        environment=environment,
        protocol_transport=transport,
        program=program,
        source_patterns=sources,
    )


def _interpreted(
    r: RustReader,
    t: dict[str, Any],
    where: str,
    runner: str,
    environment: str,
    args: list[str],
    transport: str | None,
) -> Launch:
    if "program" in t:
        r.error(f"{where}.program", "an interpreted worker cannot declare `program`")
    if "entrypoint" not in t:
        r.error(f"{where}.entrypoint", "an interpreted worker is missing `entrypoint`")
    entrypoint = r.repo_path(t.get("entrypoint", ""), f"{where}.entrypoint")
    if "sources" not in t:
        r.error(f"{where}.sources", "an interpreted worker is missing `sources`")
    sources = r.repo_paths(t.get("sources", ["-"]), f"{where}.sources")
    script = os.path.join(r.root, entrypoint)
    return Launch(
        runner,
        (RUNNER_PROGRAMS[runner], script, *args),
        environment=environment,
        protocol_transport=transport,
        entrypoint=entrypoint,
        source_patterns=sources,
    )
