"""The format of a driver-path task's ``driver`` block (what its adapter is given), checked at
load time so a bad file is named before a run, not met as an adapter error in the middle of one.

A driver block holds ``kind``, ``steps`` (ops of the shared intent vocabulary, each an object
with a string ``op``; which ops a driver implements is its adapter's business: an unknown op
fails its step there) and ``checks`` (the evaluator family below, graded by the adapter and
reported back as ``observations.checks``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from metewand.suites.browser.check_shapes import CheckFamily, Problem, check_problems

ADAPTER_DRIVER_KEYS: Final = frozenset(
    {"kind", "steps", "checks", "transport_policy", "connect_options"}
)
# check kind -> keys it needs (``label`` and ``kind`` are allowed on every check)
DRIVER_CHECKS: Final[Mapping[str, frozenset[str]]] = {
    "step_ok": frozenset({"step"}),
    "step_fails": frozenset({"step"}),
    "saved_equals": frozenset({"name", "expected"}),
    "saved_contains": frozenset({"name", "expected"}),
    "saved_not_contains": frozenset({"name", "expected"}),
    "saved_truthy": frozenset({"name"}),
    "file_nonempty": frozenset({"path"}),
    "any_of": frozenset({"any_of"}),
}
# a driver check may also carry a ``label`` (its row's name); any other key is refused
DRIVER_CHECK_FAMILY: Final = CheckFamily(DRIVER_CHECKS, "any_of", frozenset({"label"}))
# the inline grader of a driver task: its driver checks ([]), or the script's own report
INLINE_DRIVER_GRADERS: Final[tuple[list[str], ...]] = ([], ["script_reported"])


def adapter_driver_problems(driver: Mapping[str, Any]) -> Iterator[Problem]:
    for key in driver:
        if key not in ADAPTER_DRIVER_KEYS:
            yield f"$.driver.{key}", "unknown key for a driver-path task"
    steps = driver.get("steps")
    if not isinstance(steps, list) or not steps:
        yield "$.driver.steps", "must be a non-empty list"
        steps = []
    for index, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("op"), str) or not step["op"]:
            yield f"$.driver.steps[{index}]", "a step must be an object with a string op"
    checks = driver.get("checks", [])
    if not isinstance(checks, list):
        yield "$.driver.checks", "must be a list"
        return
    for index, check in enumerate(checks):
        yield from check_problems(
            check, f"$.driver.checks[{index}]", len(steps), DRIVER_CHECK_FAMILY
        )


def inline_grader_problems(
    grader: Mapping[str, Any], driver: Mapping[str, Any]
) -> Iterator[Problem]:
    """An inline grader of a driver task grades by the adapter's check rows: its own checks
    are ``[]`` (then the task must declare driver checks) or ``["script_reported"]``."""
    checks = grader.get("checks")
    if checks not in INLINE_DRIVER_GRADERS:
        yield "$.grader.checks", 'must be [] (the driver checks grade) or ["script_reported"]'
    elif checks == [] and not driver.get("checks"):
        yield "$.driver.checks", "an inline grader with no checks needs driver checks"
