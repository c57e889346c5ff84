"""``metewand.toml``: datasets, problems, implementations, execution policies and experiments.

Validation is strict: unknown keys are rejected and every error names the file and the key path
(``metewand.toml: implementations.heap.runner: ...``). All errors are collected before raising.
The format is documented in docs/compute-manifest.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from metewand.canonical import SAFE_INTEGER_MAX
from metewand.errors import InvalidInput

if TYPE_CHECKING:
    from metewand.suites.compute.schema_catalog import BoundSchema

# A parameter/result/metric schema: an inline or file document (metewand dialect) or a
# repository path bound to the Rust dialect's schema catalog.
Schema = Union[dict[str, Any], "BoundSchema"]

MANIFEST_VERSION = 1
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
TIMING_SCOPES = ("cold_end_to_end", "prepare_and_execute", "execute_only")
RUN_ORDERS = ("sequential", "randomized")
DATASET_KINDS = ("generated", "fixed", "unit", "transformed", "acquired")
RUNNERS = ("python", "r", "julia", "command")
INTERPRETED_RUNNERS = ("python", "r", "julia")
LOCAL_ENVIRONMENT = "local"  # the metewand dialect's one (implicit) environment
METEWAND_DIALECT, RUST_DIALECT = "metewand", "rust"
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|min|m|h)\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0}


class ManifestError(InvalidInput, ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class Launch:
    runner: str  # "python" | "r" | "julia" | "command"
    argv: tuple[str, ...]  # may contain "{build}" until the run resolves it
    build: tuple[str, ...] = ()  # run once per run in the build dir, before any attempt
    env: dict[str, str] = field(default_factory=dict)
    sources: tuple[str, ...] = ()  # metewand dialect: files (absolute) whose bytes identify it
    environment: str = LOCAL_ENVIRONMENT  # the environment's name
    protocol_transport: str | None = None  # None: the default (pipes); "pipes" | "stdio"
    entrypoint: str | None = None  # interpreted runners: as written (repository-relative)
    program: str | None = None  # command runner: as written
    source_patterns: tuple[str, ...] | None = None  # Rust dialect: ``sources`` as written


@dataclass(frozen=True)
class DatasetDef:
    name: str
    kind: str
    materializer: Launch | None = None  # the generator, or a transformed dataset's transformer
    path: str | None = None  # fixed: the directory; acquired: the local source file or directory
    parameter_defaults: dict[str, Any] = field(default_factory=dict)
    parameter_schema: Schema | None = None
    source: str | None = None  # transformed: the dataset it is derived from
    source_parameters: dict[str, Any] = field(default_factory=dict)  # transformed: of the source
    sha256: str | None = None  # acquired: the source's digest (file bytes, or tree digest)
    defaults_declared: bool = False  # parameter_defaults was written (identities: else null)
    output_schema: Schema | None = None  # Rust dialect: what every materialized output satisfies
    source_patterns: tuple[str, ...] | None = None  # Rust fixed dataset: its ``sources``
    remote_source: dict[str, str] | None = None  # Rust generated dataset: ``source{url,sha256}``


@dataclass(frozen=True)
class ProblemDef:
    name: str
    evaluator: Launch
    result_schema: Schema | None
    metric_schema: Schema | None
    parameter_defaults: dict[str, Any] = field(default_factory=dict)
    defaults_declared: bool = False
    contract: Any = None  # Rust dialect: the validated ``contract.ProblemContract``
    parameter_schema: Schema | None = None  # Rust dialect: the contract's parameter schema


@dataclass(frozen=True)
class ImplementationDef:
    name: str
    launch: Launch
    problems: tuple[str, ...]
    parameter_defaults: dict[str, Any] = field(default_factory=dict)
    parameter_schema: Schema | None = None
    defaults_declared: bool = False
    capabilities: tuple[str, ...] = ("one_shot",)


@dataclass(frozen=True)
class ExecutionPolicy:
    name: str = "default"
    timing_scope: str = "prepare_and_execute"
    timeout_s: float | None = None  # scientific timeout over the timed scope
    warmup_runs: int = 0
    worker_reuse: bool = False
    run_order: str = "sequential"
    jobs: int = 1  # bounded concurrency; --jobs overrides
    # The Rust policy's other v1 fields (identity inputs; recorded, not enforced here).
    cpus: int | None = None
    threads: int | None = None
    memory: str | None = None
    network: bool = False
    primary_time: str = "timed_wall_time"
    enforcement: str = "best_effort"
    timeout_text: str | None = None  # the timeout as written (identities hash the spelling)


@dataclass(frozen=True)
class ObservationPolicy:
    name: str = "default"
    kind: str = "one_shot"


@dataclass(frozen=True)
class EnvironmentDef:
    name: str
    definition: dict[str, Any]  # {"kind": "local"} | uv | renv | nix | oci, as in the manifest


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
    repetitions: int  # implementation repetitions: each with its own implementation seed
    seed: int
    policy: ExecutionPolicy
    cases: tuple[Case, ...]
    measurement_repetitions: int = 1  # observations of one specification (same seed)
    observation_policy: ObservationPolicy = field(default_factory=ObservationPolicy)
    named_cases: bool = False  # Rust dialect: cases were written (else one implicit source)
    # Rust dialect: each specification (implementation repetition) owns its warm-up slots;
    # metewand dialect: a candidate's warm-ups run once, before its first repetition.
    warmups_per_specification: bool = False


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
    dialect: str = METEWAND_DIALECT
    dialect_reason: str = ""  # which keys decided the dialect (``plan --explain``)
    environments: dict[str, EnvironmentDef] = field(default_factory=dict)
    catalog: Any = None  # Rust dialect: the repository's ``SchemaCatalog``


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


def is_safe_int(value: Any, minimum: int = 0) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and minimum <= value <= SAFE_INTEGER_MAX
    )
