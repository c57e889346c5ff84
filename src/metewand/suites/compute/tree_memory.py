"""The kernel's memory high-water of a worker's whole process tree (a record of ours).

The document's ``peak_rss_bytes`` is the implementation process's VmHWM: resident pages of that
one process, partial ``process_only``. A cgroup's memory high-water is a different quantity: what
the kernel charged to the whole tree, anonymous memory plus page cache (a worker that writes a
150 MB scratch file is charged for the cached pages) plus kernel memory. Publishing it as
``peak_rss_bytes`` would misstate both, so it lives beside the payload at
``provenance.data.tree_memory`` with its own name, schema (``tree-memory``) and vectors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from metewand.measure import forms
from metewand.measure.forms import FormError, Measurement, Reason, Status
from metewand.suites.compute.payload import AccountingBackend, PayloadError

TREE_MEMORY_VERSION = 1
# What a cgroup memory controller charges (memory.peak / memory.max_usage_in_bytes).
CHARGED = ("anon", "page_cache", "kernel")
SCOPE = "worker_lifetime_through_execute"
PARTIAL_REASONS = frozenset({Reason.INTERRUPTED})
UNAVAILABLE_REASONS = frozenset(
    {
        Reason.NOT_STARTED,
        Reason.ACCOUNTING_UNAVAILABLE,
        Reason.UNSUPPORTED,  # no memory controller, the /proc backend, or not Linux
        Reason.OUT_OF_RANGE,
        Reason.PERMISSION_DENIED,
    }
)
KEYS = ("version", "kernel_tree_memory_high_water_bytes", "scope", "charged", "accounting_backend")


@dataclass(frozen=True)
class TreeMemory:
    high_water: Measurement
    accounting_backend: AccountingBackend
    version: int = TREE_MEMORY_VERSION

    def __post_init__(self) -> None:
        _check(self)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "kernel_tree_memory_high_water_bytes": self.high_water.to_json(),
            "scope": SCOPE,
            "charged": list(CHARGED),
            "accounting_backend": self.accounting_backend.value,
        }

    @classmethod
    def from_json(cls, obj: Any) -> TreeMemory:
        if not isinstance(obj, Mapping):
            raise PayloadError("$", f"tree memory must be an object, got {type(obj).__name__}")
        for key in sorted(set(obj) - set(KEYS)):
            raise PayloadError(f"$.{key}", "unknown key")
        for key in KEYS:
            if key not in obj:
                raise PayloadError(f"$.{key}", "missing key")
        if obj["version"] != TREE_MEMORY_VERSION or isinstance(obj["version"], bool):
            raise PayloadError("$.version", f"unsupported version {obj['version']!r}")
        if obj["scope"] != SCOPE:
            raise PayloadError("$.scope", f"unknown scope {obj['scope']!r}")
        if obj["charged"] != list(CHARGED):
            raise PayloadError("$.charged", f"must be {list(CHARGED)}")
        try:
            high_water = forms.from_json(obj["kernel_tree_memory_high_water_bytes"])
        except FormError as exc:
            raise PayloadError("$.kernel_tree_memory_high_water_bytes", str(exc)) from exc
        try:
            backend = AccountingBackend(obj["accounting_backend"])
        except ValueError as exc:
            raise PayloadError(
                "$.accounting_backend", f"unknown value {obj['accounting_backend']!r}"
            ) from exc
        return cls(high_water, backend)


def _check(t: TreeMemory) -> None:
    path = "$.kernel_tree_memory_high_water_bytes"
    m = t.high_water
    if m.status is Status.PARTIAL and m.reason not in PARTIAL_REASONS:
        raise PayloadError(f"{path}.reason", f"partial reason {m.reason} not allowed here")
    if m.status is Status.UNAVAILABLE and m.reason not in UNAVAILABLE_REASONS:
        raise PayloadError(f"{path}.reason", f"unavailable reason {m.reason} not allowed here")
    cgroup = t.accounting_backend in (AccountingBackend.CGROUP2, AccountingBackend.CGROUP1)
    if not cgroup and m.status is not Status.UNAVAILABLE:
        raise PayloadError(f"{path}.status", "only a cgroup memory controller measures the tree")
