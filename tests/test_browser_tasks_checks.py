"""Inline check kinds: the registry covers the corpus, and each kind grades as specified."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metewand.suites.browser.checks import CHECKS, run_checks
from metewand.suites.browser.steps import fresh_saved
from shared_paths import LEXBENCH

OWN_SUITE = Path(__file__).resolve().parents[1] / "src/metewand/data/browser_suite"


def _inline_kinds(root: Path) -> set[str]:
    kinds = set()
    for path in root.glob("tasks/**/*.json"):
        grader = json.loads(path.read_text())["grader"]
        if grader["kind"] == "inline_assertions":
            kinds.update(check["kind"] for check in grader["checks"])
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


AX = {"nodes": [
    {"role": {"value": "button"}, "name": {"value": "Publish"},
     "properties": [{"name": "disabled", "value": {"value": True}}]},
    {"role": {"value": "button"}, "name": {"value": "Save"}, "properties": []},
]}  # fmt: skip

CASES = [
    ({"kind": "no_error"}, {}, "pass"),
    ({"kind": "event_observed", "method": "Page.loadEventFired"},
     {"__events_observed__": ["Page.loadEventFired"]}, "pass"),
    ({"kind": "event_observed", "method": "Page.loadEventFired"}, {}, "fail"),
    ({"kind": "event_observed", "name": "ev"}, {"ev": {"a": 1}}, "pass"),
    ({"kind": "event_observed", "name": "ev"}, {"ev": None}, "fail"),
    ({"kind": "saved_path_truthy", "name": "r", "path": "a.0.b"}, {"r": {"a": [{"b": 2}]}}, "pass"),
    ({"kind": "saved_path_truthy", "name": "r", "path": "a.1.b"}, {"r": {"a": [{"b": 2}]}}, "fail"),
    ({"kind": "saved_path_equals", "name": "r", "path": "x", "expected": 1}, {"r": {"x": 1.0}}, "pass"),
    ({"kind": "saved_path_equals", "name": "r", "path": "x", "expected": 1}, {"r": {"x": True}}, "fail"),
    ({"kind": "saved_path_contains", "name": "r", "path": "p", "expected": "Chr"},
     {"r": {"p": "HeadlessChrome/1"}}, "pass"),
    ({"kind": "saved_path_one_of", "name": "r", "path": "s", "expected": ["a", "b"]},
     {"r": {"s": "b"}}, "pass"),
    ({"kind": "saved_path_one_of", "name": "r", "path": "s", "expected": ["a", "b"]},
     {"r": {"s": "c"}}, "fail"),
    ({"kind": "array_contains", "name": "ax", "path": "nodes",
      "expected": {"name": {"value": "Save"}}}, {"ax": AX}, "pass"),
    ({"kind": "array_contains", "name": "r", "path": "l", "expected": 3}, {"r": {"l": [1, 2]}}, "fail"),
    ({"kind": "array_length", "name": "r", "path": "l", "min": 2}, {"r": {"l": [1, 2]}}, "pass"),
    ({"kind": "array_length", "name": "r", "path": "l", "max": 1}, {"r": {"l": [1, 2]}}, "fail"),
    ({"kind": "array_length", "name": "r", "path": "s", "expected": 3}, {"r": {"s": "abc"}}, "pass"),
    ({"kind": "array_match_contains", "name": "ax", "path": "nodes",
      "match": {"name": {"value": "Publish"}}, "contains_path": "properties",
      "expected": {"name": "disabled", "value": {"value": True}}}, {"ax": AX}, "pass"),
    ({"kind": "array_match_contains", "name": "ax", "path": "nodes",
      "match": {"role": {"value": "button"}}, "contains_path": "properties",
      "expected": {"name": "disabled"}}, {"ax": AX}, "fail"),  # two elements match
    ({"kind": "value_equals", "expected": 42}, {"value": 42}, "pass"),
    ({"kind": "value_equals", "name": "v", "expected": "42"}, {"v": 42}, "fail"),
    ({"kind": "value_contains", "name": "v", "expected": "ell"}, {"v": "hello"}, "pass"),
    ({"kind": "value_truthy", "name": "v"}, {"v": 0}, "fail"),
    ({"kind": "value_type", "name": "v", "expected": "number"}, {"v": 1, "v__type": "number"}, "pass"),
    ({"kind": "unsupported_observed", "method": "Foo.bar"},
     {"__unsupported__": [{"method": "Foo.bar", "class": "unsupported"}]}, "pass"),
    ({"kind": "unsupported_observed", "method": "Foo.bar"}, {}, "fail"),
    ({"kind": "eval_has_exception"}, {"__eval_exception_count__": 1}, "pass"),
    ({"kind": "eval_no_exception"}, {"__eval_exception_count__": 1}, "fail"),
    ({"kind": "saved_body_text_equals", "name": "b", "expected": "hi"},
     {"b": {"body": "aGk=", "base64Encoded": True}}, "pass"),
    ({"kind": "saved_body_text_equals", "name": "b", "expected": "hi"},
     {"b": {"body": "ho", "base64Encoded": False}}, "fail"),
]  # fmt: skip


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
