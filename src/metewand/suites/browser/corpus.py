"""The task corpus on disk: suite manifest, subsets, fixture route registries.

A corpus directory holds ``manifest.json``, ``tasks/`` and ``fixtures/`` (with ``routes.json``
and ``**/routes.fragment.json`` mapping URL paths to files under ``fixtures/``). Nothing here
writes to the corpus: it is read as it is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from metewand import canonical
from metewand.suites.browser.fixtures.answers import registry_problems
from metewand.suites.browser.fixtures.endpoints import default_endpoints
from metewand.suites.browser.fixtures.tree import (
    HEADERS_SIDECAR_SUFFIX,
    ROUTES_FILE,
    ROUTES_FRAGMENT_SUFFIX,
    route_target_problem,
)

VERSION_RE: Final = re.compile(r"^\d+\.\d+\.\d+$")
CHROME_GATES: Final = ("off", "best_effort", "required")
# Scene URLs may also name pages the fixture server generates (its dynamic GET endpoints).
DYNAMIC_ENDPOINTS: Final = default_endpoints()


@dataclass(frozen=True, order=True)
class ValidationError:
    """One problem in one file: ``file`` is relative to the corpus root."""

    file: str
    json_path: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.json_path}: {self.message}"


@dataclass(frozen=True)
class Subset:
    subset_id: str
    layer_id: str
    driver: str
    task_glob: str
    chrome_gate: str
    enabled: bool


@dataclass(frozen=True)
class Manifest:
    bench_id: str
    bench_version: str
    default_k_runs: int
    subsets: tuple[Subset, ...]
    data: dict[str, Any]

    def subset(self, subset_id: str) -> Subset | None:
        return next((s for s in self.subsets if s.subset_id == subset_id), None)


def read_json(path: Path, rel: str) -> tuple[Any, list[ValidationError]]:
    """Parse strictly; a syntax error is reported with line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [ValidationError(rel, "$", f"cannot read: {exc}")]
    try:
        return canonical.loads(text), []
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        return None, [ValidationError(rel, "$", f"invalid JSON at {where}: {exc.msg}")]
    except canonical.CanonicalJSONError as exc:
        return None, [ValidationError(rel, "$", f"invalid JSON: {exc}")]
    except RecursionError:
        return None, [ValidationError(rel, "$", "invalid JSON: nested too deeply")]


def load_manifest(root: Path) -> tuple[Manifest | None, list[ValidationError]]:
    data, errors = read_json(root / "manifest.json", "manifest.json")
    if errors:
        return None, errors
    if not isinstance(data, dict):
        return None, [ValidationError("manifest.json", "$", "must be an object")]
    errors = _manifest_top_errors(data)
    subsets: list[Subset] = []
    layers = data.get("layers")
    for li, layer in enumerate(layers if isinstance(layers, list) else []):
        subsets.extend(_layer_subsets(layer, f"$.layers[{li}]", errors))
    seen: set[str] = set()
    for subset in subsets:
        if subset.subset_id in seen:
            errors.append(
                ValidationError("manifest.json", "$.layers", f"duplicate subset {subset.subset_id}")
            )
        seen.add(subset.subset_id)
    manifest = Manifest(
        str(data.get("bench_id", "")),
        str(data.get("bench_version", "")),
        int(data.get("default_k_runs", 1)) if isinstance(data.get("default_k_runs", 1), int) else 1,
        tuple(subsets),
        data,
    )
    return manifest, errors


def _manifest_top_errors(data: dict[str, Any]) -> list[ValidationError]:
    errors = []
    if not isinstance(data.get("bench_id"), str):
        errors.append(ValidationError("manifest.json", "$.bench_id", "required string"))
    if not VERSION_RE.match(str(data.get("bench_version", ""))):
        errors.append(ValidationError("manifest.json", "$.bench_version", "must look like 1.2.3"))
    k = data.get("default_k_runs", 1)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        errors.append(
            ValidationError("manifest.json", "$.default_k_runs", "must be an integer >= 1")
        )
    if not isinstance(data.get("layers"), list):
        errors.append(ValidationError("manifest.json", "$.layers", "required list"))
    return errors


def _layer_subsets(layer: Any, where: str, errors: list[ValidationError]) -> list[Subset]:
    if not isinstance(layer, dict) or not isinstance(layer.get("layer_id"), str):
        errors.append(ValidationError("manifest.json", where, "layer needs a string layer_id"))
        return []
    out = []
    layer_enabled = layer.get("enabled", True) is not False
    subsets = layer.get("subsets") or []
    if not isinstance(subsets, list):
        errors.append(ValidationError("manifest.json", f"{where}.subsets", "must be a list"))
        return []
    for si, sub in enumerate(subsets):
        path = f"{where}.subsets[{si}]"
        if not isinstance(sub, dict):
            errors.append(ValidationError("manifest.json", path, "must be an object"))
            continue
        missing = [
            k for k in ("subset_id", "driver", "task_glob") if not isinstance(sub.get(k), str)
        ]
        if missing:
            errors.append(ValidationError("manifest.json", path, f"missing string keys {missing}"))
            continue
        glob_problem = task_glob_problem(sub["task_glob"])
        if glob_problem:
            errors.append(ValidationError("manifest.json", path + ".task_glob", glob_problem))
            continue
        gate = sub.get("chrome_gate", "off")
        if gate not in CHROME_GATES:
            errors.append(
                ValidationError(
                    "manifest.json", path + ".chrome_gate", f"must be one of {CHROME_GATES}"
                )
            )
        enabled = layer_enabled and sub.get("enabled", True) is not False
        out.append(
            Subset(
                sub["subset_id"],
                layer["layer_id"],
                sub["driver"],
                sub["task_glob"],
                str(gate),
                enabled,
            )
        )
    return out


