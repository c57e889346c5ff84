"""Scenario × driver expansion, and the check that a corpus's generated tasks match their specs.

A scenario spec (``tasks/scenarios/<id>.scenario.json``) is one driver-neutral task; it expands
into one task file per driver it binds (``tasks/<layer>/<subset>/sc_<id>__<suffix>.json``, marked
with ``_generated_from``). ``expand(spec, driver)`` builds that task; ``check(tasks_dir)`` compares
every generated file of a corpus with the expansion of its spec, key by key.

Differences, each naming the file and the key:

- ``stale``: a generated file whose content differs from its spec's expansion (per top-level key,
  and per ``driver`` key);
- ``unbound``: a generated file for a driver its spec does not bind (or in the wrong place);
- ``unreadable``: a spec or generated file that is not a JSON object.

A corpus may hold only part of a suite (this project's copy of the peer corpus keeps about 20%
back), so by default two things are counted and not differences: expansions with no file
(``missing``) and generated files whose spec is absent (``orphaned``). ``strict=True`` makes them
differences too, as the peer's own check does for its full corpus.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from metewand.suites.browser.driver_registry import DRIVER_PATHS

# The file-name suffix of each driver's expansion, as the peer's generator names them.
SUFFIXES: Final = {
    "playwright": "pw",
    "puppeteer": "pp",
    "chrome_remote_interface": "cri",
    "cdp_use": "cdpu",
    "pydoll": "pyd",
    "stagehand": "sh",
    "chrome_devtools_mcp": "mcp",
    "chromedp": "chromedp",
    "rod": "rod",
    "chromiumoxide": "oxide",
    "ferrum": "fr",
    "agent_browser": "ab",
    "selenium": "se",
}
GRADER: Final = {
    "checks": ["answer_matches_expected"],
    "endpoint": "/__grade__/expected_answer",
    "kind": "server_side",
}
TIMEOUTS: Final = {"hard_kill_ms": 45000, "task_ms": 30000}
VERSION_TAG: Final = "version.v0_4"
# The WebDriver column takes the engine's own route, and its tasks are one version ahead.
SELENIUM_TRANSPORT: Final = "engine_native"
SELENIUM_MIN_VERSION: Final = 2
SCENARIO_DIR: Final = "scenarios"
SPEC_SUFFIX: Final = ".scenario.json"


def subset_dir(driver: str, layer: str) -> str:
    """The corpus directory (under tasks/) holding ``driver``'s expansions of ``layer``."""
    for directory in DRIVER_PATHS[driver].subset_dirs:
        if directory.startswith(f"{layer}/"):
            return directory
    raise KeyError(f"driver {driver} has no {layer} subset")


def task_file(spec: dict[str, Any], driver: str) -> str:
    """Path of an expansion relative to tasks/."""
    layer = str(spec.get("layer", "L1"))
    return f"{subset_dir(driver, layer)}/sc_{spec['scenario_id']}__{SUFFIXES[driver]}.json"


def _features(spec: dict[str, Any], driver: str) -> list[str]:
    ops: list[str] = []
    for step in spec.get("steps", []):
        op = f"fw.{driver}.op.{step['op']}"
        if op not in ops:
            ops.append(op)
    return ops + list(spec.get("cdp_anchors", []))


def _tags(spec: dict[str, Any]) -> list[str]:
    tags = [f"family.{spec['family']}", VERSION_TAG, *spec.get("extra_tags", [])]
    if spec.get("diagnostic"):
        tags.append("purpose.diagnostic")
    return tags


def expand(spec: dict[str, Any], driver: str) -> dict[str, Any]:
    """The task ``spec`` expands into for ``driver``."""
    layer = str(spec.get("layer", "L1"))
    directory = subset_dir(driver, layer)
    driver_block: dict[str, Any] = {
        "checks": spec.get("checks", []),
        "kind": DRIVER_PATHS[driver].task_kind,
        "steps": spec["steps"],
    }
    version = int(spec.get("task_version", 1))
    if driver == "selenium":
        driver_block["transport_policy"] = SELENIUM_TRANSPORT
        version = max(version, SELENIUM_MIN_VERSION)
    task: dict[str, Any] = {
        "_generated_from": f"tasks/{SCENARIO_DIR}/{spec['scenario_id']}{SPEC_SUFFIX}",
        "artifact_profile": f"{layer.lower()}_standard",
        "chrome_gate": "best_effort" if spec.get("diagnostic") else "required",
        "description": spec["description"],
        "driver": driver_block,
        "features": _features(spec, driver),
        "grader": dict(GRADER),
        "layer": layer,
        "scene": spec["scene"],
        "subset_id": f"{layer.lower()}.{directory.split('/', 1)[1]}",
        "tags": _tags(spec),
        "task_id": f"sc_{spec['scenario_id']}__{SUFFIXES[driver]}",
        "task_version": version,
        "timeouts": dict(TIMEOUTS),
        "title": f"{spec['title']} ({driver})",
    }
    if "launch_profile" in spec:
        task["launch_profile"] = spec["launch_profile"]
    return task


