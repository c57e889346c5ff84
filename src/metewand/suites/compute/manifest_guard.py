"""Checks of manifest values that would otherwise fail only after the run directory exists.

Each returns the problem as a sentence (or None): names that become directory and key segments,
strings handed to ``execve``, schemas, fixed dataset directories, durations, and the plan size.
``manifest_read`` reports them against the file and key like every other manifest error.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from typing import Any

from metewand.suites.compute.manifest import NAME_RE

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A scientific timeout longer than a week is a typo (and past ~1e9 s the clocks' arithmetic and
# the queue waits overflow).
MAX_TIMEOUT_S = 7 * 24 * 3600.0
# Kernel pseudo-filesystems: their trees change as they are read and never end in a fixed hash.
PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
# The most attempts one plan may hold unless the user says otherwise (--max-attempts).
DEFAULT_MAX_ATTEMPTS = 100_000


def name_problem(value: str) -> str | None:
    """Experiment and case names become key and directory segments."""
    if value in (".", "..") or not NAME_RE.match(value):
        return f"{value!r}: names use letters, digits, '.', '_' and '-' (and are not '.' or '..')"
    return None


def exec_string_problem(value: str) -> str | None:
    if "\x00" in value:
        return "must not contain a NUL byte (a process argument cannot hold one)"
    return None


def env_problems(env: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(key, problem) for each variable the kernel could not pass as ``NAME=value``."""
    for key, value in env.items():
        if not ENV_NAME_RE.match(key):
            yield key, "variable names use letters, digits and '_' (no '=', no NUL)"
        elif not isinstance(value, str):
            yield key, "must be a string"
        elif "\x00" in value:
            yield key, "must not contain a NUL byte"


def timeout_problem(seconds: float) -> str | None:
    if not math.isfinite(seconds) or seconds > MAX_TIMEOUT_S:
        return f"must be finite and at most {MAX_TIMEOUT_S:g} s (one week)"
    return None


def fixed_dataset_problem(path: str) -> str | None:
    """A fixed dataset is a real directory of files, not a link and not a kernel tree."""
    if os.path.islink(path):
        return "must not be a symbolic link"
    if not os.path.isdir(path):
        return "must be a directory"
    if problem := pseudo_fs_problem(path):
        return problem
    from metewand.suites.compute.validate import InvalidOutput, tree_files

    try:  # a walk and a stat per entry, no reading: a pipe inside would hang the hashing
        tree_files(path)
    except InvalidOutput as exc:
        return f"holds something other than directories and regular files: {exc}"
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    return None


def pseudo_fs_problem(path: str) -> str | None:
    """A dataset source inside /proc, /sys or /dev (endless, changing, or a device)."""
    real = os.path.realpath(path)
    if any(real == root or real.startswith(root + "/") for root in PSEUDO_ROOTS):
        return f"{real} is a kernel pseudo-filesystem, not a dataset"
    return None


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Not a JSON Schema (draft 2020-12), or a ``$ref`` that does not resolve inside it."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from referencing import Registry, Resource
    from referencing.exceptions import Unresolvable

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "$"
        return f"not a JSON Schema at {where}: {exc.message[:200]}"
    except RecursionError:
        return "nested too deeply"
    resource = Resource.from_contents(schema, default_specification=_draft())
    resolver = Registry().resolver_with_root(resource)
    for ref in _refs(schema):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            return f"$ref {ref!r} does not resolve (only references inside the schema work)"
    return None


def _draft() -> Any:
    from referencing.jsonschema import DRAFT202012

    return DRAFT202012


def _refs(value: Any, depth: int = 0) -> Iterator[str]:
    if depth > 200:
        return
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str):
            yield ref
        for item in value.values():
            yield from _refs(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item, depth + 1)


def plan_size(experiments: Any) -> int:
    """How many attempts the experiments expand to, counted without expanding them."""
    total = 0
    for exp in experiments:
        warmups = exp.policy.warmup_runs
        slots = exp.repetitions * (exp.measurement_repetitions + warmups)
        if not exp.warmups_per_specification:  # metewand dialect: warm-ups once per candidate
            slots = exp.repetitions * exp.measurement_repetitions + warmups
        for case in exp.cases:
            problems = _grid_size(case.problem_parameters)
            for dataset in exp.datasets:
                configs = _grid_size(case.dataset_parameters.get(dataset, {}))
                for impl in exp.implementations:
                    impl_grid = _grid_size(case.implementation_parameters.get(impl, {}))
                    total += configs * problems * impl_grid * slots
    return total


def _grid_size(axes: dict[str, list[Any]]) -> int:
    return math.prod(len(values) for values in axes.values())
