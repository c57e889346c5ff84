"""Attempt statuses, failure classes and origins, decided by one explicit rule table.

Statuses: ``pass``, ``fail``, ``unsupported``, ``timeout``, ``crash``, ``infra``.
Failure classes: ``engine_unsupported``, ``cdp_semantic``, ``script_error``, ``infra``, and
``driver_unavailable`` (a driver path whose adapter, client library or toolchain is not installed:
nothing ran, and the engine is not to blame).
Origins: ``engine_process`` (the engine died), ``client_transport`` (the socket broke while the
engine lives), ``task_timeout``, ``driver``, ``grader``, ``engine_registry``, and for driver
paths ``adapter`` (the adapter process crashed, hung, wrote garbage, reported a harness error or
left out declared checks), ``driver_registry`` (driver missing) and ``binding_catalog`` (no
binding for the engine and driver).

An exception is classified by the first rule whose type matches and whose condition holds; the
engine's health after the attempt is a separate, final rule (``promote_engine_trouble``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from metewand.suites.browser.cdp import CdpDisconnected, CdpError, CdpTimeout
from metewand.suites.browser.errors import (
    CommandRejected,
    DriverUnavailable,
    EventNotObserved,
    GraderUnavailable,
    ProbeEngineUnsupported,
    ProbeScriptError,
)

# JSON-RPC "method not found"; Chrome and Lightpanda both use it for unknown methods.
METHOD_NOT_FOUND: Final = -32601
# Engines that answer an unimplemented method with another code say so in words. The whole
# vocabulary lives here (not scattered): each phrase means "this engine lacks the feature".
UNSUPPORTED_PHRASES: Final = re.compile(
    r"method not found|wasn't found|unknown method|not implemented|unsupported", re.IGNORECASE
)


def is_unsupported_cdp_error(error: CdpError) -> bool:
    """True when a protocol error says the engine lacks the method (not that the call was
    wrong)."""
    return error.code == METHOD_NOT_FOUND or bool(UNSUPPORTED_PHRASES.search(error.message))


@dataclass(frozen=True)
class Classification:
    status: str
    failure_class: str | None
    origin: str | None
    reason: str
    secondary_status: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return {
            "status": self.status,
            "failure_class": self.failure_class,
            "origin": self.origin,
            "reason": self.reason,
            "secondary_status": self.secondary_status,
        }


@dataclass(frozen=True)
class Rule:
    """``when(exc)`` decides whether the rule applies to an exception of type ``kind``."""

    name: str
    kind: type[BaseException]
    status: str
    failure_class: str
    origin: str | None
    when: Callable[[BaseException], bool] = lambda _exc: True


def _rejected_as_unsupported(exc: BaseException) -> bool:
    return isinstance(exc, CommandRejected) and is_unsupported_cdp_error(exc.error)


def _cdp_unsupported(exc: BaseException) -> bool:
    return isinstance(exc, CdpError) and is_unsupported_cdp_error(exc)


RULES: Final[tuple[Rule, ...]] = (
    Rule(
        "command_unsupported",
        CommandRejected,
        "unsupported",
        "engine_unsupported",
        "engine_process",
        _rejected_as_unsupported,
    ),
    Rule("command_rejected", CommandRejected, "fail", "cdp_semantic", "engine_process"),
    Rule("event_not_observed", EventNotObserved, "fail", "cdp_semantic", "engine_process"),
    Rule(
        "cdp_unsupported",
        CdpError,
        "unsupported",
        "engine_unsupported",
        "engine_process",
        _cdp_unsupported,
    ),
    Rule("cdp_error", CdpError, "fail", "cdp_semantic", "engine_process"),
    Rule(
        "probe_engine_unsupported",
        ProbeEngineUnsupported,
        "unsupported",
        "engine_unsupported",
        "engine_process",
    ),
    Rule("probe_script_error", ProbeScriptError, "fail", "script_error", "driver"),
    Rule("driver_unavailable", DriverUnavailable, "unsupported", "engine_unsupported", "driver"),
    Rule("grader_unavailable", GraderUnavailable, "infra", "infra", "grader"),
    Rule("cdp_timeout", CdpTimeout, "timeout", "infra", "task_timeout"),
    Rule("disconnected", CdpDisconnected, "crash", "infra", "client_transport"),
    Rule("os_timeout", TimeoutError, "timeout", "infra", "task_timeout"),
    Rule("os_error", OSError, "infra", "infra", "client_transport"),
)

FALLBACK: Final = Rule("unexpected_exception", BaseException, "infra", "infra", None)


def rule_for(exc: BaseException) -> Rule:
    """The first rule of ``RULES`` that applies to ``exc`` (``FALLBACK`` when none does)."""
    for rule in RULES:
        if isinstance(exc, rule.kind) and rule.when(exc):
            return rule
    return FALLBACK


def classify_exception(exc: BaseException) -> Classification:
    rule = rule_for(exc)
    reason = f"{rule.name}: {type(exc).__name__}: {exc}"
    return Classification(rule.status, rule.failure_class, rule.origin, reason)


def passed() -> Classification:
    return Classification("pass", None, None, "")


def graded_fail(failed_checks: list[str]) -> Classification:
    """The driver finished but the grader's checks did not all pass."""
    return Classification(
        "fail", "cdp_semantic", "engine_process", "checks failed: " + ", ".join(failed_checks)
    )


