"""The classification rule table: every rule reachable, first match wins, dead engine promotes."""

from __future__ import annotations

import pytest

from metewand.suites.browser import classify
from metewand.suites.browser.cdp import CdpDisconnected, CdpError, CdpTimeout
from metewand.suites.browser.errors import (
    CommandRejected,
    DriverUnavailable,
    EventNotObserved,
    GraderUnavailable,
    ProbeEngineUnsupported,
    ProbeScriptError,
)
from metewand.suites.browser.statuses import STATUSES

TABLE = [
    (
        CommandRejected(3, CdpError(-32601, "'Foo.bar' wasn't found", method="Foo.bar")),
        "command_unsupported",
        "unsupported",
        "engine_unsupported",
        "engine_process",
    ),
    (
        CommandRejected(3, CdpError(-31998, "UnknownMethod: not implemented", method="X.y")),
        "command_unsupported",
        "unsupported",
        "engine_unsupported",
        "engine_process",
    ),
    (
        CommandRejected(1, CdpError(-32000, "Could not find node with given id", method="DOM.x")),
        "command_rejected",
        "fail",
        "cdp_semantic",
        "engine_process",
    ),
    (
        EventNotObserved(2, "Page.loadEventFired", 5.0),
        "event_not_observed",
        "fail",
        "cdp_semantic",
        "engine_process",
    ),
    (
        CdpError(-32601, "'Target.createTarget' wasn't found"),
        "cdp_unsupported",
        "unsupported",
        "engine_unsupported",
        "engine_process",
    ),
    (CdpError(-32000, "Target closed"), "cdp_error", "fail", "cdp_semantic", "engine_process"),
    (
        ProbeEngineUnsupported("no IndexedDB"),
        "probe_engine_unsupported",
        "unsupported",
        "engine_unsupported",
        "engine_process",
    ),
    (ProbeScriptError("page script threw"), "probe_script_error", "fail", "script_error", "driver"),
    (
        DriverUnavailable("framework_playwright"),
        "driver_unavailable",
        "unsupported",
        "engine_unsupported",
        "driver",
    ),
    (GraderUnavailable("refused"), "grader_unavailable", "infra", "infra", "grader"),
    (CdpTimeout("Runtime.evaluate", 5.0), "cdp_timeout", "timeout", "infra", "task_timeout"),
    (TimeoutError(), "os_timeout", "timeout", "infra", "task_timeout"),
    (CdpDisconnected("websocket closed"), "disconnected", "crash", "infra", "client_transport"),
    (ConnectionResetError(104, "reset"), "os_error", "infra", "infra", "client_transport"),
    (ValueError("bug"), "unexpected_exception", "infra", "infra", None),
]


@pytest.mark.parametrize(("exc", "rule", "status", "failure_class", "origin"), TABLE)
def test_rule_table(
    exc: BaseException, rule: str, status: str, failure_class: str, origin: str | None
) -> None:
    got = classify.classify_exception(exc)
    assert classify.rule_for(exc).name == rule
    assert (got.status, got.failure_class, got.origin) == (status, failure_class, origin)
    assert got.reason.startswith(rule + ": ")
    assert got.status in STATUSES


def test_every_rule_is_exercised() -> None:
    assert {row[1] for row in TABLE} == {r.name for r in classify.RULES} | {"unexpected_exception"}


def test_dead_engine_promotes_to_crash_and_keeps_first_status() -> None:
    first = classify.graded_fail(["value_equals"])
    promoted = classify.promote_dead_engine(first, engine_alive=False)
    assert (promoted.status, promoted.failure_class, promoted.origin) == (
        "crash",
        "infra",
        "engine_process",
    )
    assert promoted.secondary_status == "fail"
    assert "value_equals" in promoted.reason
    assert classify.promote_dead_engine(first, engine_alive=True) is first
    passing = classify.promote_dead_engine(classify.passed(), engine_alive=False)
    assert (passing.status, passing.secondary_status) == ("crash", "pass")


def test_unsupported_needs_code_or_explicit_phrase() -> None:
    assert classify.is_unsupported_cdp_error(CdpError(-32601, "whatever"))
    assert not classify.is_unsupported_cdp_error(CdpError(-32000, "Node not found here"))
    assert classify.is_unsupported_cdp_error(CdpError(-32000, "Method not found"))
