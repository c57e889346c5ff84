"""Load and validate a task corpus; select tasks by subset, id and tag.

``validate_corpus(root)`` reads everything, collects every error (file + JSON path + message)
and returns the valid tasks beside them, so a caller can stop (exit 2) or keep going.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from metewand.suites.browser import ab_probe_tasks, probes
from metewand.suites.browser.checks import CHECKS
from metewand.suites.browser.corpus import (
    CHROME_GATES,
    Manifest,
    Subset,
    ValidationError,
    answer_registry_errors,
    load_manifest,
    load_routes,
    read_json,
    scene_resolves,
    sidecar_errors,
    subset_files,
)
from metewand.suites.browser.driver_paths import pending_reason
from metewand.suites.browser.driver_registry import BY_TASK_KIND
from metewand.suites.browser.driver_tasks import adapter_driver_problems, inline_grader_problems
from metewand.suites.browser.steps import BUILTIN_SESSIONS, STEP_FORMS, form_of

REQUIRED_FIELDS: Final[Mapping[str, tuple[type, ...]]] = {
    "task_id": (str,),
    "task_version": (int,),
    "layer": (str,),
    "subset_id": (str,),
    "description": (str,),
    "features": (list,),
    "tags": (list,),
    "scene": (dict,),
    "driver": (dict,),
    "grader": (dict,),
    "timeouts": (dict,),
    "artifact_profile": (str,),
}
OPTIONAL_FIELDS: Final[Mapping[str, tuple[type, ...]]] = {
    "title": (str,),
    "chrome_gate": (str,),
    "launch_profile": (str,),
    "human_query": (str,),
    "seed_policy": (dict,),
    "_generated_from": (str, dict),
}
SCENE_KINDS: Final = ("about_blank", "self_hosted_fixture")
LAUNCH_PROFILES: Final = ("default", "all_resources")
# Screenshots and PDFs are outside what the suite measures (the corpus format forbids them).
MAX_STEP_MS: Final = 600_000  # a step duration (sleep_ms, timeout_ms) is at most 10 minutes
FORBIDDEN_METHODS: Final = frozenset({"Page.captureScreenshot", "Page.printToPDF"})
FIXTURE_PATH_RE: Final = re.compile(r"\{fixture_path\}/([^\s\"'`]+)")
RAW_CDP_DRIVER_KEYS: Final = frozenset({"kind", "steps"})
# Task ids name artifact directories and rows: a safe file name, never a path or markup.
TASK_ID_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
TASK_ID_RULE: Final = "must be 1-128 of A-Z a-z 0-9 . _ -, starting with a letter or digit"
GRADER_KEYS: Final = {
    "inline_assertions": frozenset({"kind", "checks"}),
    "server_side": frozenset({"kind", "checks", "endpoint"}),
}


@dataclass(frozen=True)
class Task:
    """One valid task file. ``data`` is the file's JSON, unchanged."""

    task_id: str
    layer: str
    subset_id: str
    path: str  # relative to the corpus root
    data: Mapping[str, Any]
    root: Path  # the corpus root (its ``fixtures/`` serves ``{fixture_path}``)

    @property
    def fixtures_dir(self) -> Path:
        return self.root / "fixtures"

    @property
    def driver(self) -> Mapping[str, Any]:
        return self.data["driver"]

    @property
    def driver_kind(self) -> str:
        return str(self.data["driver"]["kind"])

    @property
    def scene(self) -> Mapping[str, Any]:
        return self.data["scene"]

    @property
    def grader(self) -> Mapping[str, Any]:
        return self.data["grader"]

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(self.data["tags"])

    @property
    def task_ms(self) -> int:
        return int(self.data["timeouts"]["task_ms"])


@dataclass(frozen=True)
class PendingTask:
    """A task file of a driver path the suite does not run yet (see ``driver_paths``)."""

    task_id: str
    subset_id: str
    path: str  # relative to the corpus root
    reason: str


@dataclass
class Corpus:
    root: Path
    manifest: Manifest | None
    tasks: list[Task]
    errors: list[ValidationError]  # every problem: setup errors and invalid task files
    routes: dict[str, str]
    pending: list[PendingTask] = field(default_factory=list)
    # Problems of the corpus as a whole (manifest, routes, answers): no run can start with
    # them, --keep-going or not, because the fixture server or the selection depends on them.
    setup_errors: list[ValidationError] = field(default_factory=list)

    @property
    def fixtures_dir(self) -> Path:
        return self.root / "fixtures"

    def subset_status(self, subset: Subset) -> SubsetStatus:
        runnable = [t.task_id for t in self.tasks if t.subset_id == subset.subset_id]
        pending = [p for p in self.pending if p.subset_id == subset.subset_id]
        return SubsetStatus(subset, runnable, pending, len(subset_files(self.root, subset)))


