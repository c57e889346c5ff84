"""One exception base carrying the exit code: every error class metewand defines derives from
``metewand.errors.MetewandError``, and the classes the commands map keep their documented codes."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from metewand import errors
from metewand.cli import exit_codes

SRC = Path(__file__).resolve().parents[1] / "src"
# not ours to rebase: raised by user code inside a worker (the SDK imports only canonical), and
# click's own exception type (it carries click's exit_code already)
OUTSIDE = {
    "metewand.worker.WorkerFailure",
    "metewand.cli.rundirs.RunNotFound",
    # signals caught a few lines from where they are raised, never reaching a command: the
    # canonical encoder's fall-back to the reference path, an option converter's refusal (click
    # turns it into its usage error), a ratio of a value <= 0 (compare writes it as a note)
    "metewand.canonical._Slow",
    "metewand.cli.measure_options.BadValue",
    "metewand.compare.hierarchy.NotPositive",
}


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for path in sorted((SRC / "metewand").rglob("*.py")):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.bases:
                value = getattr(importlib.import_module(module), node.name)
                if isinstance(value, type) and issubclass(value, BaseException):
                    found[f"{module}.{node.name}"] = value
    return found


def test_every_error_class_has_the_base() -> None:
    classes = _exception_classes()
    assert len(classes) > 30  # the scan found the classes, not nothing
    strays = sorted(
        name
        for name, cls in classes.items()
        if name not in OUTSIDE and not issubclass(cls, errors.MetewandError)
    )
    assert strays == []


def test_documented_exit_codes_are_unchanged() -> None:
    """README "Exit codes"; cli.exit_codes re-exports the very numbers of metewand.errors."""
    assert (
        exit_codes.OK,
        exit_codes.BENCHMARK_FAILURES,
        exit_codes.INVALID_INPUT,
        exit_codes.ENVIRONMENT_MISSING,
        exit_codes.INTERRUPTED,
    ) == (0, 1, 2, 3, 130)
    assert exit_codes.INVALID_INPUT is errors.INVALID_INPUT


def test_the_classes_commands_map_carry_their_codes() -> None:
    classes = _exception_classes()
    invalid_input = (
        "suites.compute.manifest.ManifestError",
        "suites.browser.run_plan.PlanError",
        "runtime.rundir.StoreError",
        "runtime.store.RunExistsError",
        "runtime.rundir.RunDirError",
        "compare.suite_registry.CompareError",
        "suites.browser.engines.UnknownEngine",
        "canonical.CanonicalJSONError",
    )
    for name in invalid_input:
        assert classes[f"metewand.{name}"].exit_code == 2, name
    assert classes["metewand.measure.accounting.AccountingUnavailable"].exit_code == 3
    # a harness failure unless a class says otherwise
    assert classes["metewand.suites.browser.cdp.CdpDisconnected"].exit_code == 1
    # the standard-library bases stay, so existing ``except ValueError`` clauses still catch
    assert issubclass(classes["metewand.suites.compute.manifest.ManifestError"], ValueError)
    assert issubclass(classes["metewand.suites.browser.cdp.CdpTimeout"], TimeoutError)


def test_a_start_failure_keeps_its_per_instance_code() -> None:
    from metewand.measure.subject import SubjectStartError

    missing = SubjectStartError(["nope"], FileNotFoundError(2, "No such file or directory"))
    denied = SubjectStartError(["x"], PermissionError(13, "Permission denied"))
    assert (missing.exit_code, denied.exit_code) == (127, 126)
    assert isinstance(missing, errors.MetewandError)
