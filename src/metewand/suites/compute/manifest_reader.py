"""The metewand dialect's reader of one ``metewand.toml``: key checks, strings, names, paths,
schemas and worker launches, every error naming the file and the key path.

``manifest_read`` walks the document with it; the derived dataset kinds (``manifest_datasets``)
and the Rust dialect's reader (``manifest_rust_reader``) build on it. It imports the types
(``manifest``) and the guards, never a module that reads a whole manifest.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from metewand import canonical
from metewand.suites.compute import manifest_guard as guard
from metewand.suites.compute.manifest import Launch

RUNNERS = ("python", "command")
LAUNCH_KEYS = {"runner": True, "entrypoint": False, "program": False, "args": False}
LAUNCH_KEYS |= {"build": False, "env": False, "source_files": False}


class Reader:
    # How a key error is worded (the Rust dialect's reader says "unknown field", as Rust does).
    UNKNOWN, MISSING = "unknown key", "missing required key"

    def __init__(self, path: str, label: str | None = None, root: str | None = None) -> None:
        self.path = path
        self.file = label or os.path.basename(path)  # what every error names
        self.root = root or os.path.dirname(path)  # what relative paths resolve against
        self.errors: list[str] = []

    def error(self, where: str, message: str) -> None:
        self.errors.append(f"{self.file}: {where}: {message}")

    def table(self, value: Any, where: str, keys: dict[str, bool]) -> dict[str, Any]:
        """Check a table's keys (True = required); returns {} when it is not a table."""
        if not isinstance(value, dict):
            self.error(where, "must be a table")
            return {}
        for key in value:
            if key not in keys:
                self.error(f"{where}.{key}", self.UNKNOWN)
        for key, required in keys.items():
            if required and key not in value:
                self.error(f"{where}.{key}", self.MISSING)
        return value

    def string(self, value: Any, where: str, choices: tuple[str, ...] = ()) -> str:
        if not isinstance(value, str) or not value:
            self.error(where, "must be a nonempty string")
            return ""
        if choices and value not in choices:
            self.error(where, f"must be one of {', '.join(choices)}; got {value!r}")
        return value

    def strings(self, value: Any, where: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.error(where, "must be an array of strings")
            return ()
        for i, item in enumerate(value):
            if problem := guard.exec_string_problem(item):
                self.error(f"{where}[{i}]", problem)
        return tuple(value)

    def name(self, value: Any, where: str) -> str:
        """A name that becomes an attempt-key and directory segment."""
        name = self.string(value, where)
        if name and (problem := guard.name_problem(name)):
            self.error(where, problem)
        return name

    def params(self, value: Any, where: str) -> dict[str, Any]:
        """``parameter_defaults``: a table of JSON values."""
        if not isinstance(value, dict):
            self.error(where, "must be a table")
            return {}
        return dict(self.json_value(value, where))

    def names(self, value: Any, where: str, known: dict[str, Any], what: str) -> tuple[str, ...]:
        items = self.strings(value, where)
        if isinstance(value, list) and not items:
            self.error(where, "must not be empty")
        if len(set(items)) != len(items):
            self.error(where, "names must be unique")
        for i, name in enumerate(items):
            if name not in known:
                self.error(f"{where}[{i}]", f"no {what} named {name!r}")
        return items

    def json_value(self, value: Any, where: str) -> Any:
        try:
            canonical.dumps(value)
        except ValueError as exc:
            self.error(where, f"not representable as canonical JSON: {exc}")
        except RecursionError:
            self.error(where, "nested too deeply")
        return value

    def file_path(self, value: Any, where: str, regular: bool = False) -> str:
        """A path relative to the manifest; ``regular``: it must be a file, not a directory."""
        rel = self.string(value, where)
        full = os.path.normpath(os.path.join(self.root, rel)) if rel else ""
        if rel and not os.path.exists(full):
            self.error(where, f"no such file: {rel}")
        elif rel and regular and not os.path.isfile(full):
            self.error(where, f"{rel} is not a regular file")
        return full

    def schema(self, value: Any, where: str) -> dict[str, Any] | None:
        """A JSON Schema inline (table) or as a path to a JSON file."""
        if value is None:
            return None
        if isinstance(value, dict):
            return self._checked_schema(dict(value), where)
        full = self.file_path(value, where, regular=True)
        if not full or not os.path.isfile(full):
            return None
        try:
            with open(full, "rb") as fh:
                doc = canonical.loads(fh.read())
        except (ValueError, OSError) as exc:
            self.error(where, f"invalid JSON schema file: {str(exc)[:200]}")
            return None
        except RecursionError:
            self.error(where, "invalid JSON schema file: nested too deeply")
            return None
        if not isinstance(doc, dict):
            self.error(where, "a schema must be a JSON object")
            return None
        return self._checked_schema(doc, where)

    def _checked_schema(self, schema: dict[str, Any], where: str) -> dict[str, Any] | None:
        if problem := guard.schema_problem(schema):
            self.error(where, problem)
            return None
        return schema


def read_launch(r: Reader, value: Any, where: str) -> Launch:
    t = r.table(value, where, LAUNCH_KEYS)
    runner = r.string(t.get("runner"), f"{where}.runner", RUNNERS)
    args = r.strings(t.get("args", []), f"{where}.args")
    build = r.strings(t.get("build", []), f"{where}.build")
    env = t.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        r.error(f"{where}.env", "must be a table of strings")
        env = {}
    for key, problem in guard.env_problems(env):
        r.error(f"{where}.env.{key!r}", problem)
    if runner not in RUNNERS:  # said once, at the runner: the other keys depend on it
        return Launch(runner, (), build, env, ())
    extra = _source_files(r, t.get("source_files", []), f"{where}.source_files")
    if runner == "python":
        if "program" in t:
            r.error(f"{where}.program", "python launchers take 'entrypoint', not 'program'")
        script = r.file_path(t.get("entrypoint"), f"{where}.entrypoint", regular=True)
        if extra and script and not _inside(r.root, script):
            r.error(
                f"{where}.source_files",
                "needs the entrypoint inside the manifest's directory (one source bundle)",
            )
        sources = tuple(dict.fromkeys((script, *extra)))
        return Launch(
            "python", (sys.executable, script, *args), build, env, sources, entrypoint=script
        )
    if "entrypoint" in t:
        r.error(f"{where}.entrypoint", "command launchers take 'program', not 'entrypoint'")
    program = r.string(t.get("program"), f"{where}.program")
    if bad := guard.exec_string_problem(program):
        r.error(f"{where}.program", bad)
    if "/" in program and not program.startswith("{build}"):
        program = os.path.normpath(os.path.join(r.root, program))
    sources = tuple(
        os.path.normpath(os.path.join(r.root, a))
        for a in build
        if os.path.isfile(os.path.join(r.root, a))
    )
    sources = tuple(dict.fromkeys((*sources, *extra)))
    return Launch("command", (program, *args), build, env, sources, program=program)


def _source_files(r: Reader, value: Any, where: str) -> tuple[str, ...]:
    """``source_files``: files inside the manifest's directory whose bytes identify the worker
    besides its entrypoint or build sources (a module it imports, a header it includes), so a
    change to them changes its identity (and the history attributes a step to it)."""
    out = []
    for i, rel in enumerate(r.strings(value, where)):
        full = r.file_path(rel, f"{where}[{i}]", regular=True)
        if full and not _inside(r.root, full):
            r.error(f"{where}[{i}]", f"{rel} is outside the manifest's directory")
        elif full:
            out.append(full)
    return tuple(out)


def _inside(root: str, path: str) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)