@dataclass(frozen=True)
class SubsetStatus:
    """What a run of one subset would do: its runnable tasks, and why there are none."""

    subset: Subset
    task_ids: list[str]
    pending: list[PendingTask]
    files: int

    @property
    def pending_reasons(self) -> list[str]:
        return sorted({p.reason for p in self.pending})

    @property
    def why_not_runnable(self) -> str | None:
        """None when the subset has runnable tasks; otherwise the reason it has none."""
        if self.task_ids:
            return None
        if self.pending:
            return "; ".join(self.pending_reasons)
        if self.files == 0:
            return f"no task file matches {self.subset.task_glob}"
        return "every task file is invalid"


class _Where:
    """Error collector for one file."""

    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.errors: list[ValidationError] = []

    def add(self, path: str, message: str) -> None:
        self.errors.append(ValidationError(self.rel, path, message))


def _check_fields(
    obj: Mapping[str, Any],
    path: str,
    where: _Where,
    required: Mapping[str, tuple[type, ...]],
    optional: Mapping[str, tuple[type, ...]],
) -> None:
    for key in obj:
        if key not in required and key not in optional:
            where.add(f"{path}.{key}", "unknown key")
    for key, types in {**required, **optional}.items():
        if key not in obj:
            if key in required:
                where.add(f"{path}.{key}", "required key missing")
        elif not _is_type(obj[key], types):
            names = "/".join(t.__name__ for t in types)
            where.add(f"{path}.{key}", f"must be {names}, got {type(obj[key]).__name__}")


