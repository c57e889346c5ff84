"""The execution-measurements payload (version 2; version 1 stays readable).

Nine phase and resource measurements, each in one of the three wire forms of
``metewand.measure.forms``, plus the scopes and envelope facts that say what the
numbers cover. The layout is documented in docs/measurements.md; the JSON Schemas
``measurements-v1`` / ``measurements-v2`` check the same rules, and the conformance
vectors in tests/vectors/measurements/ keep the two in agreement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from metewand import canonical
from metewand.errors import MetewandError
from metewand.measure import forms
from metewand.measure.forms import FormError, Measurement, Reason, Status

MEASUREMENTS_VERSION = 2
READABLE_VERSIONS = (1, 2)


class CpuTimeScope(StrEnum):
    WORKER_LIFETIME_THROUGH_EXECUTE = "worker_lifetime_through_execute"  # cold timing
    PREPARE_AND_EXECUTE = "prepare_and_execute"
    EXECUTE_ONLY = "execute_only"  # operation-scope timing


class PeakRssScope(StrEnum):
    # A lifetime high-water mark includes memory used before any envelope.
    WORKER_LIFETIME_THROUGH_EXECUTE = "worker_lifetime_through_execute"


class TimedWallInclusion(StrEnum):
    """Work between timed operations that the continuous timed wall contains."""

    INTEGRITY_CHECKS = "integrity_checks"
    RESOURCE_ACCOUNTING = "resource_accounting"


class AccountingBackend(StrEnum):
    CGROUP2 = "cgroup2"
    CGROUP1 = "cgroup1"
    PROC = "proc"  # one process via /proc: can never be complete tree accounting
    NONE = "none"  # no accounting ran


# Scopes each payload version may carry (v1 knew only prepare-and-execute CPU timing).
CPU_SCOPES_BY_VERSION: dict[int, frozenset[CpuTimeScope]] = {
    1: frozenset({CpuTimeScope.PREPARE_AND_EXECUTE}),
    2: frozenset(CpuTimeScope),
}

# The manifest's timing_scope names the CPU scope that brackets the same envelope.
CPU_SCOPE_FOR_TIMING_SCOPE: dict[str, CpuTimeScope] = {
    "cold_end_to_end": CpuTimeScope.WORKER_LIFETIME_THROUGH_EXECUTE,
    "prepare_and_execute": CpuTimeScope.PREPARE_AND_EXECUTE,
    "execute_only": CpuTimeScope.EXECUTE_ONLY,
}


@dataclass(frozen=True)
class FieldRule:
    """Which partial and unavailable reasons a field admits."""

    partial: frozenset[Reason]
    unavailable: frozenset[Reason]


_DURATION = FieldRule(
    partial=frozenset({Reason.INTERRUPTED}),
    unavailable=frozenset({Reason.NOT_STARTED, Reason.OUT_OF_RANGE}),
)
_MATERIALIZATION = FieldRule(
    partial=_DURATION.partial,
    unavailable=_DURATION.unavailable | {Reason.CACHE_HIT, Reason.PROVIDED_DATASET},
)
_RESOURCE = FieldRule(
    partial=frozenset({Reason.PROCESS_ONLY, Reason.INTERRUPTED}),
    unavailable=frozenset(
        {
            Reason.NOT_STARTED,
            Reason.ACCOUNTING_UNAVAILABLE,
            Reason.UNSUPPORTED,
            Reason.OUT_OF_RANGE,
            Reason.PERMISSION_DENIED,
            Reason.SAMPLER_FAULT,
        }
    ),
)

FIELD_RULES: dict[str, FieldRule] = {
    "materialization_time_ns": _MATERIALIZATION,
    "worker_startup_time_ns": _DURATION,
    "evaluator_startup_time_ns": _DURATION,
    "prepare_time_ns": _DURATION,
    "execute_request_time_ns": _DURATION,
    "timed_wall_time_ns": _DURATION,
    "evaluation_time_ns": _DURATION,
    "cpu_time_ns": _RESOURCE,
    "peak_rss_bytes": _RESOURCE,
}
MEASUREMENT_FIELDS = tuple(FIELD_RULES)
RESOURCE_FIELDS = ("cpu_time_ns", "peak_rss_bytes")
SCALAR_KEYS = ("version", "cpu_time_scope", "peak_rss_scope")  # the document's own
ENVELOPE_KEYS = ("timed_wall_includes", "accounting_backend")  # ours: optional on read
ALL_KEYS = frozenset(MEASUREMENT_FIELDS + SCALAR_KEYS + ENVELOPE_KEYS)


class PayloadError(MetewandError, ValueError):
    """A payload that breaks the contract; ``path`` names the offending key ($ = payload)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True)
