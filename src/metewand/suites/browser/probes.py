"""L2 web-platform probes, run natively over CDP (no Node), graded by the fixture server.

A probe kind is chosen by the task's ``driver.script`` file name (the corpus names the script
its authors ran; we run a Python equivalent of it). The generic probe: navigate, settle on
``document.readyState``, wait, pre-clicks, then read an element until the settle rule holds.
The answer goes to the server-side grader (``/__grade__/...``), never graded here.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp

from metewand.suites.browser.cdp import CdpClient
from metewand.suites.browser.errors import GraderUnavailable, ProbeScriptError
from metewand.suites.browser.fixtures.endpoints.harness import GRADER_TOKEN_HEADER
from metewand.suites.browser.fixtures.limits import HEAD_TIMEOUT_S

READY_POLL_S: Final = 0.1
READY_LIMIT_S: Final = 8.0
PRE_CLICK_PAUSE_S: Final = 0.12
READ_POLL_S: Final = 0.15
DEFAULT_WAIT_MS: Final = 200
DEFAULT_SETTLE_TIMEOUT_MS: Final = 5000
GRADER_TIMEOUT_S: Final = 5.0
# A kept-open grader connection is dropped by the harness after this long idle, well before the
# fixture server closes an idle connection (HEAD_TIMEOUT_S): a POST never rides a connection the
# server is closing at that moment (a POST is not retried: the grade may have been recorded).
GRADER_KEEPALIVE_S: Final = HEAD_TIMEOUT_S / 2

SETTLE_RULES: Final[dict[str, Callable[[str | None], bool]]] = {
    "nonempty": lambda text: text is not None and text.strip() != "",
    "not_pending": lambda text: text is not None and text.strip() not in ("", "PENDING"),
    "none": lambda text: True,
}
PROBE_SPEC_TYPES: Final[Mapping[str, tuple[type, ...]]] = {
    "selector": (str,),
    "read": (str,),
    "settle": (str,),
    "settle_timeout_ms": (int, float),
    "wait_ms": (int, float),
    "pre_clicks": (list,),
}
READABLE_PROPERTIES: Final = ("textContent", "innerText", "innerHTML", "value", "outerHTML")


@dataclass
class ProbeContext:
    client: CdpClient
    page_session: str
    url: str  # absolute URL of the scene
    spec: Mapping[str, Any]
    command_timeout_s: float
    session_token: str  # the per-attempt ``session`` value shared with the page and grader


@dataclass
class ProbeResult:
    answer: Any
    observations: dict[str, Any] = field(default_factory=dict)


async def evaluate(ctx: ProbeContext, expression: str) -> Any:
    """Evaluate in the page and return the value; a page exception is a ``ProbeScriptError``."""
    result = await ctx.client.send(
        "Runtime.evaluate",
        {"expression": expression, "returnByValue": True, "awaitPromise": True},
        session_id=ctx.page_session,
        timeout=ctx.command_timeout_s,
    )
    if "exceptionDetails" in result:
        details = result["exceptionDetails"]
        text = (details.get("exception") or {}).get("description") or details.get("text")
        raise ProbeScriptError(f"page script threw: {text}")
    return (result.get("result") or {}).get("value")


async def open_scene(ctx: ProbeContext) -> None:
    send = ctx.client.send
    for method in ("Page.enable", "Runtime.enable"):
        await send(method, {}, session_id=ctx.page_session, timeout=ctx.command_timeout_s)
    await send(
        "Page.navigate",
        {"url": ctx.url},
        session_id=ctx.page_session,
        timeout=ctx.command_timeout_s,
    )
    deadline = time.monotonic() + READY_LIMIT_S
    while time.monotonic() < deadline:
        if await evaluate(ctx, "document.readyState") in ("interactive", "complete"):
            return
        await asyncio.sleep(READY_POLL_S)


async def fixture_probe(ctx: ProbeContext) -> ProbeResult:
    """The generic probe (the corpus's ``l2_fixture_probe.js``)."""
    spec = ctx.spec
    selector, prop = str(spec.get("selector", "body")), str(spec.get("read", "textContent"))
    await open_scene(ctx)
    await asyncio.sleep(float(spec.get("wait_ms", DEFAULT_WAIT_MS)) / 1000)
    for target in spec.get("pre_clicks", []):
        sel = json.dumps(target)
        await evaluate(
            ctx,
            f"(() => {{ const el = document.querySelector({sel}); if (!el) throw new Error("
            f"'pre-click target not found: ' + {sel}); el.click(); return true; }})()",
        )
        await asyncio.sleep(PRE_CLICK_PAUSE_S)
    settled_by = SETTLE_RULES[str(spec.get("settle", "nonempty"))]
    read = (
        f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
        f" return el ? String(el[{json.dumps(prop)}]) : null; }})()"
    )
    deadline = (
        time.monotonic() + float(spec.get("settle_timeout_ms", DEFAULT_SETTLE_TIMEOUT_MS)) / 1000
    )
    text = await evaluate(ctx, read)
    while not settled_by(text) and time.monotonic() < deadline:
        await asyncio.sleep(READ_POLL_S)
        text = await evaluate(ctx, read)
    answer = "" if text is None else str(text).strip()
    observations = {
        "selector": selector,
        "settled": settled_by(text),
        "element_found": text is not None,
    }
    return ProbeResult(answer, observations)


IDB_FUNCTION_WAIT_S: Final = 5.0


async def indexeddb_inventory_probe(ctx: ProbeContext) -> ProbeResult:
    """The IndexedDB inventory probe: the page defines ``window.__ABB_RUN_IDB_TASK__``; we wait
    for it and run it. The page reports its writes and reads to the server itself."""
    await open_scene(ctx)
    deadline = time.monotonic() + IDB_FUNCTION_WAIT_S
    check = "typeof window.__ABB_RUN_IDB_TASK__ === 'function'"
    while not await evaluate(ctx, check):
        if time.monotonic() >= deadline:
            raise ProbeScriptError("window.__ABB_RUN_IDB_TASK__ never appeared")
        await asyncio.sleep(READY_POLL_S)
    value = await evaluate(ctx, "Promise.resolve(window.__ABB_RUN_IDB_TASK__())")
    observations: dict[str, Any] = {"session": ctx.session_token}
    if isinstance(value, Mapping):
        observations.update({k: v for k, v in value.items() if k not in ("answer", "observations")})
        observations.update(value.get("observations") or {})
        answer = value.get("answer")
    else:
        answer = value
    return ProbeResult(answer, observations)


ProbeFn = Callable[[ProbeContext], Awaitable[ProbeResult]]


@dataclass(frozen=True)
class ProbeKind:
    script: str  # the corpus's driver.script file name
    run: ProbeFn
    takes_spec: bool  # reads driver.env.PROBE_SPEC


PROBES: Final[dict[str, ProbeKind]] = {
    kind.script: kind
    for kind in (
        ProbeKind("l2_fixture_probe.js", fixture_probe, True),
        ProbeKind("storage_indexeddb_inventory_001.js", indexeddb_inventory_probe, False),
    )
}


def probe_for(driver: Mapping[str, Any]) -> ProbeKind | None:
    return PROBES.get(str(driver.get("script", "")).rsplit("/", 1)[-1])


def validate_probe_driver(driver: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Problems in a ``node_cdp_probe`` driver block, as (JSON path, message)."""
    problems = []
    for key in driver:
        if key not in ("kind", "script", "connect_env", "env"):
            problems.append((f"$.driver.{key}", "unknown key for a node_cdp_probe driver"))
    if not isinstance(driver.get("script"), str):
        problems.append(("$.driver.script", "required string"))
    kind = probe_for(driver)
    env = driver.get("env", {})
    spec = env.get("PROBE_SPEC") if isinstance(env, Mapping) else None
    if kind is not None and kind.takes_spec:
        if not isinstance(spec, Mapping):
            return problems + [("$.driver.env.PROBE_SPEC", "required object for this probe")]
        problems += _spec_problems(spec)
    return problems


def _spec_problems(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    path = "$.driver.env.PROBE_SPEC"
    problems = []
    for key, value in spec.items():
        types = PROBE_SPEC_TYPES.get(key)
        if types is None:
            problems.append((f"{path}.{key}", "unknown key"))
        elif not isinstance(value, types) or isinstance(value, bool):
            problems.append((f"{path}.{key}", f"must be {types[0].__name__}"))
    if spec.get("settle", "nonempty") not in SETTLE_RULES:
        problems.append((f"{path}.settle", f"must be one of {sorted(SETTLE_RULES)}"))
    if spec.get("read", "textContent") not in READABLE_PROPERTIES:
        problems.append((f"{path}.read", f"must be one of {READABLE_PROPERTIES}"))
    if not all(isinstance(s, str) for s in spec.get("pre_clicks", [])):
        problems.append((f"{path}.pre_clicks", "must be a list of selectors"))
    return problems


def grader_client() -> aiohttp.ClientSession:
    """A session ``grade_server_side`` reuses across attempts (call inside the running loop; its
    owner closes it). One connection kept open instead of one per grade: a fresh connection cost
    0.67-0.71 ms of harness CPU per grade here (connect, accept, a close on each side),
    0.20-0.27 ms on a kept one (benchmarks/README.md, "after four cuts")."""
    connector = aiohttp.TCPConnector(keepalive_timeout=GRADER_KEEPALIVE_S)
    return aiohttp.ClientSession(connector=connector)


# (endpoint, payload) -> the verdict, or None when that grader is not in this process
LocalGrader = Callable[[str, Mapping[str, Any]], "dict[str, Any] | None"]


@dataclass(frozen=True)
class GraderAccess:
    """How the harness reaches its fixture server's graders: the token that proves to a
    harness-only grader that this is the harness, the run's kept-open connection
    (``grader_client``; None: a session of its own per grade), and the graders of a server in
    this process, asked directly (``fixtures.endpoints.harness.grade_in_process``)."""

    token: str | None = None
    http: aiohttp.ClientSession | None = field(default=None, compare=False)
    # the graders of the fixture server in this process, asked without HTTP (None: POST)
    local: LocalGrader | None = field(default=None, compare=False)

    async def grade(
        self, base_url: str, endpoint: str, payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        if self.local is not None:
            verdict = self.local(endpoint, payload)
            if verdict is not None:
                return verdict
        return await grade_server_side(base_url, endpoint, payload, self.token, self.http)


NO_GRADER_ACCESS: Final = GraderAccess()


async def grade_server_side(
    base_url: str,
    endpoint: str,
    payload: Mapping[str, Any],
    token: str | None = None,
    http: aiohttp.ClientSession | None = None,
) -> dict[str, Any]:
    """POST the answer to the fixture server's grader; returns its verdict object. ``http``: the
    run's ``grader_client()`` (None: a session of its own for this one grade).

    Transport trouble or a non-JSON reply is ``GraderUnavailable`` (an infra outcome)."""
    try:
        if http is None:
            async with aiohttp.ClientSession() as own:
                status, body = await _post(own, base_url + endpoint, payload, token)
        else:
            status, body = await _post(http, base_url + endpoint, payload, token)
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise GraderUnavailable(f"grader {endpoint} unreachable: {exc!r}") from exc
    try:
        verdict = json.loads(body)
    except ValueError as exc:
        raise GraderUnavailable(f"grader {endpoint} answered {status} non-JSON") from exc
    if not isinstance(verdict, dict) or "ok" not in verdict:
        raise GraderUnavailable(f"grader {endpoint} answered {status} without a verdict")
    return verdict


async def _post(
    http: aiohttp.ClientSession, url: str, payload: Mapping[str, Any], token: str | None
) -> tuple[int, str]:
    headers = {GRADER_TOKEN_HEADER: token} if token is not None else {}
    timeout = aiohttp.ClientTimeout(total=GRADER_TIMEOUT_S)
    async with http.post(
        url, json=dict(payload), headers=headers, proxy=None, timeout=timeout
    ) as reply:
        return reply.status, await reply.text()
