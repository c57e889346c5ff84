"""Identity records with the Rust metewand's version-1 field sets (its ``docs/identities.md``).

An identity is ``mw1-<kind>-<sha256(kind ‖ NUL ‖ canonical JSON)>``. A *record* hashes
``{"version": 1, <its fields>}``; a *resource* (schema, problem contract, source bundle,
artifact) hashes ``{"version": 1, "value": <resource>}``. ``RECORD_FIELDS`` is the table of every
record kind and its exact field set — the one place the recipes live — and ``record`` refuses a
body with a field missing or extra, so a planner that forgets a field fails instead of hashing
something the Rust tools would not. Optional values are explicit ``null``; sets (an
implementation's problem contracts and capabilities) are sorted; dependencies are full typed
identity strings; durations are ``{"seconds", "nanoseconds"}``.

Run rows record which recipe their identities follow (``IDENTITY_RECIPE``); rows written before
these recipes carry none and read as recipe 1 (``records.identity_recipe``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from metewand import canonical
from metewand.errors import MetewandError

IDENTITY_VERSION = 1  # the mw1 representation, as in the Rust project
# Which record bodies the mw1 ids of a run were built from: 1 = metewand's own bodies before it
# adopted the Rust field sets (runs written until then), 2 = the Rust project's v1 field sets.
IDENTITY_RECIPE = 2
LEGACY_IDENTITY_RECIPE = 1
SCHEDULING_PRIORITY_DOMAIN = b"metewand-scheduling-priority-v1"
RESOURCE_KINDS = ("schema", "problem-contract", "source-bundle", "artifact")

RECORD_FIELDS: dict[str, tuple[str, ...]] = {
    "environment-definition": ("name", "definition"),
    "worker-definition": ("launch", "args", "environment", "protocol_transport"),
    "dataset-definition": (
        "name",
        "parameter_schema",
        "parameter_defaults",
        "output_schema",
        "definition",
    ),
    "problem-definition": ("name", "contract", "parameter_defaults", "evaluator"),
    "implementation-definition": (
        "name",
        "worker",
        "problem_contracts",
        "parameter_schema",
        "parameter_defaults",
        "capabilities",
    ),
    "execution-policy": (
        "name",
        "cpus",
        "threads",
        "memory",
        "network",
        "worker_reuse",
        "warmup_runs",
        "timeout",
        "timing_scope",
        "primary_time",
        "run_order",
        "enforcement",
    ),
    "observation-policy": ("name", "kind"),
    "dataset-configuration": ("definition", "parameters", "seed"),
    "problem-configuration": ("definition", "parameters"),
    "implementation-configuration": ("definition", "parameters", "environment"),
    "dataset-instance": ("configuration", "artifact", "output_schema"),
    "problem-instance": ("dataset", "configuration"),
    "logical-candidate": (
        "dataset_configuration",
        "problem_configuration",
        "implementation_configuration",
        "execution_policy",
        "observation_policy",
    ),
    "logical-specification": (
        "kind",
        "candidate",
        "scientific_budget",
        "implementation_repetition",
        "implementation_seed",
    ),
    "logical-observation-slot": ("specification", "measurement_index"),
    "logical-attempt-slot": ("specification", "role", "scheduling_priority"),
    "resolved-environment": ("definition", "fingerprint"),
    "resolved-launch": (
        "environment",
        "program",
        "args",
        "environment_variables",
        "working_directory",
    ),
    "executor-definition": ("kind", "configuration"),
    "resolved-worker": ("source_bundle", "environment", "launch"),
    "resolved-specification": (
        "kind",
        "logical_specification",
        "problem_instance",
        "implementation",
        "evaluator",
        "executor",
        "wire_protocol_version",
        "execution_semantics_version",
    ),
    "resolved-observation-slot": ("logical_slot", "specification"),
    "resolved-attempt-slot": ("logical_slot", "specification"),
    "observation": ("slot", "producing_attempt", "result", "metrics", "timing", "completion"),
    "attempt": ("slot", "retry_index"),
}
# Nested objects whose members are sets: sorted before hashing.
_SORTED_SETS = {"implementation-definition": ("problem_contracts", "capabilities")}


class IdentityError(MetewandError, ValueError):
    """A record body does not have its kind's field set (a planner bug: exit 1)."""


def record_body(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """``{"version": 1, **fields}`` after checking ``fields`` against ``RECORD_FIELDS``."""
    expected = RECORD_FIELDS.get(kind)
    if expected is None:
        raise IdentityError(f"no record kind {kind!r}")
    if set(fields) != set(expected):
        missing = sorted(set(expected) - set(fields))
        extra = sorted(set(fields) - set(expected))
        raise IdentityError(f"{kind}: missing {missing}, unexpected {extra}")
    body = dict(fields)
    for key in _SORTED_SETS.get(kind, ()):
        body[key] = sorted(body[key])
    return {"version": IDENTITY_VERSION, **body}


def record(kind: str, /, **fields: Any) -> str:
    """The typed identity of one record."""
    return canonical.identity(kind, record_body(kind, fields))


def resource(kind: str, value: Any) -> str:
    """The typed identity of one canonical resource."""
    if kind not in RESOURCE_KINDS:
        raise IdentityError(f"{kind!r} is not a resource kind")
    return canonical.identity(kind, {"version": IDENTITY_VERSION, "value": value})


def seed_record(value: int, digest_hex: str) -> dict[str, Any]:
    return {"value": value, "derivation_digest": digest_hex}


def duration(nanoseconds: int) -> dict[str, int]:
    seconds, rest = divmod(nanoseconds, 1_000_000_000)
    return {"seconds": seconds, "nanoseconds": rest}


def worker_fields(
    launch: dict[str, Any], args: list[str], environment: str, protocol_transport: str | None
) -> dict[str, Any]:
    """A worker definition as it nests in dataset, problem and implementation definitions."""
    return {
        "launch": launch,
        "args": list(args),
        "environment": environment,
        "protocol_transport": protocol_transport,
    }


def interpreted_launch(runner: str, entrypoint: str, source_bundle: str) -> dict[str, Any]:
    return {
        "kind": "interpreted",
        "runner": runner,
        "entrypoint": entrypoint,
        "source_bundle": source_bundle,
    }


def command_launch(program: str, source_bundle: str | None) -> dict[str, Any]:
    return {"kind": "command", "program": program, "source_bundle": source_bundle}


def warmup_role(index: int) -> dict[str, Any]:
    return {"kind": "warmup", "warmup_index": index}


def measured_role(observation_slot: str) -> dict[str, Any]:
    return {"kind": "measured", "observation_slot": observation_slot}


def scheduling_priority(
    scheduling_digest_hex: str, role: dict[str, Any], specification: str
) -> str:
    """The 32-byte priority of one attempt slot (``docs/logical-planning.md``): a warm-up's
    anchor is the specification id, NUL and its index as a big-endian u64; a measured slot's is
    its observation-slot id."""
    if role["kind"] == "warmup":
        anchor = b"warmup\x00" + specification.encode() + b"\x00"
        anchor += int(role["warmup_index"]).to_bytes(8, "big")
    else:
        anchor = b"measured\x00" + str(role["observation_slot"]).encode()
    transcript = SCHEDULING_PRIORITY_DOMAIN + b"\x00" + bytes.fromhex(scheduling_digest_hex)
    return hashlib.sha256(transcript + b"\x00" + anchor).hexdigest()