def grader_infra(reason: str) -> Classification:
    """The grader had no verdict to give (e.g. no expected answer for the task)."""
    return Classification("infra", "infra", "grader", reason)


def engine_binary_missing(engine: str, detail: str) -> Classification:
    return Classification(
        "unsupported",
        "engine_unsupported",
        "engine_registry",
        f"engine_binary_missing: {engine}: {detail}",
    )


# What an engine found in trouble after an attempt means for that attempt's row.
ENGINE_TROUBLE: Final = {
    "exited": "engine process exited during the attempt",
    "unresponsive": "engine process alive but its CDP endpoint stopped answering during the attempt",
}


def promote_dead_engine(outcome: Classification, engine_alive: bool) -> Classification:
    """An engine found dead after an attempt makes it ``crash``; the first status is kept."""
    return promote_engine_trouble(outcome, "ok" if engine_alive else "exited")


def promote_engine_trouble(outcome: Classification, health: str) -> Classification:
    """An engine found ``exited`` or ``unresponsive`` after an attempt makes that attempt a
    ``crash`` (the attempt that caused it is charged, not the next one); ``ok`` changes nothing."""
    if health == "ok":
        return outcome
    what = ENGINE_TROUBLE[health]
    return replace(
        outcome,
        status="crash",
        failure_class="infra",
        origin="engine_process",
        reason=f"{what}; first outcome: {outcome.reason}" if outcome.reason else what,
        secondary_status=outcome.status,
    )


# A driver path whose client library, toolchain or adapter is not there: nothing ran, and the
# engine is not to blame. Its own failure class and origin keep it apart from engine gaps.
DRIVER_UNAVAILABLE: Final = "driver_unavailable"


def driver_unavailable(driver_path: str, detail: str) -> Classification:
    return Classification(
        "unsupported",
        DRIVER_UNAVAILABLE,
        "driver_registry",
        f"{DRIVER_UNAVAILABLE}: {driver_path}: {detail}",
    )


def binding_missing(engine: str, driver_path: str) -> Classification:
    """The binding catalog binds no route for this engine and driver (the peer's
    ``binding_catalog`` origin): the pair is not run, and no other route is tried."""
    return Classification(
        "unsupported",
        "engine_unsupported",
        "binding_catalog",
        f"binding_missing: the catalog has no {engine}__{driver_path} binding",
    )


def adapter_checks_missing(labels: list[str]) -> Classification:
    """An adapter's result left out checks the task declares: its grading cannot be trusted,
    so the attempt is the adapter's fault (infra), never a pass."""
    return Classification(
        "infra", "script_error", "adapter", "adapter_checks_missing: " + ", ".join(labels)
    )
