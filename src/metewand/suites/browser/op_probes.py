"""One probe per op of the driver vocabulary (``drivers/ops.json``): the steps that exercise it on
a small fixture page of its family (``data/driver_ops/fixtures``) and the checks that prove its
effect, read back through the page where the op changes it.

A probe's steps run after ``new_page`` + ``goto`` of its page; its checks name steps by their
index inside the probe and saved values by local names. ``cell_task`` makes the task of one
(op, driver path) cell; ``family_task`` joins the probes of several ops on one page into one task
(indices shifted, saved names prefixed with the op) so a test can prove a family per attempt.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from metewand.suites.browser.driver_registry import DRIVER_PATHS

FIXTURES: Final = Path(__file__).resolve().parents[2] / "data" / "driver_ops" / "fixtures"

Step = dict[str, Any]
Check = dict[str, Any]


@dataclass(frozen=True)
class Probe:
    page: str
    steps: tuple[Step, ...]
    checks: tuple[Check, ...]


def _eq(name: str, expected: str) -> Check:
    return {"kind": "saved_equals", "name": name, "expected": expected}


def _has(name: str, expected: str) -> Check:
    return {"kind": "saved_contains", "name": name, "expected": expected}


def _ok(step: int) -> Check:
    return {"kind": "step_ok", "step": step}


def _ev(expression: str, name: str) -> Step:
    return {"op": "evaluate", "expression": expression, "save_as": name}


def _wait(expression: str) -> Step:
    return {"op": "wait_for_function", "expression": expression, "timeout_ms": 5000}


def _text_is(element: str, text: str) -> str:
    return f"document.getElementById({json.dumps(element)}).textContent === {json.dumps(text)}"


def _p(page: str, steps: list[Step], checks: list[Check]) -> Probe:
    return Probe(page, tuple(steps), tuple(checks))


FORMS, NAV, FRAMES, DIALOGS, NET = (
    "/ops/forms",
    "/ops/nav-one",
    "/ops/frames",
    "/ops/dialogs",
    "/ops/net",
)
CONSOLE, A11Y = "/ops/console", "/ops/a11y"
VALUE = "document.getElementById('{}').value"
ONE: Final = {"op": "goto", "url": "{fixture_origin}/ops/nav-one"}
TWO: Final = {"op": "goto", "url": "{fixture_origin}/ops/nav-two"}

PROBES: Final[dict[str, Probe]] = {
    # pages and navigation
    "new_page": _p(
        NAV,
        [
            {"op": "new_page"},
            {"op": "goto", "url": "{fixture_origin}/ops/nav-two"},
            _ev("document.title", "t"),
        ],
        [_ok(0), _eq("t", "Ops nav two")],
    ),
    "close_page": _p(
        NAV,
        [
            {"op": "new_page"},
            ONE,
            {"op": "new_page"},
            TWO,
            {"op": "close_page"},
            _ev("document.title", "t"),
        ],
        [_ok(4), _eq("t", "Ops nav one")],
    ),
    "contexts_count": _p(
        NAV, [{"op": "contexts_count", "save_as": "n"}], [{"kind": "saved_truthy", "name": "n"}]
    ),
    "goto": _p(NAV, [TWO, _ev("location.pathname", "p")], [_ok(0), _eq("p", "/ops/nav-two")]),
    "reload": _p(
        NAV,
        [_ev("window.mark = 1", "m"), {"op": "reload"}, _ev("typeof window.mark", "t")],
        [_ok(1), _eq("t", "undefined")],
    ),
    "go_back": _p(
        NAV,
        [ONE, TWO, {"op": "go_back"}, _ev("location.pathname", "p")],
        [_ok(2), _eq("p", "/ops/nav-one")],
    ),
    "go_forward": _p(
        NAV,
        [ONE, TWO, {"op": "go_back"}, {"op": "go_forward"}, _ev("location.pathname", "p")],
        [_ok(3), _eq("p", "/ops/nav-two")],
    ),
    "url": _p(NAV, [ONE, {"op": "url", "save_as": "u"}], [_has("u", "/ops/nav-one")]),
    "title": _p(NAV, [ONE, {"op": "title", "save_as": "t"}], [_eq("t", "Ops nav one")]),
    "content": _p(NAV, [ONE, {"op": "content", "save_as": "c"}], [_has("c", 'id="next"')]),
    "version": _p(
        NAV, [{"op": "version", "save_as": "v"}], [{"kind": "saved_truthy", "name": "v"}]
    ),
    "user_agent": _p(
        NAV,
        [{"op": "user_agent", "save_as": "ua"}, _ev("navigator.userAgent", "page")],
        [{"kind": "saved_truthy", "name": "ua"}, _has("ua", "/")],
    ),
    # waits and script
    "wait_ms": _p(
        FORMS,
        [_ev("Date.now()", "t0"), {"op": "wait_ms", "ms": 150}, _ev("Date.now()", "t1")],
        [_ok(1)],
    ),
    "wait_for_function": _p(
        FORMS,
        [_wait("window.lateFlag === 'ready'"), _ev("window.lateFlag", "f")],
        [_ok(0), _eq("f", "ready")],
    ),
    "wait_for_selector": _p(
        FORMS,
        [
            {"op": "wait_for_selector", "selector": "#late", "timeout_ms": 5000},
            _ev("!!document.getElementById('late')", "there"),
        ],
        [_ok(0), _eq("there", "true")],
    ),
    "evaluate": _p(FORMS, [_ev("6 * 7", "v")], [_eq("v", "42")]),
    "frame_evaluate": _p(
        FRAMES,
        [
            _wait(
                "(document.getElementById('child').contentWindow || {}).childValue === 'child-42'"
            ),
            {
                "op": "frame_evaluate",
                "url_contains": "frame-child",
                "expression": "window.childValue",
                "save_as": "v",
            },
        ],
        [_eq("v", "child-42")],
    ),
    # actions
    "click": _p(
        FORMS,
        [
            {"op": "click", "selector": "#go", "times": 2},
            _ev("document.getElementById('out').textContent", "o"),
        ],
        [_ok(0), _eq("o", "clicked-2")],
    ),
    "hover": _p(
        FORMS,
        [
            {"op": "hover", "selector": "#hover-target"},
            _ev("document.getElementById('hover-out').textContent", "o"),
        ],
        [_ok(0), _eq("o", "hovered")],
    ),
    "fill": _p(
        FORMS,
        [
            {"op": "fill", "selector": "#name", "value": "ops-fill"},
            _ev(VALUE.format("name") + " + '|' + window.events.includes('name-input')", "v"),
        ],
        [_ok(0), _eq("v", "ops-fill|true")],
    ),
    "type": _p(
        FORMS,
        [{"op": "type", "selector": "#notes", "text": "abc"}, _ev(VALUE.format("notes"), "v")],
        [_ok(0), _eq("v", "abc")],
    ),
    "press": _p(
        FORMS,
        [
            {"op": "press", "selector": "#name", "key": "Enter"},
            _ev("document.getElementById('key-out').textContent", "o"),
        ],
        [_ok(0), _eq("o", "enter-pressed")],
    ),
    "keyboard_type": _p(
        FORMS,
        [
            _ev("document.getElementById('notes').focus(), 'focused'", "f"),
            {"op": "keyboard_type", "text": "xyz"},
            _ev(VALUE.format("notes"), "v"),
        ],
        [_ok(1), _has("v", "xyz")],
    ),
    "check": _p(
        FORMS,
        [
            {"op": "check", "selector": "#agree"},
            _ev(
                "document.getElementById('agree').checked + '|' + window.events.includes('agree-change')",
                "v",
            ),
        ],
        [_ok(0), _eq("v", "true|true")],
    ),
    "uncheck": _p(
        FORMS,
        [
            {"op": "uncheck", "selector": "#news"},
            _ev("document.getElementById('news').checked", "v"),
        ],
        [_ok(0), _eq("v", "false")],
    ),
    "select_option": _p(
        FORMS,
        [
            {"op": "select_option", "selector": "#color", "value": "green"},
            _ev(
                VALUE.format("color") + " + '|' + window.events.includes('color-change:green')", "v"
            ),
        ],
        [_ok(0), _eq("v", "green|true")],
    ),
    "focus": _p(
        FORMS,
        [{"op": "focus", "selector": "#name"}, _ev("document.activeElement.id", "v")],
        [_ok(0), _eq("v", "name")],
    ),
    # reads: the current page, at once
    "text_content": _p(
        FORMS,
        [
            {"op": "text_content", "selector": "#para", "save_as": "v"},
            {"op": "text_content", "selector": "#absent"},
        ],
        [_eq("v", "Hello ghost world"), {"kind": "step_fails", "step": 1}],
    ),
    "inner_text": _p(
        FORMS,
        [{"op": "inner_text", "selector": "#para", "save_as": "v"}],
        [_eq("v", "Hello world")],
    ),
    "get_attribute": _p(
        FORMS,
        [{"op": "get_attribute", "selector": "#go", "name": "data-kind", "save_as": "v"}],
        [_eq("v", "primary")],
    ),
    "input_value": _p(
        FORMS, [{"op": "input_value", "selector": "#fixed", "save_as": "v"}], [_eq("v", "start")]
    ),
    "count": _p(
        FORMS,
        [
            {"op": "count", "selector": "#color option", "save_as": "v"},
            {"op": "count", "selector": ".absent", "save_as": "none"},
        ],
        [_eq("v", "3"), _eq("none", "0")],
    ),
    "is_visible": _p(
        FORMS,
        [
            {"op": "is_visible", "selector": "#para", "save_as": "shown"},
            {"op": "is_visible", "selector": "#hidden", "save_as": "hidden"},
        ],
        [_eq("shown", "true"), _eq("hidden", "false")],
    ),
    "is_checked": _p(
        FORMS,
        [
            {"op": "is_checked", "selector": "#fixed-on", "save_as": "on"},
            {"op": "is_checked", "selector": "#fixed-off", "save_as": "off"},
        ],
        [_eq("on", "true"), _eq("off", "false")],
    ),
    "is_enabled": _p(
        FORMS,
        [
            {"op": "is_enabled", "selector": "#go", "save_as": "on"},
            {"op": "is_enabled", "selector": "#off", "save_as": "off"},
        ],
        [_eq("on", "true"), _eq("off", "false")],
    ),
    # network
    "route_fulfill": _p(
        NET,
        [
            {
                "op": "route_fulfill",
                "pattern": "**/ops/api/a.json",
                "content_type": "application/json",
                "body": '{"source":"mock"}',
            },
            {"op": "click", "selector": "#fetch-a"},
            _wait("document.getElementById('out-a').textContent !== ''"),
            _ev("document.getElementById('out-a').textContent", "v"),
        ],
        [_ok(0), _eq("v", '200:{"source":"mock"}')],
    ),
    "route_abort": _p(
        NET,
        [
            {"op": "route_abort", "pattern": "**/ops/api/b.json"},
            {"op": "click", "selector": "#fetch-b"},
            _wait("document.getElementById('out-b').textContent !== ''"),
            _ev("document.getElementById('out-b').textContent", "v"),
        ],
        [_ok(0), _eq("v", "failed")],
    ),
    "set_extra_headers": _p(
        NET,
        [
            {"op": "set_extra_headers", "headers": {"X-Abb-Ops": "ops-7"}},
            {"op": "click", "selector": "#echo"},
            _wait("document.getElementById('out-echo').textContent !== ''"),
            _ev("document.getElementById('out-echo').textContent", "v"),
        ],
        [_ok(0), _has("v", "ops-7")],
    ),
    "record_requests": _p(
        NET,
        [
            {"op": "record_requests"},
            {"op": "click", "selector": "#fetch-c"},
            _wait("document.getElementById('out-c').textContent !== ''"),
            {"op": "get_recorded_requests", "save_as": "log"},
        ],
        [_ok(0), _has("log", "/ops/api/c.json")],
    ),
    "get_recorded_requests": _p(
        NET,
        [
            {"op": "record_requests"},
            {"op": "click", "selector": "#fetch-c"},
            _wait("document.getElementById('out-c').textContent !== ''"),
            {"op": "get_recorded_requests", "save_as": "log"},
        ],
        [_ok(3), _has("log", "GET")],
    ),
    # console and dialogs
    "get_console": _p(
        CONSOLE,
        [
            {"op": "click", "selector": "#log"},
            {"op": "click", "selector": "#err"},
            {"op": "wait_ms", "ms": 200},
            {"op": "get_console", "save_as": "log"},
        ],
        [_has("log", "ops-console-click"), _has("log", "ops-console-error")],
    ),
    "on_dialog": _p(
        DIALOGS,
        [
            {"op": "on_dialog", "action": "accept", "text": "typed-7"},
            {"op": "click", "selector": "#prompt"},
            _wait("document.getElementById('out').textContent !== ''"),
            _ev("document.getElementById('out').textContent", "v"),
        ],
        [_ok(0), _eq("v", "prompt-typed-7")],
    ),
    "get_dialogs": _p(
        DIALOGS,
        [
            {"op": "on_dialog", "action": "dismiss"},
            {"op": "click", "selector": "#confirm"},
            _wait(_text_is("out", "confirm-no")),
            {"op": "get_dialogs", "save_as": "log"},
        ],
        [_ok(2), _has("log", "ops-confirm-5")],
    ),
    # files
    "write_file": _p(
        FORMS,
        [{"op": "write_file", "path": "{artifact_dir}/ops-write.txt", "content": "ops-written"}],
        [_ok(0), {"kind": "file_nonempty", "path": "{artifact_dir}/ops-write.txt"}],
    ),
    "set_input_files": _p(
        FORMS,
        [
            {"op": "write_file", "path": "{artifact_dir}/ops-upload.txt", "content": "ops-upload"},
            {"op": "set_input_files", "selector": "#file", "path": "{artifact_dir}/ops-upload.txt"},
            _wait(_text_is("file-out", "read:ops-upload")),
        ],
        [_ok(1), _ok(2)],
    ),
    "download": _p(
        FORMS,
        [
            {
                "op": "download",
                "selector": "#dl",
                "path": "{artifact_dir}/downloads/ops-report.csv",
                "save_as": "digest",
            }
        ],
        [
            _ok(0),
            _has("digest", ":14"),
            {"kind": "file_nonempty", "path": "{artifact_dir}/downloads/ops-report.csv"},
        ],
    ),
    # cookies
    "set_cookie": _p(
        FORMS,
        [
            {
                "op": "set_cookie",
                "name": "opsc",
                "value": "v-5",
                "url": "{fixture_origin}/ops/forms",
            },
            _ev("document.cookie", "c"),
        ],
        [_ok(0), _has("c", "opsc=v-5")],
    ),
    "get_cookies": _p(
        FORMS,
        [
            _ev("document.cookie = 'opsg=g-9', 'set'", "s"),
            {"op": "get_cookies", "url": "{fixture_origin}/ops/forms", "save_as": "c"},
        ],
        [_has("c", "opsg"), _has("c", "g-9")],
    ),
    # accessibility and observation
    "ax_snapshot": _p(A11Y, [{"op": "ax_snapshot", "save_as": "s"}], [_has("s", "Ops heading")]),
    "ax_node_identity": _p(
        A11Y,
        [
            {"op": "ax_node_identity", "role": "heading", "name": "Ops heading", "save_as": "id"},
            {"op": "click", "selector": "#grow"},
            {
                "op": "ax_node_identity",
                "role": "heading",
                "name": "Ops heading",
                "compare_to": "ax_node_identity_id",
                "save_as": "again",
            },
        ],
        [_has("id", "Ops heading"), _has("again", "stable|")],
    ),
    "computed_style_breadth": _p(
        A11Y,
        [{"op": "computed_style_breadth", "selector": "#styled", "save_as": "s"}],
        [_has("s", "breadth-ok"), _has("s", "display=block")],
    ),
    "aria_snapshot": _p(
        A11Y,
        [{"op": "aria_snapshot", "selector": "nav", "save_as": "s"}],
        [_has("s", "Save draft"), _has("s", "Home link")],
    ),
}


def _shifted(op: str, probe: Probe, offset: int) -> tuple[list[Step], list[Check]]:
    prefix = f"{op}_"
    steps = []
    for step in copy.deepcopy(list(probe.steps)):
        if "save_as" in step:
            step["save_as"] = prefix + step["save_as"]
        steps.append(step)
    checks = []
    for check in copy.deepcopy(list(probe.checks)):
        if "step" in check:
            check["step"] += offset
        if "name" in check:
            check["name"] = prefix + check["name"]
        check["label"] = f"op:{op}:{check['kind']}"
        checks.append(check)
    return steps, checks


def family_task(key: str, ops: list[str], task_id: str) -> dict[str, Any]:
    """One task proving ``ops`` (their probes share a page) on driver path ``key``."""
    pages = {PROBES[op].page for op in ops}
    if len(pages) != 1:
        raise ValueError(f"{task_id}: probes of several pages: {sorted(pages)}")
    steps: list[Step] = [{"op": "new_page"}, {"op": "goto", "url": "{fixture_url}"}]
    checks: list[Check] = []
    for op in ops:
        more_steps, more_checks = _shifted(op, PROBES[op], len(steps))
        steps += more_steps
        checks += more_checks
    path = DRIVER_PATHS[key]
    return {
        "task_id": task_id,
        "scene": {"kind": "self_hosted_fixture", "url": pages.pop()},
        "driver": {"kind": path.task_kind, "steps": steps, "checks": checks},
        "timeouts": {"task_ms": 30000},
    }


def cell_task(key: str, op: str) -> dict[str, Any]:
    """The generated task of one (op, driver path) cell."""
    return family_task(key, [op], f"op_{op}__{key}")


def refusal_task(key: str, ops: list[str]) -> dict[str, Any]:
    """The refused cells of ``key``: each op's step must fail with its named refusal."""
    steps: list[Step] = [{"op": "new_page"}, {"op": "goto", "url": "{fixture_url}"}]
    steps += [{"op": op, "selector": "body", "url": "{fixture_url}", "pattern": "**"} for op in ops]
    checks = [
        {"kind": "step_fails", "step": 2 + i, "label": f"refused:{op}"} for i, op in enumerate(ops)
    ]
    path = DRIVER_PATHS[key]
    return {
        "task_id": f"op_refusals__{key}",
        "scene": {"kind": "self_hosted_fixture", "url": NAV},
        "driver": {"kind": path.task_kind, "steps": steps, "checks": checks},
        "timeouts": {"task_ms": 30000},
    }


def families() -> dict[str, list[str]]:
    """Ops grouped by probe page, in vocabulary order (probes that open pages last)."""
    grouped: dict[str, list[str]] = {}
    for op, probe in PROBES.items():
        grouped.setdefault(probe.page, []).append(op)
    # probes that open pages go last: an engine with a single page (Lightpanda) fails the second
    # new_page, and every later page op of the attempt with it (the adapters' failed-page guard)
    opens = {op for op, probe in PROBES.items() if any(s["op"] == "new_page" for s in probe.steps)}
    return {page: sorted(ops, key=lambda op: op in opens) for page, ops in grouped.items()}
