"""Placeholder substitution and saved-value lookup shared by steps and checks.

Semantics follow the corpus format: a string that is exactly ``{saved:PATH}`` is replaced by the
saved value (keeping its JSON type); then ``{fixture_url}``, ``{fixture_path}`` and
``{artifact_dir}`` are replaced literally inside any string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SAVED_WHOLE = re.compile(r"^\{saved:([^{}]+)\}$")
RUNNER_TOKENS = ("fixture_url", "fixture_path", "artifact_dir")
MISSING = object()


@dataclass(frozen=True)
class RunnerTokens:
    """Values of the runner tokens for one attempt."""

    fixture_url: str
    fixture_path: str
    artifact_dir: str

    def as_pairs(self) -> list[tuple[str, str]]:
        return [("{" + name + "}", str(getattr(self, name))) for name in RUNNER_TOKENS]


def lookup_saved(saved: Mapping[str, Any], path: str) -> Any:
    """Resolve ``name.a.b.0``; the head prefers ``name__raw`` (the whole result of a save_as step).

    Returns ``MISSING`` when any segment is absent.
    """
    head, _, rest = path.partition(".")
    if head + "__raw" in saved:
        value: Any = saved[head + "__raw"]
    elif head in saved:
        value = saved[head]
    else:
        return MISSING
    return walk_path(value, rest)


def walk_path(value: Any, path: str) -> Any:
    """Follow a dotted path through dicts (keys) and lists (numeric segments)."""
    if not path:
        return value
    for segment in path.split("."):
        if isinstance(value, Mapping) and segment in value:
            value = value[segment]
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            return MISSING
    return value


def substitute(value: Any, saved: Mapping[str, Any], tokens: RunnerTokens) -> Any:
    """Return a copy of ``value`` with every placeholder replaced (recursively)."""
    if isinstance(value, str):
        return _substitute_string(value, saved, tokens)
    if isinstance(value, list):
        return [substitute(item, saved, tokens) for item in value]
    if isinstance(value, Mapping):
        return {key: substitute(item, saved, tokens) for key, item in value.items()}
    return value


def _substitute_string(text: str, saved: Mapping[str, Any], tokens: RunnerTokens) -> Any:
    whole = SAVED_WHOLE.match(text)
    if whole:
        found = lookup_saved(saved, whole.group(1))
        # An unresolved reference becomes null: the command then fails as the engine decides.
        return None if found is MISSING else found
    for token, replacement in tokens.as_pairs():
        text = text.replace(token, replacement)
    return text


def json_equal(left: Any, right: Any) -> bool:
    """Equality as JSON sees it: booleans are not numbers, 1 == 1.0."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            json_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return set(left) == set(right) and all(json_equal(left[k], right[k]) for k in left)
    return bool(left == right)