def _is_type(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False  # JSON true is not a number
    return isinstance(value, types)


def _validate_scene(scene: Mapping[str, Any], where: _Where, corpus: Corpus) -> None:
    kind = scene.get("kind")
    if kind not in SCENE_KINDS:
        where.add("$.scene.kind", f"must be one of {SCENE_KINDS}")
        return
    if kind == "about_blank":
        return
    url = scene.get("url")
    if not isinstance(url, str) or not url.startswith("/"):
        where.add("$.scene.url", "a self_hosted_fixture scene needs a URL path starting with /")
    elif not scene_resolves(url, corpus.routes, corpus.fixtures_dir):
        where.add("$.scene.url", f"missing fixture: no route or fixture file serves {url}")


def _validate_steps(steps: Any, where: _Where) -> None:
    if not isinstance(steps, list) or not steps:
        where.add("$.driver.steps", "must be a non-empty list")
        return
    sessions = set(BUILTIN_SESSIONS)
    for index, step in enumerate(steps):
        path = f"$.driver.steps[{index}]"
        if not isinstance(step, dict):
            where.add(path, "a step must be an object")
            continue
        form = form_of(step)
        if form is None:
            where.add(path, f"a step needs exactly one of {sorted(STEP_FORMS)}")
            continue
        for key in step:
            if key not in form.allowed:
                where.add(f"{path}.{key}", f"unknown key for a {form.key} step")
            elif not _is_type(step[key], form.types[key]):
                where.add(f"{path}.{key}", f"must be {form.types[key][0].__name__}")
            elif key.endswith("_ms") and not 0 <= step[key] <= MAX_STEP_MS:  # a duration
                where.add(f"{path}.{key}", f"must be a duration from 0 to {MAX_STEP_MS} ms")
        if step.get("method") in FORBIDDEN_METHODS:
            where.add(f"{path}.method", "screenshot/PDF methods are not part of the suite")
        session = step.get("session")
        if isinstance(session, str) and session not in sessions:
            where.add(f"{path}.session", f"session {session!r} is not defined by an earlier step")
        if isinstance(step.get("save_session_as"), str):
            sessions.add(step["save_session_as"])


def _validate_checks(grader: Mapping[str, Any], where: _Where) -> None:
    checks = grader.get("checks")
    if not isinstance(checks, list) or not checks:
        where.add("$.grader.checks", "must be a non-empty list")
        return
    for index, check in enumerate(checks):
        path = f"$.grader.checks[{index}]"
        if grader.get("kind") == "server_side":
            if not isinstance(check, str):
                where.add(path, "server-side check names are strings")
            continue
        if isinstance(check, str):
            continue  # a bare-string check: read at grading, an unknown one fails there
        spec = CHECKS.get(str(check.get("kind"))) if isinstance(check, dict) else None
        if spec is None:
            where.add(path + ".kind", f"unknown check kind {_kind_of(check)!r}")
            continue
        for key in check:
            if key not in spec.required and key not in spec.optional:
                where.add(f"{path}.{key}", f"unknown key for a {spec.kind} check")
        for key in sorted(spec.required - set(check)):
            where.add(f"{path}.{key}", f"required key missing for a {spec.kind} check")


def _kind_of(check: Any) -> Any:
    return check.get("kind") if isinstance(check, dict) else check


def _validate_grader(
    grader: Mapping[str, Any], where: _Where, driver: Mapping[str, Any] | None = None
) -> None:
    kind = grader.get("kind")
    if kind not in GRADER_KEYS:
        where.add("$.grader.kind", f"must be one of {sorted(GRADER_KEYS)}")
        return
    for key in grader:
        if key not in GRADER_KEYS[kind]:
            where.add(f"$.grader.{key}", f"unknown key for a {kind} grader")
    if kind == "server_side":
        endpoint = grader.get("endpoint")
        if not isinstance(endpoint, str) or not endpoint.startswith("/__grade__/"):
            where.add("$.grader.endpoint", "must be a /__grade__/ path")
    if driver is not None and driver.get("kind") in BY_TASK_KIND:
        # a driver task grades by its adapter's check rows (plus the endpoint's verdict)
        if kind == "inline_assertions":
            for path, message in inline_grader_problems(grader, driver):
                where.add(path, message)
            return
        if "checks" not in grader:
            return  # the endpoint's own checks decide
    _validate_checks(grader, where)


def _validate_driver(task: Mapping[str, Any], subset: Subset | None, where: _Where) -> None:
    driver = task["driver"]
    if subset is not None and driver.get("kind") != subset.driver:
        where.add("$.driver.kind", f"must equal the subset's driver {subset.driver!r}")
    if driver.get("kind") == "raw_cdp":
        for key in driver:
            if key not in RAW_CDP_DRIVER_KEYS:
                where.add(f"$.driver.{key}", "unknown key for a raw_cdp driver")
        _validate_steps(driver.get("steps"), where)
    elif driver.get("kind") == "node_cdp_probe":
        for path, message in probes.validate_probe_driver(driver):
            where.add(path, message)
        if ab_probe_tasks.is_ab_probe(driver):
            for path, message in ab_probe_tasks.ab_probe_problems(driver):
                where.add(path, message)
    elif driver.get("kind") in BY_TASK_KIND:
        for path, message in adapter_driver_problems(driver):
            where.add(path, message)


def _validate_fixture_paths(task: Mapping[str, Any], where: _Where, corpus: Corpus) -> None:
    text = json.dumps(task["driver"])
    for rel in FIXTURE_PATH_RE.findall(text):
        target = (corpus.fixtures_dir / rel).resolve()
        if not target.is_relative_to(corpus.fixtures_dir.resolve()) or not target.exists():
            where.add("$.driver", f"missing fixture: {{fixture_path}}/{rel} does not exist")


def validate_task(
    data: Any, rel: str, subset: Subset | None, corpus: Corpus
) -> list[ValidationError]:
    where = _Where(rel)
    if not isinstance(data, dict):
        where.add("$", "a task must be an object")
        return where.errors
    _check_fields(data, "$", where, REQUIRED_FIELDS, OPTIONAL_FIELDS)
    if where.errors:
        return where.errors
    _check_task_id(data, where)
    if subset is not None:
        if data["subset_id"] != subset.subset_id:
            where.add(
                "$.subset_id", f"must be {subset.subset_id!r} (the subset whose glob holds it)"
            )
        if data["layer"] != subset.layer_id:
            where.add("$.layer", f"must be {subset.layer_id!r}")
    if not data["description"].strip():
        where.add("$.description", "must not be empty")
    _check_timeouts(data["timeouts"], where)
    if data.get("chrome_gate", "off") not in CHROME_GATES:
        where.add("$.chrome_gate", f"must be one of {CHROME_GATES}")
    if data.get("launch_profile", "default") not in LAUNCH_PROFILES:
        where.add("$.launch_profile", f"must be one of {LAUNCH_PROFILES}")
    _validate_scene(data["scene"], where, corpus)
    _validate_driver(data, subset, where)
    _validate_grader(data["grader"], where, data["driver"])
    _validate_fixture_paths(data, where, corpus)
    return where.errors


def _check_task_id(data: Mapping[str, Any], where: _Where) -> None:
    task_id = data.get("task_id")
    if not isinstance(task_id, str) or not TASK_ID_RE.fullmatch(task_id):
        where.add("$.task_id", TASK_ID_RULE)


def _pending_file(data: Any, rel: str, subset: Subset) -> tuple[str | None, list[ValidationError]]:
    """For a file of a driver path not run yet: its reason (None for a runnable driver path)
    and the problems found in what every task shares, whatever its driver (an object, a safe
    ``task_id``, the subset's driver). The rest of its format is the peer harness's to check."""
    driver = data.get("driver") if isinstance(data, dict) else None
    if not isinstance(driver, dict) or not isinstance(driver.get("kind"), str):
        return None, []  # the full validation names the problem
    reason = pending_reason(driver)
    if reason is None:
        return None, []
    where = _Where(rel)
    _check_task_id(data, where)
    if driver["kind"] != subset.driver:
        where.add("$.driver.kind", f"must equal the subset's driver {subset.driver!r}")
    return reason, where.errors


def _check_timeouts(timeouts: Mapping[str, Any], where: _Where) -> None:
    for key in ("task_ms", "hard_kill_ms"):
        value = timeouts.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            where.add(f"$.timeouts.{key}", "required positive integer (milliseconds)")
    for key in timeouts:
        if key not in ("task_ms", "hard_kill_ms"):
            where.add(f"$.timeouts.{key}", "unknown key")


def load_corpus(root: Path | str) -> Corpus:
    root = Path(root).resolve()
    manifest, errors = load_manifest(root)
    corpus = Corpus(root, manifest, [], [], {})
    corpus.routes, route_errors = load_routes(corpus.fixtures_dir, root)
    if not corpus.fixtures_dir.is_dir():  # every run starts a fixture server on it
        route_errors.append(ValidationError("fixtures", "$", "required directory missing"))
    corpus.setup_errors = sorted(
        [
            *errors,
            *route_errors,
            *answer_registry_errors(corpus.fixtures_dir, root),
            *sidecar_errors(corpus.fixtures_dir, root),
        ]
    )
    corpus.errors = list(corpus.setup_errors)
    if manifest is None:
        return corpus
    seen: dict[str, str] = {}
    for subset in manifest.subsets:
        for path in subset_files(root, subset):
            _load_task_file(corpus, subset, path, seen)
    corpus.errors.sort()
    return corpus


def _load_task_file(corpus: Corpus, subset: Subset, path: Path, seen: dict[str, str]) -> None:
    """One file into ``corpus``: a task, a pending task or its errors."""
    rel = path.relative_to(corpus.root).as_posix()
    data, errs = read_json(path, rel)
    reason = None
    if not errs:
        reason, errs = _pending_file(data, rel, subset)
    if not errs and reason is None:
        errs = validate_task(data, rel, subset, corpus)
    if not errs and data["task_id"] in seen:
        errs = [ValidationError(rel, "$.task_id", f"duplicate of {seen[data['task_id']]}")]
    corpus.errors += errs
    if errs:
        return
    seen[data["task_id"]] = rel
    if reason is not None:
        corpus.pending.append(PendingTask(data["task_id"], subset.subset_id, rel, reason))
    else:
        corpus.tasks.append(
            Task(data["task_id"], data["layer"], subset.subset_id, rel, data, corpus.root)
        )


def validate_corpus(root: Path | str) -> tuple[list[Task], list[ValidationError]]:
    """Every valid task and every error (file, JSON path, message) of the corpus at ``root``."""
    corpus = load_corpus(root)
    return corpus.tasks, corpus.errors


def select_tasks(
    tasks: Iterable[Task],
    subsets: Iterable[str] = (),
    task_ids: Iterable[str] = (),
    tags: Iterable[str] = (),
) -> list[Task]:
    """Filter: each given filter must hold (subset in, id in, any tag in); empty = no filter."""
    subset_set, id_set, tag_set = set(subsets), set(task_ids), set(tags)
    return [
        task
        for task in tasks
        if (not subset_set or task.subset_id in subset_set)
        and (not id_set or task.task_id in id_set)
        and (not tag_set or tag_set.intersection(task.tags))
    ]
