"""The ``raw_cdp`` step interpreter: a registry of step forms run over one ``CdpClient``.

A step is one of three forms, told apart by its key: ``method`` (a CDP command),
``wait_for_event`` (an event wait) or ``sleep_ms``. ``STEP_FORMS`` holds each form's allowed
keys (the task validator uses them) and its runner.

Everything a step saves goes into ``RawCdpState.saved``; the inline checks read it. Reserved
keys (``__events_observed__`` ...) record what happened along the way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from metewand.suites.browser.cdp import ANY_SESSION, CdpClient, CdpError, CdpTimeout, SessionFilter
from metewand.suites.browser.classify import is_unsupported_cdp_error
from metewand.suites.browser.errors import CommandRejected, EventNotObserved
from metewand.suites.browser.substitute import RunnerTokens, substitute

DEFAULT_EVENT_TIMEOUT_MS: Final = 5000
MAX_EVENT_TIMEOUT_MS: Final = 30000
MAX_SLEEP_MS: Final = 5000
# Without an explicit session these domains address the browser, everything else the page.
BROWSER_DOMAINS: Final = ("Browser.", "Target.", "Schema.", "SystemInfo.", "Security.")
BUILTIN_SESSIONS: Final = ("browser", "page")
DOWNLOAD_METHODS: Final = ("Browser.setDownloadBehavior", "Page.setDownloadBehavior")

EVENTS_OBSERVED: Final = "__events_observed__"
EVENT_TIMEOUTS: Final = "__event_timeouts__"
UNSUPPORTED: Final = "__unsupported__"
OPTIONAL_ERRORS: Final = "__optional_step_errors__"
SUPPORTED_UNEXPECTEDLY: Final = "__supported_unexpectedly__"
EVAL_EXCEPTIONS: Final = "__eval_exception_count__"


def fresh_saved() -> dict[str, Any]:
    return {
        EVENTS_OBSERVED: [],
        EVENT_TIMEOUTS: [],
        UNSUPPORTED: [],
        OPTIONAL_ERRORS: [],
        SUPPORTED_UNEXPECTEDLY: [],
        EVAL_EXCEPTIONS: 0,
    }


@dataclass
class RawCdpState:
    """What one attempt's steps share: the client, sessions, saved values and tokens."""

    client: CdpClient
    page_session: str
    tokens: RunnerTokens
    command_timeout_s: float
    saved: dict[str, Any] = field(default_factory=fresh_saved)
    sessions: dict[str, str] = field(default_factory=dict)
    answer: Any = None
    download_domains: list[tuple[str, str | None, dict[str, Any]]] = field(default_factory=list)

    def session_for(self, name: str | None, method: str = "") -> str | None:
        """Route a command: explicit session wins; else by domain (browser or page)."""
        if name is None:
            return None if method.startswith(BROWSER_DOMAINS) else self.page_session
        if name == "browser":
            return None
        if name == "page":
            return self.page_session
        return self.sessions[name]

    def event_filter(self, name: str | None) -> SessionFilter:
        """Events are filtered by session only when the step names a non-browser session."""
        if name is None or name == "browser":
            return ANY_SESSION
        return self.session_for(name)


StepRunner = Callable[[int, Mapping[str, Any], RawCdpState], Awaitable[None]]


@dataclass(frozen=True)
class StepForm:
    name: str
    key: str  # the key that tells this form apart
    allowed: frozenset[str]
    types: Mapping[str, tuple[type, ...]]
    run: StepRunner


async def run_command(index: int, step: Mapping[str, Any], state: RawCdpState) -> None:
    method = str(step["method"])
    params = substitute(step.get("params") or {}, state.saved, state.tokens)
    session = state.session_for(step.get("session"), method)
    if method in DOWNLOAD_METHODS:
        state.download_domains.append((method, session, params))
    try:
        result = await state.client.send(
            method, params, session_id=session, timeout=state.command_timeout_s
        )
    except CdpError as error:
        _on_command_error(index, step, state, error)
        return
    if step.get("expect_unsupported"):
        state.saved[SUPPORTED_UNEXPECTEDLY].append(method)
    _save_command_result(step, state, result)


def _on_command_error(
    index: int, step: Mapping[str, Any], state: RawCdpState, error: CdpError
) -> None:
    record = {"step": index, "method": error.method, "code": error.code, "message": error.message}
    if step.get("expect_unsupported"):
        kind = "unsupported" if is_unsupported_cdp_error(error) else "rejected"
        state.saved[UNSUPPORTED].append({**record, "class": kind})
    elif step.get("optional"):
        state.saved[OPTIONAL_ERRORS].append(record)
    else:
        raise CommandRejected(index, error) from error


