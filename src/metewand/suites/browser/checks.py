"""Inline check kinds (grader ``inline_assertions``) as a registry.

Each check reads the interpreter's ``saved`` values and returns a ``CheckResult``. The
registry also names each kind's required and optional keys, so the task validator can reject a
misspelt key before anything runs.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from metewand.suites.browser.cdp_match import matches
from metewand.suites.browser.steps import EVAL_EXCEPTIONS, EVENTS_OBSERVED, UNSUPPORTED
from metewand.suites.browser.substitute import MISSING, json_equal, lookup_saved, walk_path

Saved = Mapping[str, Any]


@dataclass(frozen=True)
class CheckResult:
    name: str
    kind: str
    status: str  # "pass" | "fail"
    evidence: str

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "evidence": self.evidence,
        }


Verdict = tuple[bool, str]
CheckFn = Callable[[Mapping[str, Any], Saved], Verdict]


@dataclass(frozen=True)
class CheckKind:
    kind: str
    required: frozenset[str]
    optional: frozenset[str]
    run: CheckFn


def _short(value: Any, limit: int = 200) -> str:
    text = "<missing>" if value is MISSING else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _at_path(check: Mapping[str, Any], saved: Saved) -> Any:
    value = lookup_saved(saved, str(check.get("name", "value")))
    return walk_path(value, str(check.get("path") or "")) if value is not MISSING else MISSING


def _as_json(value: Any) -> Any:
    """For comparisons a value that was never saved reads as null (the corpus relies on it:
    ``expected: null`` asserts that an optional event did not arrive)."""
    return None if value is MISSING else value


def _value(check: Mapping[str, Any], saved: Saved) -> Any:
    return saved.get(str(check.get("name", "value")), MISSING)


def no_error(check: Mapping[str, Any], saved: Saved) -> Verdict:
    # Reaching the grader means every required step succeeded.
    return True, "all required steps completed"


def event_observed(check: Mapping[str, Any], saved: Saved) -> Verdict:
    if "method" in check:
        seen = saved.get(EVENTS_OBSERVED, [])
        return check["method"] in seen, f"observed events: {_short(seen)}"
    value = _value(check, saved)
    return value not in (None, MISSING), f"saved {check.get('name')!r}: {_short(value)}"


# One test per comparison; each applies to a value found by path (``saved_path_*``) or saved
# under a name (``value_*``), so both families judge a value the same way.
ValueTest = Callable[[Mapping[str, Any], Any], bool]


def _truthy(check: Mapping[str, Any], value: Any) -> bool:
    return value is not MISSING and bool(value)


def _equals(check: Mapping[str, Any], value: Any) -> bool:
    return json_equal(check["expected"], _as_json(value))


def _contains_text(check: Mapping[str, Any], value: Any) -> bool:
    return isinstance(value, str) and str(check["expected"]) in value


def _one_of(check: Mapping[str, Any], value: Any) -> bool:
    return any(json_equal(alt, _as_json(value)) for alt in check["expected"])


def _judged(
    find: Callable[[Mapping[str, Any], Saved], Any], label: str, test: ValueTest
) -> CheckFn:
    def run(check: Mapping[str, Any], saved: Saved) -> Verdict:
        value = find(check, saved)
        return test(check, value), f"{label}: {_short(value)}"

    return run


saved_path_truthy = _judged(_at_path, "at path", _truthy)
saved_path_equals = _judged(_at_path, "at path", _equals)
saved_path_contains = _judged(_at_path, "at path", _contains_text)
saved_path_one_of = _judged(_at_path, "at path", _one_of)


def _contains(items: list[Any], expected: Any) -> bool:
    if isinstance(expected, Mapping):
        return any(matches(expected, item) for item in items)
    return any(json_equal(expected, item) for item in items)


def array_contains(check: Mapping[str, Any], saved: Saved) -> Verdict:
    value = _at_path(check, saved)
    ok = isinstance(value, list) and _contains(value, check["expected"])
    return ok, f"array: {_short(value)}"


def array_length(check: Mapping[str, Any], saved: Saved) -> Verdict:
    value = _at_path(check, saved)
    if not isinstance(value, list | str):
        return False, f"not a list or string: {_short(value)}"
    size = len(value)
    ok = (
        ("min" not in check or size >= check["min"])
        and ("max" not in check or size <= check["max"])
        and ("expected" not in check or size == check["expected"])
    )
    return ok, f"length {size}"


def array_match_contains(check: Mapping[str, Any], saved: Saved) -> Verdict:
    value = _at_path(check, saved)
    if not isinstance(value, list):
        return False, f"not a list: {_short(value)}"
    hits = [item for item in value if matches(check["match"], item)]
    if len(hits) != 1:
        return False, f"{len(hits)} elements match {_short(check['match'])} (need exactly 1)"
    inner = walk_path(hits[0], str(check["contains_path"]))
    ok = isinstance(inner, list) and _contains(inner, check["expected"])
    return ok, f"matched element's {check['contains_path']}: {_short(inner)}"


value_equals = _judged(_value, "value", _equals)
value_contains = _judged(_value, "value", _contains_text)
value_truthy = _judged(_value, "value", _truthy)


def value_type(check: Mapping[str, Any], saved: Saved) -> Verdict:
    found = saved.get(str(check.get("name", "value")) + "__type")
    return found == check["expected"], f"type: {found!r}"


def unsupported_observed(check: Mapping[str, Any], saved: Saved) -> Verdict:
    methods = [entry.get("method") for entry in saved.get(UNSUPPORTED, [])]
    return check["method"] in methods, f"rejected methods: {_short(methods)}"


def eval_has_exception(check: Mapping[str, Any], saved: Saved) -> Verdict:
    count = int(saved.get(EVAL_EXCEPTIONS, 0))
    return count > 0, f"results with exceptionDetails: {count}"


def eval_no_exception(check: Mapping[str, Any], saved: Saved) -> Verdict:
    count = int(saved.get(EVAL_EXCEPTIONS, 0))
    return count == 0, f"results with exceptionDetails: {count}"


def saved_body_text_equals(check: Mapping[str, Any], saved: Saved) -> Verdict:
    holder = _at_path(check, saved)
    if not isinstance(holder, Mapping) or not isinstance(holder.get("body"), str):
        return False, f"no body: {_short(holder)}"
    body = holder["body"]
    if holder.get("base64Encoded"):
        try:
            body = base64.b64decode(body).decode("utf-8", errors="replace")
        except binascii.Error as exc:
            return False, f"bad base64 body: {exc}"
    return body == check["expected"], f"body: {_short(body)}"


def _kind(name: str, run: CheckFn, required: str = "", optional: str = "") -> CheckKind:
    return CheckKind(
        name,
        frozenset({"kind", *required.split()}),
        frozenset({"label", *optional.split()}),
        run,
    )


CHECKS: Final[dict[str, CheckKind]] = {
    kind.kind: kind
    for kind in (
        _kind("no_error", no_error),
        _kind("event_observed", event_observed, "", "method name"),
        _kind("saved_path_truthy", saved_path_truthy, "name path"),
        _kind("saved_path_equals", saved_path_equals, "name path expected"),
        _kind("saved_path_contains", saved_path_contains, "name path expected"),
        _kind("saved_path_one_of", saved_path_one_of, "name path expected"),
        _kind("array_contains", array_contains, "name path expected"),
        _kind("array_length", array_length, "name", "path min max expected"),
        _kind(
            "array_match_contains", array_match_contains, "name path match contains_path expected"
        ),
        _kind("value_equals", value_equals, "expected", "name"),
        _kind("value_contains", value_contains, "expected", "name"),
        _kind("value_truthy", value_truthy, "", "name"),
        _kind("value_type", value_type, "expected", "name"),
        _kind("unsupported_observed", unsupported_observed, "method", "name"),
        _kind("eval_has_exception", eval_has_exception),
        _kind("eval_no_exception", eval_no_exception),
        _kind("saved_body_text_equals", saved_body_text_equals, "name expected", "path"),
    )
}


# Older raw-CDP tasks write an inline check as one bare string naming the check and its
# expectation: ``"value_equals_3"`` is ``value_equals`` 3 and ``"result_type_number"`` is
# ``value_type`` number, both on the value saved as ``value``. Each pattern reads into the
# object form; a bare string no pattern reads fails its check (it never refuses the run).
UNKNOWN_BARE_CHECK: Final = "unknown inline assertion"
JS_TYPES: Final = (
    "number",
    "string",
    "boolean",
    "object",
    "undefined",
    "bigint",
    "symbol",
    "function",
)
BARE_CHECKS: Final[
    tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], dict[str, Any]]], ...]
] = (
    (
        re.compile(r"value_equals_(-?\d+(?:\.\d+)?|true|false|null)"),
        lambda m: {"kind": "value_equals", "expected": json.loads(m[1])},
    ),
    (
        re.compile(r"result_type_(" + "|".join(JS_TYPES) + ")"),
        lambda m: {"kind": "value_type", "expected": m[1]},
    ),
)


def bare_check(text: str) -> dict[str, Any] | None:
    """The object form of a bare-string check, or None when no pattern reads it."""
    for pattern, build in BARE_CHECKS:
        match = pattern.fullmatch(text)
        if match:
            return {**build(match), "label": text}
    return None


def run_checks(checks: list[Any], saved: Saved) -> list[CheckResult]:
    """Grade every check; an empty list is a failing ``checks_declared`` (nothing was graded)."""
    if not checks:
        return [CheckResult("checks_declared", "checks_declared", "fail", "no checks declared")]
    results = []
    for check in checks:
        if isinstance(check, str):
            form = bare_check(check)
            if form is None:
                results.append(CheckResult(check, check, "fail", UNKNOWN_BARE_CHECK))
                continue
            check = form
        kind = str(check.get("kind"))
        name = str(check.get("label") or kind)
        spec = CHECKS.get(kind)
        if spec is None:
            results.append(CheckResult(name, kind, "fail", f"unknown check kind {kind!r}"))
            continue
        ok, evidence = spec.run(check, saved)
        results.append(CheckResult(name, kind, "pass" if ok else "fail", evidence))
    return results
