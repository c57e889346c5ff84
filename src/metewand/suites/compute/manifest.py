"""``metewand.toml``: datasets, problems, implementations, execution policies and experiments.

Validation is strict: unknown keys are rejected and every error names the file and the key path
(``metewand.toml: implementations.heap.runner: ...``). All errors are collected before raising.
The format is documented in docs/compute-manifest.md.
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from typing import Any

from metewand.canonical import SAFE_INTEGER_MAX
from metewand.errors import InvalidInput

MANIFEST_VERSION = 1
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
TIMING_SCOPES = ("cold_end_to_end", "prepare_and_execute", "execute_only")
RUN_ORDERS = ("sequential", "randomized")
DATASET_KINDS = ("generated", "fixed", "unit", "transformed", "acquired")
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|min|m|h)\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0}


class ManifestError(InvalidInput, ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class Launch:
    runner: str  # "python" | "command"
    argv: tuple[str, ...]  # may contain "{build}" until the run resolves it
    build: tuple[str, ...] = ()  # run once per run in the build dir, before any attempt
    env: dict[str, str] = field(default_factory=dict)
    sources: tuple[str, ...] = ()  # files whose bytes enter the definition identity

    def identity_record(self) -> dict[str, Any]:
        return {
            "runner": self.runner,
            "argv": [os.path.basename(a) if a == sys.executable else a for a in self.argv],
            "build": list(self.build),
            "env": self.env,
            "sources": [_file_digest(p) for p in self.sources],
        }


@dataclass(frozen=True)
class DatasetDef:
    name: str
    kind: str
    materializer: Launch | None = None  # the generator, or a transformed dataset's transformer
    path: str | None = None  # fixed: the directory; acquired: the local source file or directory
    parameter_defaults: dict[str, Any] = field(default_factory=dict)
    parameter_schema: dict[str, Any] | None = None
    source: str | None = None  # transformed: the dataset it is derived from
    source_parameters: dict[str, Any] = field(default_factory=dict)  # transformed: of the source
    sha256: str | None = None  # acquired: the source's digest (file bytes, or tree digest)


@dataclass(frozen=True)
class ProblemDef:
    name: str
    evaluator: Launch
    result_schema: dict[str, Any] | None
    metric_schema: dict[str, Any] | None
    parameter_defaults: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ImplementationDef:
    name: str
    launch: Launch
    problems: tuple[str, ...]
    parameter_defaults: dict[str, Any] = field(default_factory=dict)
    parameter_schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class ExecutionPolicy:
    name: str = "default"
    timing_scope: str = "prepare_and_execute"
    timeout_s: float | None = None  # scientific timeout over the timed scope
    warmup_runs: int = 0
    worker_reuse: bool = False
    run_order: str = "sequential"
    jobs: int = 1  # bounded concurrency; --jobs overrides

    def identity_record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "timing_scope": self.timing_scope,
            "timeout_ms": None if self.timeout_s is None else round(self.timeout_s * 1000),
            "warmup_runs": self.warmup_runs,
            "worker_reuse": self.worker_reuse,
            "run_order": self.run_order,
        }


Axes = dict[str, dict[str, list[Any]]]  # owner name -> parameter -> values (a grid)


@dataclass(frozen=True)
class Case:
    name: str
    dataset_parameters: Axes
    problem_parameters: dict[str, list[Any]]
    implementation_parameters: Axes


@dataclass(frozen=True)
class Experiment:
    name: str
    problem: str
    datasets: tuple[str, ...]
    implementations: tuple[str, ...]
    repetitions: int
    seed: int
    policy: ExecutionPolicy
    cases: tuple[Case, ...]


@dataclass(frozen=True)
class Manifest:
    path: str
    root: str
    name: str
    datasets: dict[str, DatasetDef]
    problems: dict[str, ProblemDef]
    implementations: dict[str, ImplementationDef]
    experiments: tuple[Experiment, ...]
    reference_implementation: str | None = None  # what reports compare the others against


def parse_duration(raw: Any) -> float | None:
    """``"500 ms"``, ``"10 s"``, ``"2 min"`` or a number of seconds; None when invalid."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        return float(raw) if raw > 0 else None
    if isinstance(raw, str) and (m := _DURATION_RE.match(raw)):
        value = float(m.group(1)) * _UNIT_S[m.group(2)]
        return value if value > 0 else None
    return None


def _file_digest(path: str) -> dict[str, str]:
    import hashlib

    try:
        with open(path, "rb") as fh:
            return {"path": os.path.basename(path), "sha256": hashlib.sha256(fh.read()).hexdigest()}
    except OSError:
        return {"path": os.path.basename(path), "sha256": "missing"}


def load(path: str, root: str | None = None) -> Manifest:
    """Read and validate a manifest; raises ManifestError listing every problem. ``root``: the
    directory its relative paths resolve against (default: the manifest's own)."""
    from metewand.suites.compute.manifest_read import read_manifest

    try:
        with open(path, "rb") as fh:
            document = tomllib.load(fh)
    except OSError as exc:
        raise ManifestError([f"{path}: cannot read: {exc.strerror}"]) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError([f"{path}: invalid TOML: {exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise ManifestError([f"{path}: not UTF-8 text (byte {exc.start}): {exc.reason}"]) from exc
    except RecursionError:
        raise ManifestError([f"{path}: invalid TOML: nested too deeply"]) from None
    try:
        return read_manifest(os.path.abspath(path), document, root)
    except RecursionError:
        raise ManifestError([f"{path}: a value is nested too deeply"]) from None


def is_safe_int(value: Any, minimum: int = 0) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and minimum <= value <= SAFE_INTEGER_MAX
    )
