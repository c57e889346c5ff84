"""The layer rule of ARCHITECTURE.md, checked on every import statement in src/metewand.

cli > history > compare > suites > runtime > measure: a module imports only from its own layer or the
layers below it. ``metewand.canonical`` (the JSON canonicaliser), ``metewand.errors`` (the
exception base and exit codes) and ``metewand.worker`` (the worker SDK, loaded inside every
worker) sit below every layer; the package's own __init__ is the public facade. The two suites
never import each other. Imports inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "metewand"

# rank of each layer: an import may only go to a rank <= the importer's
RANKS = {
    "cli": 4,
    "__main__": 4,
    "history": 3.5,  # the run history (issue #23): reads runs through compare, used by cli
    "compare": 3,
    "suites": 2,
    "runtime": 1,
    "measure": 0,
    "canonical": -1,
    "errors": -1,
    "worker": -1,
    "": -1,  # ``from metewand import __version__``: the bare package, cheap to import
}
# metewand/__init__.py is the public facade: it re-exports the compute API lazily (PEP 562), so as
# an importer it sits on top, while importing it (for __version__) is allowed everywhere.
FACADE_RANK = 4
SIBLING_SUITES = ("suites.compute", "suites.browser")
# the bottom modules and what each may import: the worker SDK starts inside every worker, so it
# takes canonical only; canonical raises the shared error base
BOTTOM_IMPORTS = {"canonical": ("errors",), "errors": (), "worker": ("canonical",)}
BOTTOM = tuple(BOTTOM_IMPORTS)


def _dotted(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module name) of every metewand import in the tree, nested ones too."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing module's package
                package = module.split(".")
                package = package if is_package else package[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            # ``from metewand import canonical`` names a module, not an attribute
            names = [f"{base}.{a.name}" if _submodule(base, a.name) else base for a in node.names]
            found += [(node.lineno, name) for name in names]
    return sorted({(line, name) for line, name in found if name.split(".")[0] == "metewand"})


def _submodule(base: str, name: str) -> bool:
    """``from metewand import canonical`` names a module; ``__version__`` is an attribute."""
    return base == "metewand" and name in RANKS


def _area(module: str) -> str:
    """``cli``, ``compare``, ``suites.browser``, ... of a dotted metewand module name."""
    parts = module.split(".")[1:]
    if parts[:1] == ["suites"] and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0] if parts else ""


def _rank(area: str) -> int:
    return RANKS[area.split(".")[0]]


def violations() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _dotted(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        here = _area(module)
        for line, target in _imported(tree, module, path.name == "__init__.py"):
            there = _area(target)
            where = f"{path.relative_to(SRC.parent)}:{line}: {module} imports {target}"
            if _rank(there) > (FACADE_RANK if module == "metewand" else _rank(here)):
                found.append(f"{where} (upward: {here} -> {there})")
            elif {here, there} == set(SIBLING_SUITES):
                found.append(f"{where} (the suites never import each other)")
            elif here in BOTTOM and there not in (*BOTTOM_IMPORTS[here], ""):
                found.append(f"{where} ({here} sits below every layer)")
    return found


def test_every_import_points_down() -> None:
    assert violations() == []


def test_every_area_has_a_rank() -> None:
    """A new top-level module or package must be placed in a layer, not slip past the test."""
    areas = {_area(_dotted(path)) for path in PACKAGE.rglob("*.py")}
    assert {area.split(".")[0] for area in areas} <= set(RANKS)


@pytest.mark.parametrize(
    ("importer", "source", "expected"),
    [
        ("metewand/measure/x.py", "from metewand.runtime import store\n", "upward"),
        ("metewand/runtime/x.py", "def f():\n    import metewand.compare.scores\n", "upward"),
        ("metewand/suites/browser/x.py", "from metewand.suites.compute import run\n", "each other"),
        ("metewand/suites/compute/x.py", "from ..browser import rows\n", "each other"),
        ("metewand/compare/x.py", "from ..cli import main\n", "upward"),
        ("metewand/canonical.py", "from metewand import worker\n", "below every layer"),
        ("metewand/measure/x.py", "from metewand.cli.main import main\n", "upward"),
    ],
)
def test_the_checker_catches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, importer: str, source: str, expected: str
) -> None:
    """The checker itself, on a scratch tree holding one offending import."""
    target = tmp_path / "src" / importer
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path / "src")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "src" / "metewand")
    found = violations()
    assert len(found) == 1 and expected in found[0], found


def test_allowed_imports_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for importer, source in [
        ("metewand/cli/x.py", "from metewand.compare import scores\nimport metewand.measure\n"),
        ("metewand/suites/browser/x.py", "from . import rows\nfrom metewand import canonical\n"),
        ("metewand/worker.py", "from metewand import canonical\n"),
    ]:
        target = tmp_path / "src" / importer
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path / "src")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "src" / "metewand")
    assert violations() == []


def test_compare_does_not_branch_on_the_suite_name() -> None:
    """Suite differences live in compare.suite_registry; no ``kind == "browser"`` anywhere else."""
    names = {"browser", "compute"}
    found = []
    for path in sorted((PACKAGE / "compare").rglob("*.py")):
        if path.name in ("compare_suites.py", "rundir.py"):  # registrations; reading a run's kind
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                parts = [node.left, *node.comparators]
                if any(isinstance(p, ast.Constant) and p.value in names for p in parts):
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []
