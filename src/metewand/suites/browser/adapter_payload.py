"""The ``abb_scenario_adapter/1`` payload for one attempt of one driver task.

Runner-side placeholders (``{seed}``, ``{session}``, ``{fixture_base_url}``, ``{artifact_dir}``)
are substituted here; the page-level ones (``{fixture_url}``, ``{fixture_origin}``,
``{fixture_host}``) are left for the adapter, as the contract says.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from metewand.suites.browser.adapters import PROTOCOL

CONNECT_TIMEOUT_MS: Final = 15000
ACTION_TIMEOUT_MS: Final = 8000
DEFAULT_TASK_MS: Final = 30000


@dataclass(frozen=True)
class EngineEndpoint:
    """What the runner knows of the running engine: the binding gate compares against it."""

    name: str
    browser_ws: str
    cdp_port: int
    product: str  # /json/version Browser
    user_agent: str
    live_product: str  # Browser.getVersion product


@dataclass(frozen=True)
class AttemptIds:
    run_id: str
    attempt: int
    seed: str
    artifact_dir: str
    isolation: str = "context"  # --driver-isolation: context or shared


def _replace(value: Any, tokens: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for token, text in tokens.items():
            value = value.replace(token, text)
        return value
    if isinstance(value, list):
        return [_replace(v, tokens) for v in value]
    if isinstance(value, dict):
        return {k: _replace(v, tokens) for k, v in value.items()}
    return value


def task_url(task: Mapping[str, Any], fixture_base_url: str, tokens: Mapping[str, str]) -> str:
    scene = task.get("scene") or {}
    path = str(scene.get("url") or "/l1/core")
    return fixture_base_url + _replace(path, tokens)


# check kinds that carry the value to find; for a server-graded task it is the answer itself
VALUE_CHECK_KINDS: Final = frozenset({"saved_equals", "saved_contains", "saved_not_contains"})


def server_graded(task: Mapping[str, Any]) -> bool:
    return (task.get("grader") or {}).get("kind") == "server_side"


def adapter_checks(task: Mapping[str, Any]) -> list[Any]:
    """The task's checks as the adapter gets them. A server-graded task's expected values are
    withheld (an adapter could answer with them without loading the page); the runner grades
    those checks itself from what the adapter saved (``adapter_attempt``)."""
    checks = list(task["driver"].get("checks") or [])
    return [_withheld(c) for c in checks] if server_graded(task) else checks


def _withheld(check: Any) -> Any:
    if not isinstance(check, Mapping):
        return check
    kept = {k: v for k, v in check.items() if k != "expected"}
    if check.get("kind") in VALUE_CHECK_KINDS and "expected" in check:
        kept["expected_withheld"] = True
    for key in ("any_of", "checks"):
        if isinstance(check.get(key), list):
            kept[key] = [_withheld(c) for c in check[key]]
    return kept


def build_payload(
    task: Mapping[str, Any],
    driver_key: str,
    engine: EngineEndpoint,
    fixture_base_url: str,
    ids: AttemptIds,
    binding: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    session = f"{ids.run_id}-{task['task_id']}-{engine.name}-{ids.attempt}-{ids.seed}"
    tokens = {
        "{seed}": ids.seed,
        "{session}": session,
        "{fixture_base_url}": fixture_base_url,
        "{artifact_dir}": ids.artifact_dir,
    }
    driver = task["driver"]
    timeouts = task.get("timeouts") or {}
    payload: dict[str, Any] = {
        "protocol": PROTOCOL,
        "driver_kind": driver["kind"],
        "driver_key": driver_key,
        "browser_ws": engine.browser_ws,
        "cdp_port": engine.cdp_port,
        "expect_product": engine.product,
        "expect_ua": engine.user_agent,
        "expect_product_live": engine.live_product,
        "transport_policy": driver.get("transport_policy"),
        "task_url": task_url(task, fixture_base_url, tokens),
        "steps": _replace(list(driver.get("steps") or []), tokens),
        "checks": _replace(adapter_checks(task), tokens),
        # a probe-script path's steps and checks live in its env (AB_STEPS, AB_CHECKS)
        "driver_env": _replace(dict(driver.get("env") or {}), tokens),
        "connect_timeout_ms": CONNECT_TIMEOUT_MS,
        "action_timeout_ms": ACTION_TIMEOUT_MS,
        "task_timeout_ms": int(timeouts.get("task_ms") or DEFAULT_TASK_MS),
        "artifact_dir": ids.artifact_dir,
        "task_id": task["task_id"],
        "run_id": ids.run_id,
        "engine": engine.name,
        "attempt": ids.attempt,
        "seed": ids.seed,
        "isolation": ids.isolation,
        # echoed in the result: a line without it (or with another's) is no attempt's result
        "attempt_id": f"{session}-{secrets.token_hex(4)}",
    }
    if binding is not None:
        payload["binding"] = dict(binding)
    if isinstance(driver.get("connect_options"), Mapping):
        # the task's options for the library's connect call, over the adapter's defaults (the
        # peer's puppeteer path: ``defaultViewport: null`` unless the task gives one)
        payload["connect_options"] = dict(driver["connect_options"])
    return payload
