"""Validation of the agent-browser tool-probe tasks (``node_cdp_probe`` with ``l1_ab_probe.js``).

Their steps and checks live in ``driver.env``: ``AB_STEPS`` (``{"ab": [CLI args]}`` or
``{"eval": js, "save_as": name}``, optionally ``ignore_error`` / ``timeout_ms``) and ``AB_CHECKS``
(the kinds below). The adapter (``drivers/node/adapters/agent_browser_tool.js``) runs and grades
them; a file it could not run is refused at load with the JSON path, never at run time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from metewand.suites.browser.check_shapes import CheckFamily, Problem, check_problems

SCRIPT: Final = "l1_ab_probe.js"  # the driver.script file name these tasks name
ENV: Final = "$.driver.env"
STEP_KEYS: Final = {"ab", "eval", "save_as", "ignore_error", "timeout_ms"}
# check kind -> the keys it requires (besides ``kind``)
AB_CHECKS: Final[dict[str, frozenset[str]]] = {
    "ab_ok": frozenset({"step"}),
    "ab_fails": frozenset({"step"}),
    "last_ab_ok": frozenset(),
    "ab_data_contains": frozenset({"step", "expected"}),
    "ab_data_not_contains": frozenset({"step", "expected"}),
    "ab_data_array_min_len": frozenset({"step", "path", "min"}),
    "ab_refs_nonempty": frozenset({"step"}),
    "saved_equals": frozenset({"name", "expected"}),
    "saved_contains": frozenset({"name", "expected"}),
    "file_nonempty": frozenset({"path"}),
    "any_of": frozenset({"checks"}),
}
# the adapter reads the keys it knows and ignores others, so other keys are let through
AB_CHECK_FAMILY: Final = CheckFamily(AB_CHECKS, "checks", None)


def is_ab_probe(driver: Mapping[str, Any]) -> bool:
    return str(driver.get("script", "")).rsplit("/", 1)[-1] == SCRIPT


def ab_probe_problems(driver: Mapping[str, Any]) -> Iterator[Problem]:
    env = driver.get("env")
    if not isinstance(env, Mapping):
        yield ENV, "required object with AB_STEPS and AB_CHECKS"
        return
    steps = env.get("AB_STEPS")
    if not isinstance(steps, list) or not steps:
        yield f"{ENV}.AB_STEPS", "must be a non-empty list"
        steps = []
    for index, step in enumerate(steps):
        yield from _step_problems(step, f"{ENV}.AB_STEPS[{index}]")
    checks = env.get("AB_CHECKS")
    if not isinstance(checks, list) or not checks:
        yield f"{ENV}.AB_CHECKS", "must be a non-empty list"
        return
    for index, check in enumerate(checks):
        yield from check_problems(check, f"{ENV}.AB_CHECKS[{index}]", len(steps), AB_CHECK_FAMILY)


def _step_problems(step: Any, path: str) -> Iterator[Problem]:
    if not isinstance(step, Mapping):
        yield path, "a step must be an object"
        return
    for key in step:
        if key not in STEP_KEYS:
            yield f"{path}.{key}", "unknown key for an AB step"
    ab, expression = step.get("ab"), step.get("eval")
    if (ab is None) == (expression is None):
        yield path, "a step has exactly one of ab (CLI args) or eval (JavaScript)"
    elif ab is not None and (not ab or not all(isinstance(a, str) for a in ab)):
        yield f"{path}.ab", "must be a non-empty list of strings"
    elif expression is not None and not isinstance(expression, str):
        yield f"{path}.eval", "must be a string"
    if "save_as" in step and not isinstance(step["save_as"], str):
        yield f"{path}.save_as", "must be a string"
    timeout = step.get("timeout_ms")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool)):
        yield f"{path}.timeout_ms", "must be an integer"