class ExecutionMeasurements:
    materialization_time_ns: Measurement
    worker_startup_time_ns: Measurement
    evaluator_startup_time_ns: Measurement
    prepare_time_ns: Measurement
    execute_request_time_ns: Measurement
    timed_wall_time_ns: Measurement
    evaluation_time_ns: Measurement
    cpu_time_ns: Measurement
    peak_rss_bytes: Measurement
    cpu_time_scope: CpuTimeScope
    # Our envelope facts beside the document's fields: every payload metewand writes has both;
    # a payload that carries only the document's fields reads with them None (not recorded).
    accounting_backend: AccountingBackend | None
    timed_wall_includes: frozenset[TimedWallInclusion] | None = frozenset()
    peak_rss_scope: PeakRssScope = PeakRssScope.WORKER_LIFETIME_THROUGH_EXECUTE
    version: int = MEASUREMENTS_VERSION

    def __post_init__(self) -> None:
        _check_semantics(self)

    @classmethod
    def not_started(
        cls, cpu_time_scope: CpuTimeScope, materialization: Measurement | None = None
    ) -> ExecutionMeasurements:
        """A starting point: nothing measured yet (fill fields with ``dataclasses.replace``)."""
        nothing = forms.unavailable(Reason.NOT_STARTED)
        values: dict[str, Any] = {name: nothing for name in MEASUREMENT_FIELDS}
        if materialization is not None:
            values["materialization_time_ns"] = materialization
        return cls(
            **values,
            cpu_time_scope=CpuTimeScope(cpu_time_scope),
            accounting_backend=AccountingBackend.NONE,
        )

    def measurement(self, name: str) -> Measurement:
        value = getattr(self, name)
        assert isinstance(value, Measurement)
        return value

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            name: self.measurement(name).to_json() for name in MEASUREMENT_FIELDS
        }
        out["version"] = self.version
        out["cpu_time_scope"] = self.cpu_time_scope.value
        out["peak_rss_scope"] = self.peak_rss_scope.value
        if self.timed_wall_includes is not None:
            out["timed_wall_includes"] = sorted(i.value for i in self.timed_wall_includes)
        if self.accounting_backend is not None:
            out["accounting_backend"] = self.accounting_backend.value
        return out

    def canonical_bytes(self) -> bytes:
        return canonical.dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> ExecutionMeasurements:
        """Parse a payload of any readable version; errors name the key path."""
        if not isinstance(obj, Mapping):
            raise PayloadError("$", f"payload must be an object, got {type(obj).__name__}")
        _check_keys(obj)
        version = _parse_version(obj["version"])
        values: dict[str, Any] = {name: _parse_form(name, obj[name]) for name in MEASUREMENT_FIELDS}
        return cls(
            **values,
            cpu_time_scope=_parse_enum("cpu_time_scope", obj["cpu_time_scope"], CpuTimeScope),
            peak_rss_scope=_parse_enum("peak_rss_scope", obj["peak_rss_scope"], PeakRssScope),
            timed_wall_includes=_parse_includes(obj["timed_wall_includes"])
            if "timed_wall_includes" in obj
            else None,
            accounting_backend=_parse_enum(
                "accounting_backend", obj["accounting_backend"], AccountingBackend
            )
            if "accounting_backend" in obj
            else None,
            version=version,
        )

    @classmethod
    def loads(cls, data: str | bytes) -> ExecutionMeasurements:
        try:
            obj = canonical.loads(data)
        except ValueError as exc:
            raise PayloadError("$", f"not strict JSON: {exc}") from exc
        return cls.from_json(obj)


def _check_keys(obj: Mapping[str, Any]) -> None:
    unknown = sorted(set(obj) - ALL_KEYS)
    if unknown:
        raise PayloadError(f"$.{unknown[0]}", "unknown key")
    for name in SCALAR_KEYS[:1] + MEASUREMENT_FIELDS + SCALAR_KEYS[1:]:
        if name not in obj:
            raise PayloadError(f"$.{name}", "missing key")


