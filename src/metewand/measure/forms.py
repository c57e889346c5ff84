"""The three measurement forms: complete, partial (value + reason), unavailable (reason).

A value that was not measured is never 0: it is ``unavailable`` with a reason. Zero is a value.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple

from metewand.canonical import SAFE_INTEGER_MAX
from metewand.errors import MetewandError


class Status(StrEnum):
    COMPLETE = "complete"
    PARTIAL = "partial"
    UNAVAILABLE = "unavailable"


class Reason(StrEnum):
    """Why a value is partial or unavailable (both source documents' vocabulary)."""

    INTERRUPTED = "interrupted"  # partial: observed before an exchange failed / timed out
    PROCESS_ONLY = "process_only"  # partial: excludes descendants
    NOT_STARTED = "not_started"  # unavailable: the phase or accounting never began
    ACCOUNTING_UNAVAILABLE = "accounting_unavailable"  # files missing or subject gone
    UNSUPPORTED = "unsupported"  # platform cannot measure it
    OUT_OF_RANGE = "out_of_range"  # outside the canonical-JSON safe-integer range
    CACHE_HIT = "cache_hit"  # reused persistent construction; not newly measured
    PROVIDED_DATASET = "provided_dataset"  # no generator ran
    PERMISSION_DENIED = "permission_denied"  # the kernel refused the read
    SAMPLER_FAULT = "sampler_fault"  # the observer failed; functional status untouched


PARTIAL_REASONS = frozenset({Reason.INTERRUPTED, Reason.PROCESS_ONLY})
UNAVAILABLE_REASONS = frozenset(set(Reason) - {Reason.PROCESS_ONLY})


class QualityFlag(StrEnum):
    """Measurement-quality flags; they never change a functional status."""

    PROC_TREE_CHILD_EXIT_LOSS_RISK = "proc_tree_child_exit_loss_risk"
    PSS_ZERO_ADDRESS_SPACE_PROCESS = "pss_zero_address_space_process"
    BASELINE_END_ONLY = "baseline_end_only"
    PSS_SCAN_RETRIED = "pss_scan_retried"
    PSS_REUSED_UNCHANGED = "pss_reused_unchanged"  # some processes kept their last PSS
    PSS_UNAVAILABLE = "pss_unavailable"
    SAMPLER_FAULT = "sampler_fault"
    PEAK_MISSED_BY_SAMPLER = "peak_missed_by_sampler"
    CGROUP_MEMORY_UNAVAILABLE = "cgroup_memory_unavailable"
    CPU_ACCOUNTING_FALLBACK = "cpu_accounting_fallback"


class FormError(MetewandError, ValueError):
    """A measurement object that contradicts the form rules."""


# A NamedTuple, not a dataclass: this module is on measure's start-up path, where creating a
# dataclass compiles its methods (~0.4 ms each) and the dataclasses module loads inspect (~7 ms).
class _Fields(NamedTuple):
    status: Status
    value: int | None = None
    reason: Reason | None = None
    source: str | None = None  # which backend produced it (not part of the wire form)


class Measurement(_Fields):
    __slots__ = ()

    def __new__(
        cls,
        status: Status,
        value: int | None = None,
        reason: Reason | None = None,
        source: str | None = None,
    ) -> Measurement:
        _check(status, value, reason)
        return super().__new__(cls, status, value, reason, source)

    @property
    def has_value(self) -> bool:
        return self.value is not None

    @property
    def is_complete(self) -> bool:
        return self.status is Status.COMPLETE

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status.value}
        if self.value is not None:
            out["value"] = self.value
        if self.reason is not None:
            out["reason"] = self.reason.value
        return out

    def to_json_with_source(self) -> dict[str, Any]:
        out = self.to_json()
        if self.source is not None:
            out["source"] = self.source
        return out


def _check(status: Status, value: int | None, reason: Reason | None) -> None:
    if not isinstance(status, Status):
        raise FormError(f"unknown status {status!r}")
    if status is Status.UNAVAILABLE:
        if value is not None:
            raise FormError("unavailable measurement cannot carry a value")
        if reason not in UNAVAILABLE_REASONS:
            raise FormError(f"unavailable needs a reason, got {reason!r}")
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormError(f"{status.value} measurement needs an integer value, got {value!r}")
    if value < 0 or value > SAFE_INTEGER_MAX:
        raise FormError(f"value {value} outside [0, {SAFE_INTEGER_MAX}]")
    if status is Status.COMPLETE and reason is not None:
        raise FormError("complete measurement cannot carry a reason")
    if status is Status.PARTIAL and reason not in PARTIAL_REASONS:
        raise FormError(f"partial needs reason interrupted or process_only, got {reason!r}")


def _ranged(value: int, make: Any) -> Measurement:
    if value < 0:
        raise FormError(f"negative measurement {value}")
    if value > SAFE_INTEGER_MAX:
        return Measurement(Status.UNAVAILABLE, reason=Reason.OUT_OF_RANGE)
    return make()


_new_fields = tuple.__new__  # a form whose fields are known valid, without re-checking them


def complete(value: int, source: str | None = None) -> Measurement:
    v = int(value)
    if 0 <= v <= SAFE_INTEGER_MAX:
        # what _check would accept: an int in range, complete, no reason. Phase marks decode
        # ~150 of these per browser attempt: 0.75 us each this way, 1.9 us through the checks.
        return _new_fields(Measurement, (Status.COMPLETE, v, None, source))
    return _ranged(v, lambda: Measurement(Status.COMPLETE, v, None, source))


def partial(value: int, reason: Reason, source: str | None = None) -> Measurement:
    v = int(value)
    return _ranged(v, lambda: Measurement(Status.PARTIAL, v, _reason(reason), source))


def unavailable(reason: Reason, source: str | None = None) -> Measurement:
    return Measurement(Status.UNAVAILABLE, None, _reason(reason), source)


def _reason(reason: Reason | str) -> Reason:
    # a Reason as it is (the common case: an enum call costs more than the rest of a form)
    return reason if isinstance(reason, Reason) else Reason(reason)


def from_json(obj: Any) -> Measurement:
    """Parse a wire form, rejecting unknown keys and contradictions."""
    if not isinstance(obj, dict):
        raise FormError(f"measurement must be an object, got {type(obj).__name__}")
    extra = set(obj) - {"status", "value", "reason"}
    if extra:
        raise FormError(f"unknown keys {sorted(extra)}")
    if "status" not in obj:
        raise FormError("missing key 'status'")
    try:
        status = Status(obj["status"])
    except ValueError as exc:
        raise FormError(f"unknown status {obj['status']!r}") from exc
    reason_raw = obj.get("reason")
    try:
        reason = Reason(reason_raw) if reason_raw is not None else None
    except ValueError as exc:
        raise FormError(f"unknown reason {reason_raw!r}") from exc
    if "reason" in obj and reason_raw is None:
        raise FormError("reason must be a string when present")
    if "value" in obj and obj["value"] is None:
        raise FormError("value must be an integer when present")
    return Measurement(status, obj.get("value"), reason)