def task_glob_problem(pattern: str) -> str | None:
    """Why a subset's ``task_glob`` may not be used (None when it may): a glob selects files
    inside the corpus only, so no absolute pattern and no ``..``."""
    if not pattern or "\x00" in pattern:
        return "must be a non-empty pattern"
    if pattern.startswith("/") or "\\" in pattern:
        return "must be relative to the corpus root (no leading /, no backslash)"
    if ".." in pattern.split("/"):
        return "must not contain .. (tasks live inside the corpus)"
    return None


def subset_files(root: Path, subset: Subset) -> list[Path]:
    """Files the subset's glob selects, sorted; a glob with no files is an empty subset."""
    return sorted(p for p in root.glob(subset.task_glob) if p.is_file())


def load_routes(fixtures_dir: Path, root: Path) -> tuple[dict[str, str], list[ValidationError]]:
    """Merge ``routes.json`` and every ``routes.fragment.json``: URL path -> file under fixtures.

    Every entry is held to the rule the fixture server starts with (``route_target_problem``),
    so a corpus the loader accepts never stops the server after a run directory exists."""
    routes: dict[str, str] = {}
    errors: list[ValidationError] = []
    if not fixtures_dir.is_dir():
        return routes, errors
    fixtures_root = fixtures_dir.resolve()
    files = [fixtures_dir / ROUTES_FILE] if (fixtures_dir / ROUTES_FILE).is_file() else []
    files += sorted(fixtures_dir.rglob("*" + ROUTES_FRAGMENT_SUFFIX))
    for path in files:
        rel = path.relative_to(root).as_posix()
        data, errs = read_json(path, rel)
        errors += errs
        if data is not None and not isinstance(data, dict):
            errors.append(ValidationError(rel, "$", "must be an object of URL path -> file"))
            continue
        for url, target in (data or {}).items():
            problem = _route_problem(url, target, routes, fixtures_root)
            if problem:
                errors.append(ValidationError(rel, f"$[{json.dumps(url)}]", problem))
            else:
                routes[url] = target
    return routes, errors


def _route_problem(url: str, target: Any, routes: dict[str, str], root: Path) -> str | None:
    if not url.startswith("/"):
        return "a route's URL path must start with /"
    if not isinstance(target, str):
        return "a route's target must be a string (a file under fixtures/)"
    if url in routes and routes[url] != target:
        return f"route already maps to {routes[url]!r}"
    problem = route_target_problem(root, target)
    return f"route target {target!r} {problem}" if problem else None


def sidecar_errors(fixtures_dir: Path, root: Path) -> list[ValidationError]:
    """Problems of ``<file>.headers.json`` sidecars (read per request: a bad one would turn a
    page into a server error in the middle of a run)."""
    errors = []
    for path in sorted(fixtures_dir.rglob("*" + HEADERS_SIDECAR_SUFFIX)):
        rel = path.relative_to(root).as_posix()
        data, errs = read_json(path, rel)
        errors += errs
        if data is not None and not isinstance(data, dict):
            errors.append(ValidationError(rel, "$", "must be an object of header name -> value"))
        for name, value in (data if isinstance(data, dict) else {}).items():
            if not isinstance(value, str) or "\n" in value or "\r" in value:
                errors.append(
                    ValidationError(
                        rel, f"$[{json.dumps(name)}]", "a header value must be a one-line string"
                    )
                )
    return errors


def answer_registry_errors(fixtures_dir: Path, root: Path) -> list[ValidationError]:
    """Problems of the expected-answer registry files, as the fixture server would meet them."""
    if not fixtures_dir.is_dir():
        return []
    errors = []
    for path, message in registry_problems(fixtures_dir):
        json_path, text = "$", message
        if message.startswith("$") and ": " in message:
            json_path, text = message.split(": ", 1)
        errors.append(ValidationError(path.relative_to(root).as_posix(), json_path, text))
    return errors


def scene_resolves(url: str, routes: dict[str, str], fixtures_dir: Path) -> bool:
    """True when the fixture server can answer ``url`` (route, /fixtures/ file or dynamic)."""
    path = url.split("#", 1)[0].split("?", 1)[0]
    if path in routes:
        return True
    endpoint = DYNAMIC_ENDPOINTS.find(path)
    if endpoint is not None and "GET" in endpoint.methods:
        return True
    if path.startswith("/fixtures/"):
        # the server's own rule: a plain path to a fixture file, never a registry file
        return route_target_problem(fixtures_dir.resolve(), path[len("/fixtures/") :]) is None
    return False
