"""The shape of a check list an adapter grades, checked at load time: a driver-path task's
``driver.checks`` (``driver_tasks``) and the agent-browser tool probe's ``AB_CHECKS``
(``ab_probe_tasks``) are the same kind of list with their own kinds, so one validator serves
both and every problem names the JSON path of the key at fault.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Problem = tuple[str, str]  # (JSON path, message)


@dataclass(frozen=True)
class CheckFamily:
    """One family of checks: each kind's required keys (besides ``kind``), the key under which
    an ``any_of`` check lists its alternatives, and the other keys any check may carry (None:
    any key is let through, for an adapter that reads only what it knows)."""

    kinds: Mapping[str, frozenset[str]]
    alternatives_key: str
    also_allowed: frozenset[str] | None


def check_problems(
    check: Any, path: str, step_count: int, family: CheckFamily
) -> Iterator[Problem]:
    """What is wrong with one check at ``path`` of a task with ``step_count`` steps."""
    if not isinstance(check, Mapping):
        yield path, "a check must be an object"
        return
    kind = check.get("kind")
    required = family.kinds.get(str(kind))
    if required is None:
        yield f"{path}.kind", f"unknown check kind {kind!r}; one of {sorted(family.kinds)}"
        return
    for key in sorted(required - set(check)):
        yield f"{path}.{key}", f"required key missing for a {kind} check"
    unknown = _unknown_keys(check, required, family)
    for key in unknown:
        yield f"{path}.{key}", f"unknown key for a {kind} check"
    if "step" in check and "step" not in unknown:
        step = check["step"]
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < step_count:
            yield f"{path}.step", f"must index one of the {step_count} steps"
    if kind == "any_of":
        yield from _alternatives_problems(check, path, step_count, family)


def _unknown_keys(
    check: Mapping[str, Any], required: frozenset[str], family: CheckFamily
) -> list[str]:
    if family.also_allowed is None:
        return []
    return [k for k in check if k != "kind" and k not in required | family.also_allowed]


def _alternatives_problems(
    check: Mapping[str, Any], path: str, step_count: int, family: CheckFamily
) -> Iterator[Problem]:
    key = family.alternatives_key
    parts = check.get(key)
    if not isinstance(parts, list) or not parts:
        yield f"{path}.{key}", "must be a non-empty list of checks"
        return
    for index, part in enumerate(parts):
        yield from check_problems(part, f"{path}.{key}[{index}]", step_count, family)