def _save_command_result(
    step: Mapping[str, Any], state: RawCdpState, result: dict[str, Any]
) -> None:
    if "exceptionDetails" in result:
        state.saved[EVAL_EXCEPTIONS] += 1
    if "save_result_as" in step:
        state.saved[step["save_result_as"]] = result
    if "save_as" in step:
        name = step["save_as"]
        raw_remote = result.get("result")
        remote: dict[str, Any] = raw_remote if isinstance(raw_remote, dict) else {}
        state.saved[name] = remote.get("value")
        state.saved[name + "__type"] = remote.get("type")
        state.saved[name + "__raw"] = result
        state.answer = remote.get("value")
    if "save_session_as" in step:
        state.sessions[step["save_session_as"]] = str(result["sessionId"])


async def run_event_wait(index: int, step: Mapping[str, Any], state: RawCdpState) -> None:
    method = str(step["wait_for_event"])
    match = substitute(step.get("match"), state.saved, state.tokens)
    timeout_ms = min(int(step.get("timeout_ms", DEFAULT_EVENT_TIMEOUT_MS)), MAX_EVENT_TIMEOUT_MS)
    try:
        event = await state.client.wait_for_event(
            method,
            match,
            session_id=state.event_filter(step.get("session")),
            timeout=timeout_ms / 1000,
        )
    except CdpTimeout:
        if step.get("optional"):
            state.saved[EVENT_TIMEOUTS].append(method)
            return
        raise EventNotObserved(index, method, timeout_ms / 1000) from None
    state.saved[EVENTS_OBSERVED].append(method)
    params = event.get("params") or {}
    if "save_result_as" in step:
        state.saved[step["save_result_as"]] = params
    if "save_session_as" in step:
        session = params.get("sessionId") or event.get("sessionId")
        if not session:
            raise EventNotObserved(index, method + " (with a sessionId)", timeout_ms / 1000)
        state.sessions[step["save_session_as"]] = str(session)


async def run_sleep(index: int, step: Mapping[str, Any], state: RawCdpState) -> None:
    await asyncio.sleep(min(float(step["sleep_ms"]), MAX_SLEEP_MS) / 1000)


_STR = (str,)
_BOOL = (bool,)
_NUM = (int, float)

STEP_FORMS: Final[dict[str, StepForm]] = {
    form.key: form
    for form in (
        StepForm(
            "command",
            "method",
            frozenset(
                {
                    "method",
                    "params",
                    "optional",
                    "save_as",
                    "save_result_as",
                    "session",
                    "save_session_as",
                    "expect_unsupported",
                }
            ),
            {
                "method": _STR,
                "params": (dict,),
                "optional": _BOOL,
                "save_as": _STR,
                "save_result_as": _STR,
                "session": _STR,
                "save_session_as": _STR,
                "expect_unsupported": _BOOL,
            },
            run_command,
        ),
        StepForm(
            "event",
            "wait_for_event",
            frozenset(
                {
                    "wait_for_event",
                    "match",
                    "timeout_ms",
                    "optional",
                    "save_result_as",
                    "session",
                    "save_session_as",
                }
            ),
            {
                "wait_for_event": _STR,
                "match": (dict,),
                "timeout_ms": _NUM,
                "optional": _BOOL,
                "save_result_as": _STR,
                "session": _STR,
                "save_session_as": _STR,
            },
            run_event_wait,
        ),
        StepForm("sleep", "sleep_ms", frozenset({"sleep_ms"}), {"sleep_ms": _NUM}, run_sleep),
    )
}


def form_of(step: Mapping[str, Any]) -> StepForm | None:
    """The one form whose key the step carries (None when zero or several do)."""
    found = [form for key, form in STEP_FORMS.items() if key in step]
    return found[0] if len(found) == 1 else None


# Called as each step begins (its index and the step): the attempt's phase mark.
StepStarted = Callable[[int, Mapping[str, Any]], None]


async def run_steps(
    steps: list[Mapping[str, Any]], state: RawCdpState, started: StepStarted | None = None
) -> None:
    """Run every step in order; a required failure raises (see ``errors``)."""
    for index, step in enumerate(steps):
        form = form_of(step)
        if form is None:  # validated away before a run; kept as a guard for direct callers
            raise ValueError(f"step {index} has no single form key")
        if started is not None:
            started(index, step)
        await form.run(index, step, state)


async def reset_download_behavior(state: RawCdpState) -> list[str]:
    """Undo download settings a task made (they are browser-wide and would leak into later
    attempts). Errors are returned, never raised: cleanup must not change the result."""
    errors: list[str] = []
    for method, session, params in reversed(state.download_domains):
        reset: dict[str, Any] = {"behavior": "default"}
        if method.startswith("Browser.") and "browserContextId" in params:
            reset["browserContextId"] = params["browserContextId"]
        try:
            await state.client.send(method, reset, session_id=session, timeout=2.0)
        except Exception as exc:  # noqa: BLE001 - cleanup records every failure kind
            errors.append(f"{method}: {exc}")
    return errors
