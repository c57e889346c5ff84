"""Inline check kinds: the registry covers the corpus, and each kind grades as specified."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from browser_run_helpers import LEXBENCH
from metewand.suites.browser.adapter_attempt import is_adapter_task
from metewand.suites.browser.checks import CHECKS, UNKNOWN_BARE_CHECK, bare_check, run_checks
from metewand.suites.browser.steps import fresh_saved
from metewand.suites.browser.tasks import load_corpus

OWN_SUITE = Path(__file__).resolve().parents[1] / "src/metewand/data/browser_suite"


def _inline_kinds(root: Path) -> set[str]:
    """Check kinds of the tasks the suite grades itself (bare strings read into their object
    form). Driver-path tasks are left out: their adapter reports the checks (``script_reported``
    and ``driver.checks``), graded by adapter_attempt and pinned in test_browser_driver_run."""
    kinds = set()
    for task in load_corpus(root).tasks:
        if task.grader["kind"] == "inline_assertions" and not is_adapter_task(task):
            for check in task.grader["checks"]:
                form = bare_check(check) if isinstance(check, str) else check
                kinds.add(form["kind"] if form else f"unknown bare string {check!r}")
    return kinds


@pytest.mark.usefixtures("lexbench")
def test_registry_has_every_kind_the_peer_corpus_uses() -> None:
    used = _inline_kinds(LEXBENCH)
    assert len(used) >= 10
    assert used - set(CHECKS) == set()


@pytest.mark.skipif(not OWN_SUITE.is_dir(), reason="own suite not built yet")
def test_own_suite_uses_every_check_kind() -> None:
    assert _inline_kinds(OWN_SUITE) == set(CHECKS)


def grade(check: dict[str, Any], **saved: Any) -> str:
    state = fresh_saved()
    state.update(saved)
    [result] = run_checks([check], state)
    return result.status


AX = {
    "nodes": [
        {
            "role": {"value": "button"},
            "name": {"value": "Publish"},
            "properties": [{"name": "disabled", "value": {"value": True}}],
        },
        {"role": {"value": "button"}, "name": {"value": "Save"}, "properties": []},
    ]
}

CASES = [
    ({"kind": "no_error"}, {}, "pass"),
    (
        {"kind": "event_observed", "method": "Page.loadEventFired"},
        {"__events_observed__": ["Page.loadEventFired"]},
        "pass",
    ),
    ({"kind": "event_observed", "method": "Page.loadEventFired"}, {}, "fail"),
    ({"kind": "event_observed", "name": "ev"}, {"ev": {"a": 1}}, "pass"),
    ({"kind": "event_observed", "name": "ev"}, {"ev": None}, "fail"),
    ({"kind": "saved_path_truthy", "name": "r", "path": "a.0.b"}, {"r": {"a": [{"b": 2}]}}, "pass"),
    ({"kind": "saved_path_truthy", "name": "r", "path": "a.1.b"}, {"r": {"a": [{"b": 2}]}}, "fail"),
    (
        {"kind": "saved_path_equals", "name": "r", "path": "x", "expected": 1},
        {"r": {"x": 1.0}},
        "pass",
    ),
    (
        {"kind": "saved_path_equals", "name": "r", "path": "x", "expected": 1},
        {"r": {"x": True}},
        "fail",
    ),
    (
        {"kind": "saved_path_contains", "name": "r", "path": "p", "expected": "Chr"},
        {"r": {"p": "HeadlessChrome/1"}},
        "pass",
    ),
    (
        {"kind": "saved_path_one_of", "name": "r", "path": "s", "expected": ["a", "b"]},
        {"r": {"s": "b"}},
        "pass",
    ),
    (
        {"kind": "saved_path_one_of", "name": "r", "path": "s", "expected": ["a", "b"]},
        {"r": {"s": "c"}},
        "fail",
    ),
    (
        {
            "kind": "array_contains",
            "name": "ax",
            "path": "nodes",
            "expected": {"name": {"value": "Save"}},
        },
        {"ax": AX},
        "pass",
    ),
    (
        {"kind": "array_contains", "name": "r", "path": "l", "expected": 3},
        {"r": {"l": [1, 2]}},
        "fail",
    ),
    ({"kind": "array_length", "name": "r", "path": "l", "min": 2}, {"r": {"l": [1, 2]}}, "pass"),
    ({"kind": "array_length", "name": "r", "path": "l", "max": 1}, {"r": {"l": [1, 2]}}, "fail"),
    (
        {"kind": "array_length", "name": "r", "path": "s", "expected": 3},
        {"r": {"s": "abc"}},
        "pass",
    ),
    (
        {
            "kind": "array_match_contains",
            "name": "ax",
            "path": "nodes",
            "match": {"name": {"value": "Publish"}},
            "contains_path": "properties",
            "expected": {"name": "disabled", "value": {"value": True}},
        },
        {"ax": AX},
        "pass",
    ),
    (
        {
            "kind": "array_match_contains",
            "name": "ax",
            "path": "nodes",
            "match": {"role": {"value": "button"}},
            "contains_path": "properties",
            "expected": {"name": "disabled"},
        },
        {"ax": AX},
        "fail",
    ),  # two elements match
    ({"kind": "value_equals", "expected": 42}, {"value": 42}, "pass"),
    ({"kind": "value_equals", "name": "v", "expected": "42"}, {"v": 42}, "fail"),
    ({"kind": "value_contains", "name": "v", "expected": "ell"}, {"v": "hello"}, "pass"),
    ({"kind": "value_truthy", "name": "v"}, {"v": 0}, "fail"),
    (
        {"kind": "value_type", "name": "v", "expected": "number"},
        {"v": 1, "v__type": "number"},
        "pass",
    ),
    (
        {"kind": "unsupported_observed", "method": "Foo.bar"},
        {"__unsupported__": [{"method": "Foo.bar", "class": "unsupported"}]},
        "pass",
    ),
    ({"kind": "unsupported_observed", "method": "Foo.bar"}, {}, "fail"),
    ({"kind": "eval_has_exception"}, {"__eval_exception_count__": 1}, "pass"),
    ({"kind": "eval_no_exception"}, {"__eval_exception_count__": 1}, "fail"),
    (
        {"kind": "saved_body_text_equals", "name": "b", "expected": "hi"},
        {"b": {"body": "aGk=", "base64Encoded": True}},
        "pass",
    ),
    (
        {"kind": "saved_body_text_equals", "name": "b", "expected": "hi"},
        {"b": {"body": "ho", "base64Encoded": False}},
        "fail",
    ),
]


@pytest.mark.parametrize(("check", "saved", "expected"), CASES)
def test_check_semantics(check: dict[str, Any], saved: dict[str, Any], expected: str) -> None:
    assert grade(check, **saved) == expected


def test_every_registered_kind_has_a_passing_and_a_semantic_case() -> None:
    assert {c[0]["kind"] for c in CASES} == set(CHECKS)


def test_save_as_raw_result_is_preferred_for_paths() -> None:
    saved = {"doc": 5, "doc__raw": {"root": {"nodeId": 7}}}
    check = {"kind": "saved_path_equals", "name": "doc", "path": "root.nodeId", "expected": 7}
    assert grade(check, **saved) == "pass"


def test_unknown_kind_and_empty_list_fail() -> None:
    [unknown] = run_checks([{"kind": "mystery"}], fresh_saved())
    [empty] = run_checks([], fresh_saved())
    assert (unknown.status, empty.name, empty.status) == ("fail", "checks_declared", "fail")


def test_never_saved_value_equals_null() -> None:
    # an optional event wait that timed out saved nothing; the corpus asserts it with null
    check = {"kind": "saved_path_equals", "name": "paused2", "path": None, "expected": None}
    assert grade(check) == "pass"
    assert grade({**check, "expected": 1}) == "fail"


BARE_CASES = [
    ("value_equals_3", {"value": 3}, "pass", "value_equals"),
    ("value_equals_3", {"value": 4}, "fail", "value_equals"),
    ("value_equals_3", {"value": "3"}, "fail", "value_equals"),
    ("value_equals_-1.5", {"value": -1.5}, "pass", "value_equals"),
    ("value_equals_true", {"value": True}, "pass", "value_equals"),
    ("value_equals_null", {}, "pass", "value_equals"),  # never saved reads as null
    ("result_type_number", {"value": 3, "value__type": "number"}, "pass", "value_type"),
    ("result_type_number", {"value": "3", "value__type": "string"}, "fail", "value_type"),
    ("result_type_undefined", {"value__type": "undefined"}, "pass", "value_type"),
]


@pytest.mark.parametrize(("text", "saved", "status", "kind"), BARE_CASES)
def test_bare_string_checks_read_as_their_object_form(
    text: str, saved: dict[str, Any], status: str, kind: str
) -> None:
    state = fresh_saved()
    state.update(saved)
    [result] = run_checks([text], state)
    assert (result.name, result.kind, result.status) == (text, kind, status)


@pytest.mark.parametrize(
    "text", ["value_equals_three", "result_type_num", "script_reported", "value_equals_", ""]
)
def test_unknown_bare_string_fails_its_check_only(text: str) -> None:
    state = fresh_saved()
    state.update({"value": 3, "value__type": "number"})
    known, unknown = run_checks(["value_equals_3", text], state)
    assert known.status == "pass"
    assert (unknown.name, unknown.status, unknown.evidence) == (text, "fail", UNKNOWN_BARE_CHECK)