@dataclass(frozen=True)
class Difference:
    kind: str  # stale | unbound | unreadable | missing | orphaned
    file: str  # relative to the corpus root
    key: str  # the differing key ("driver.steps"), or "" for the whole file
    detail: str

    def line(self) -> str:
        where = f"{self.file}: {self.key}" if self.key else self.file
        return f"{self.kind}: {where}: {self.detail}"


@dataclass
class CheckReport:
    specs: int = 0
    expansions: int = 0  # spec × bound driver pairs
    matched: int = 0  # generated files equal to their expansion
    differences: list[Difference] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # expansions with no file
    orphaned: list[str] = field(default_factory=list)  # generated files whose spec is absent
    strict: bool = False

    @property
    def failing(self) -> list[Difference]:
        if not self.strict:
            return self.differences
        held_back = [Difference("missing", f, "", "no generated file") for f in self.missing]
        orphans = [
            Difference("orphaned", f, "_generated_from", "spec absent") for f in self.orphaned
        ]
        return self.differences + held_back + orphans

    @property
    def ok(self) -> bool:
        return not self.failing


def _read_object(path: Path) -> dict[str, Any] | str:
    """The file's JSON object, or why it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"not readable JSON ({type(exc).__name__}: {exc})"
    return data if isinstance(data, dict) else f"JSON {type(data).__name__}, not an object"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _compare(relative: str, actual: dict[str, Any], expected: dict[str, Any]) -> list[Difference]:
    out = []
    for key in sorted(set(actual) | set(expected)):
        if key == "driver" and isinstance(actual.get(key), dict):
            inner_actual, inner_expected = actual[key], expected[key]
            for inner in sorted(set(inner_actual) | set(inner_expected)):
                if inner_actual.get(inner) != inner_expected.get(inner):
                    out.append(
                        _stale(relative, f"driver.{inner}", inner_actual, inner_expected, inner)
                    )
        elif actual.get(key) != expected.get(key):
            out.append(_stale(relative, key, actual, expected, key))
    return out


def _stale(
    relative: str, label: str, actual: dict[str, Any], expected: dict[str, Any], key: str
) -> Difference:
    has, wants = key in actual, key in expected
    if not wants:
        return Difference("stale", relative, label, "not in the expansion")
    if not has:
        return Difference(
            "stale", relative, label, f"absent, expansion has {_short(expected[key])}"
        )
    return Difference(
        "stale", relative, label, f"{_short(actual[key])} != expansion {_short(expected[key])}"
    )


def load_specs(tasks_dir: Path, report: CheckReport) -> dict[str, dict[str, Any]]:
    specs: dict[str, dict[str, Any]] = {}
    for path in sorted((tasks_dir / SCENARIO_DIR).glob(f"*{SPEC_SUFFIX}")):
        relative = f"{SCENARIO_DIR}/{path.name}"
        data = _read_object(path)
        if isinstance(data, str):
            report.differences.append(Difference("unreadable", relative, "", data))
            continue
        stem = path.name[: -len(SPEC_SUFFIX)]
        if data.get("scenario_id") != stem:
            report.differences.append(
                Difference(
                    "unreadable",
                    relative,
                    "scenario_id",
                    f"{data.get('scenario_id')!r} != file stem {stem!r}",
                )
            )
            continue
        specs[stem] = data
    return specs


def check(tasks_dir: Path, strict: bool = False) -> CheckReport:
    """Compare every generated task under ``tasks_dir`` (a corpus's tasks/) with its spec."""
    report = CheckReport(strict=strict)
    specs = load_specs(tasks_dir, report)
    report.specs = len(specs)
    expected: dict[str, tuple[dict[str, Any], str]] = {}
    for spec in specs.values():
        for driver in spec.get("drivers", []):
            if driver not in SUFFIXES:
                report.differences.append(
                    Difference(
                        "unbound",
                        f"{SCENARIO_DIR}/{spec['scenario_id']}{SPEC_SUFFIX}",
                        "drivers",
                        f"unknown driver {driver!r}",
                    )
                )
                continue
            expected[task_file(spec, driver)] = (spec, driver)
    report.expansions = len(expected)
    seen: set[str] = set()
    for path in sorted(tasks_dir.glob("L*/*/sc_*.json")):
        relative = path.relative_to(tasks_dir).as_posix()
        data = _read_object(path)
        if isinstance(data, str):
            report.differences.append(Difference("unreadable", relative, "", data))
            continue
        marker = data.get("_generated_from")
        if not isinstance(marker, str):
            continue  # a hand-written task, not an expansion
        stem = Path(marker).name.removesuffix(SPEC_SUFFIX)
        if stem not in specs:
            report.orphaned.append(relative)
            continue
        if relative not in expected:
            report.differences.append(
                Difference(
                    "unbound",
                    relative,
                    "_generated_from",
                    f"{marker} binds no driver whose expansion is this file",
                )
            )
            continue
        seen.add(relative)
        spec, driver = expected[relative]
        found = _compare(relative, data, expand(spec, driver))
        report.differences.extend(found)
        report.matched += 0 if found else 1
    report.missing = sorted(set(expected) - seen)
    return report