def _parse_version(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw not in READABLE_VERSIONS:
        raise PayloadError("$.version", f"unsupported payload version {raw!r}")
    return raw


def _parse_form(name: str, raw: Any) -> Measurement:
    if isinstance(raw, Mapping) and isinstance(raw.get("value"), int):
        value = raw["value"]
        if not isinstance(value, bool) and value < 0:
            raise PayloadError(f"$.{name}.value", f"negative measurement {value}")
    try:
        return forms.from_json(raw)
    except FormError as exc:
        raise PayloadError(f"$.{name}", str(exc)) from exc


def _parse_enum(name: str, raw: Any, enum: type[StrEnum]) -> Any:
    try:
        return enum(raw)
    except ValueError as exc:
        raise PayloadError(f"$.{name}", f"unknown value {raw!r}") from exc


def _parse_includes(raw: Any) -> frozenset[TimedWallInclusion]:
    path = "$.timed_wall_includes"
    if not isinstance(raw, list):
        raise PayloadError(path, "must be an array")
    items = [
        _parse_enum(f"timed_wall_includes[{i}]", v, TimedWallInclusion) for i, v in enumerate(raw)
    ]
    if len(set(items)) != len(items):
        raise PayloadError(path, "duplicate entries")
    return frozenset(items)


def _check_semantics(m: ExecutionMeasurements) -> None:
    if m.version not in READABLE_VERSIONS:
        raise PayloadError("$.version", f"unsupported payload version {m.version!r}")
    for name, rule in FIELD_RULES.items():
        _check_field_reason(name, m.measurement(name), rule)
    if m.cpu_time_scope not in CPU_SCOPES_BY_VERSION[m.version]:
        raise PayloadError(
            "$.cpu_time_scope",
            f"scope {m.cpu_time_scope.value!r} is not part of payload version {m.version}",
        )
    _check_backend(m)
    if m.timed_wall_time_ns.is_complete and not m.execute_request_time_ns.is_complete:
        raise PayloadError(
            "$.timed_wall_time_ns",
            "complete timed wall needs a complete execute request (it runs through its response)",
        )


def _check_field_reason(name: str, m: Measurement, rule: FieldRule) -> None:
    if m.status is Status.PARTIAL and m.reason not in rule.partial:
        raise PayloadError(f"$.{name}.reason", f"partial reason {m.reason} not allowed here")
    if m.status is Status.UNAVAILABLE and m.reason not in rule.unavailable:
        raise PayloadError(f"$.{name}.reason", f"unavailable reason {m.reason} not allowed here")


def _check_backend(m: ExecutionMeasurements) -> None:
    for name in RESOURCE_FIELDS:
        status = m.measurement(name).status
        if m.accounting_backend is AccountingBackend.PROC and status is Status.COMPLETE:
            raise PayloadError(
                f"$.{name}.status", "/proc accounting cannot prove complete process-tree accounting"
            )
        if m.accounting_backend is AccountingBackend.NONE and status is not Status.UNAVAILABLE:
            raise PayloadError(f"$.{name}.status", "no accounting backend ran, so no value exists")


def observation_timing(
    m: ExecutionMeasurements, implementation_time_ns: int | None = None
) -> dict[str, Any]:
    """The observation record's ``timing`` block, derived from the payload.

    The scalar wall and evaluation times equal their complete measurements exactly; an
    observation without them cannot exist. CPU and peak RSS promise complete process-tree
    accounting, so anything less than complete leaves them null.
    """
    for name in ("timed_wall_time_ns", "evaluation_time_ns"):
        if not m.measurement(name).is_complete:
            raise PayloadError(f"$.{name}", "an observation needs a complete measurement")
    if implementation_time_ns is not None and (
        isinstance(implementation_time_ns, bool)
        or not 0 <= implementation_time_ns <= canonical.SAFE_INTEGER_MAX
    ):
        raise PayloadError("implementation_time_ns", f"invalid value {implementation_time_ns!r}")
    return {
        "primary_time": "timed_wall_time",
        "timed_wall_time_ns": m.timed_wall_time_ns.value,
        "implementation_time_ns": implementation_time_ns,
        "evaluation_time_ns": m.evaluation_time_ns.value,
        "cpu_time_ns": _complete_or_none(m.cpu_time_ns),
        "peak_rss_bytes": _complete_or_none(m.peak_rss_bytes),
    }


def _complete_or_none(m: Measurement) -> int | None:
    return m.value if m.is_complete else None
