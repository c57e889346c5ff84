"""The layer rule of ARCHITECTURE.md, checked on every dependency in src/metewand, and no circles.

cli > history > compare > suites > runtime > measure: a module depends only on its own layer or
the layers below it. ``metewand.canonical`` (the JSON canonicaliser), ``metewand.errors`` (the
exception base and exit codes), ``metewand.version`` (the tool's version) and ``metewand.worker``
(the worker SDK, loaded inside every worker) sit below every layer. ``metewand/__init__.py`` is the
public facade for users: it re-exports the compute API lazily, so nothing below ``cli`` may take an
attribute from it (``from metewand import X`` must name a module).

A dependency is any of:

- an ``import`` / ``from ... import`` statement, at module level or inside a function (a lazy
  import is still a dependency) or under ``if TYPE_CHECKING`` (a type-only one: it counts for the
  layers, not for circles, since it never runs); ``from P import N`` depends on ``P.N`` when that
  is a module, else on ``P``; relative imports are resolved against the importing module;
- a string constant naming a metewand module, alone or as ``module:attribute``: what
  ``importlib.import_module`` and the registration tables (commands, suites) load by name.

Every ``suites.*`` package is a sibling of every other: none imports another; the ``suites``
package itself (the suites' own table) sits beside them. And no module reaches itself again by
following runtime dependencies: the allow-list of circles is empty.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "metewand"

# rank of each layer: a dependency may only go to a rank <= the importer's
RANKS = {
    "cli": 5,
    "__main__": 5,
    "history": 4,  # the run history (issue #23): reads runs through compare, used by cli
    "compare": 3,
    "suites": 2,
    "runtime": 1,
    "measure": 0,
    "canonical": -1,
    "errors": -1,
    "version": -1,
    "markdown": -1,
    "worker": -1,
}
# the facade (metewand/__init__.py) re-exports the public API: as an importer it sits on top,
# and only the command line (and users) may take its attributes
FACADE = "metewand"
FACADE_RANK = RANKS["cli"]
# the bottom modules and what each may import: the worker SDK starts inside every worker, so it
# takes canonical only; canonical raises the shared error base
BOTTOM_IMPORTS = {
    "canonical": ("errors",),
    "errors": (),
    "markdown": (),
    "version": (),
    "worker": ("canonical",),
}
# a metewand module named in a string: "metewand.cli.main" or "metewand.cli.main:main"
MODULE_STRING = re.compile(r"metewand(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")


@dataclass(frozen=True)
class Dependency:
    source: str  # dotted name of the importing module
    target: str  # dotted name of the module (or package) it depends on
    path: Path
    line: int
    how: str  # "import", "string" (import_module / a registration), "type" (TYPE_CHECKING only)
    names: tuple[str, ...] = ()  # ``from metewand import X``: the attributes taken from a package

    def where(self) -> str:
        return f"{self.path.relative_to(SRC.parent)}:{self.line}: {self.source}"


def _dotted(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    """Every module of the tree under ``PACKAGE``, by dotted name (packages by their __init__)."""
    return {_dotted(path): path for path in sorted(PACKAGE.rglob("*.py"))}


# (kind, target or base, attribute names, line, how) of one import or module string, before it
# is resolved against the modules of the tree; kind: "import", "from" or "string"
RawDependency = tuple[str, str, tuple[str, ...], int, str]


class _Collector(ast.NodeVisitor):
    """One walk over a module: imports (noting those under ``if TYPE_CHECKING``) and strings
    naming a metewand module (docstrings and other lone string statements aside)."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.module, self.is_package = module, is_package
        self.found: list[RawDependency] = []
        self.typed = 0  # depth of ``if TYPE_CHECKING:`` bodies around the visited node

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" not in ast.unparse(node.test):
            self.generic_visit(node)
            return
        self.visit(node.test)
        self.typed += 1
        for child in node.body:
            self.visit(child)
        self.typed -= 1
        for child in node.orelse:
            self.visit(child)

    def _how(self) -> str:
        return "type" if self.typed else "import"

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append(("import", alias.name, (), node.lineno, self._how()))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:  # relative: resolve against the importing module's package
            package = self.module.split(".")
            package = package if self.is_package else package[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, base] if base else package)
        names = tuple(alias.name for alias in node.names)
        self.found.append(("from", base, names, node.lineno, self._how()))

    def visit_Expr(self, node: ast.Expr) -> None:
        if not isinstance(node.value, ast.Constant):  # a lone string is a docstring or a note
            self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and MODULE_STRING.fullmatch(node.value):
            self.found.append(("string", node.value.partition(":")[0], (), node.lineno, "string"))


@functools.cache
def _raw_dependencies(text: str, module: str, is_package: bool) -> tuple[RawDependency, ...]:
    """Cached by source text: the planted-violation tests re-read unchanged copies of the tree."""
    collector = _Collector(module, is_package)
    collector.visit(ast.parse(text))
    return tuple(collector.found)


def dependencies(module: str, path: Path, modules: dict[str, Path]) -> Iterator[Dependency]:
    """Every dependency of one module on another module or package, in source order."""
    raw = _raw_dependencies(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
    for kind, target, names, line, how in raw:
        if kind == "import":
            yield Dependency(module, target, path, line, how)
        elif kind == "string":
            if target in modules:  # a string naming no module is just a string
                yield Dependency(module, target, path, line, how)
        else:
            attributes = []
            for name in names:
                if f"{target}.{name}" in modules:  # ``from P import N``, N a module
                    yield Dependency(module, f"{target}.{name}", path, line, how)
                else:
                    attributes.append(name)
            if attributes:
                yield Dependency(module, target, path, line, how, tuple(attributes))


def all_dependencies() -> list[Dependency]:
    modules = package_modules()
    found = [dep for name, path in modules.items() for dep in dependencies(name, path, modules)]
    return [dep for dep in found if dep.target.split(".")[0] == "metewand"]


def _area(module: str) -> str:
    """``cli``, ``compare``, ``suites.browser``, ``suites`` ... of a dotted metewand module name."""
    parts = module.split(".")[1:]
    if parts[:1] == ["suites"] and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0] if parts else ""


def _rank(module: str) -> float:
    if module == FACADE:
        return FACADE_RANK
    return RANKS[_area(module).split(".")[0]]


def _problem(dep: Dependency) -> str | None:
    """What is wrong with one dependency, or None."""
    here, there = _area(dep.source), _area(dep.target)
    if dep.target == FACADE and dep.source != FACADE:
        if _rank(dep.source) < FACADE_RANK:
            taken = ", ".join(dep.names) or "the package"
            return f"facade attribute below cli: {taken} (import the module that defines it)"
        return None
    if _rank(dep.target) > _rank(dep.source):
        return f"upward: {here or 'metewand'} -> {there}"
    if here != there and here.startswith("suites.") and there.startswith("suites."):
        return "the suites never import each other"
    if here in BOTTOM_IMPORTS and there not in (here, *BOTTOM_IMPORTS[here]):
        return f"{here} sits below every layer"
    return None


def violations() -> list[str]:
    found = []
    for dep in all_dependencies():
        problem = _problem(dep)
        if problem is not None:
            found.append(f"{dep.where()} depends on {dep.target} ({dep.how}; {problem})")
    return found


def cycles() -> list[str]:
    """Each circle of runtime dependencies (imports, lazy or not, and module strings), as
    ``a -> b -> ... -> a`` through the lines that make it; type-only imports never run."""
    graph: dict[str, dict[str, Dependency]] = {}
    for dep in all_dependencies():
        if dep.how != "type" and dep.target != dep.source:
            graph.setdefault(dep.source, {}).setdefault(dep.target, dep)
    return [_describe(component, graph) for component in _strongly_connected(graph)]


def _strongly_connected(graph: dict[str, dict[str, Dependency]]) -> list[list[str]]:
    """Tarjan's components with more than one module, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(component: list[str], graph: dict[str, dict[str, Dependency]]) -> str:
    """One shortest circle through the component's first module, with the line of each step."""
    members = set(component)
    start = component[0]
    paths: dict[str, list[Dependency]] = {start: []}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target, dep in sorted(graph.get(node, {}).items()):
                if target == start:
                    steps = [_step(d) for d in [*paths[node], dep]]
                    size = f"  [{len(component)} modules in the circle]"
                    return " -> ".join([start, *steps]) + size
                if target in members and target not in paths:
                    paths[target] = [*paths[node], dep]
                    following.append(target)
        frontier = following
    raise AssertionError(f"no circle through {start}")  # a component always has one


def _step(dep: Dependency) -> str:
    return f"{dep.target} ({dep.path.relative_to(SRC.parent)}:{dep.line}, {dep.how})"


def test_every_dependency_points_down() -> None:
    assert violations() == []


def test_no_import_circles() -> None:
    assert cycles() == []


def test_every_area_has_a_rank() -> None:
    """A new top-level module or package must be placed in a layer, not slip past the test."""
    areas = {_area(name) for name in package_modules() if name != FACADE}
    assert {area.split(".")[0] for area in areas} <= set(RANKS)


def _plant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    """A scratch copy of the package with ``files`` written over it (or added to it)."""
    import shutil

    shutil.copytree(PACKAGE, tmp_path / "src" / "metewand", symlinks=True, ignore=_not_python)
    for name, source in files.items():
        target = tmp_path / "src" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path / "src")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "src" / "metewand")


def _not_python(directory: str, names: list[str]) -> list[str]:
    """Only the Python files (and the directories holding them: a symlink is left behind)."""
    return [n for n in names if not n.endswith(".py") and not _real_dir(Path(directory, n))]


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


@pytest.fixture(scope="module")
def clean_tree() -> tuple[list[str], list[str]]:
    return violations(), cycles()


PLANTED = [
    # the old rules
    ("metewand/measure/x.py", "from metewand.runtime import store\n", "upward"),
    ("metewand/runtime/x.py", "def f():\n    import metewand.compare.scores\n", "upward"),
    ("metewand/suites/browser/x.py", "from metewand.suites.compute import run\n", "each other"),
    ("metewand/compare/x.py", "from ..cli import main\n", "upward"),
    ("metewand/canonical.py", "from metewand import worker\n", "below every layer"),
    ("metewand/measure/x.py", "from metewand.cli.main import main\n", "upward"),
    ("metewand/compare/x.py", "from metewand.history import store\n", "upward"),
    # ``from P import N`` with N a module (a package here): the module counts, not P
    ("metewand/suites/compute/x.py", "from .. import browser\n", "each other"),
    ("metewand/suites/compute/x.py", "from metewand.suites import browser\n", "each other"),
    ("metewand/runtime/x.py", "from metewand import suites\n", "upward"),
    # any two suites are siblings, not only the two there are today
    ("metewand/suites/toy/x.py", "from metewand.suites.browser import rows\n", "each other"),
    ("metewand/suites/browser/y.py", "from ..toy import x\n", "each other"),
    # facade attributes below cli
    ("metewand/suites/browser/x.py", "from metewand import __version__\n", "facade attribute"),
    ("metewand/runtime/x.py", "import metewand\n", "facade attribute"),
    ("metewand/compare/x.py", "from metewand import FixedDatasetResult\n", "facade attribute"),
    # modules loaded by name: import_module and registration strings
    (
        "metewand/runtime/x.py",
        "import importlib\nm = importlib.import_module('metewand.suites.browser.suite')\n",
        "string; upward",
    ),
    (
        "metewand/runtime/x.py",
        "TABLE = {'browser': 'metewand.suites.browser.suite:from_ref'}\n",
        "string; upward",
    ),
    (
        "metewand/suites/compute/x.py",
        "def f():\n    return __import__('metewand.suites.browser.rows')\n",
        "each other",
    ),
]


@pytest.mark.parametrize(("importer", "source", "expected"), PLANTED)
def test_the_checker_catches(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    clean_tree: tuple[list[str], list[str]],
    importer: str,
    source: str,
    expected: str,
) -> None:
    """The checker itself, on a scratch copy of the tree holding one offending dependency."""
    assert clean_tree[0] == []  # else a planted violation could hide among real ones
    toy = {"metewand/suites/toy/__init__.py": "", "metewand/suites/toy/x.py": ""}
    _plant(tmp_path, monkeypatch, {**(toy if "toy" in source + importer else {}), importer: source})
    found = violations()
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize(
    ("files", "members"),
    [
        # two modules importing each other at module level
        (
            {
                "metewand/compare/ring_a.py": "from metewand.compare import ring_b\n",
                "metewand/compare/ring_b.py": "from metewand.compare.ring_a import X\n",
            },
            ("metewand.compare.ring_a", "metewand.compare.ring_b"),
        ),
        # a lazy import closes the circle: the registry pattern (a lookup importing what
        # registers into it)
        (
            {
                "metewand/compare/registry.py": (
                    "def get(name):\n    from metewand.compare import kinds\n    return name\n"
                ),
                "metewand/compare/kinds.py": "from metewand.compare import user\n",
                "metewand/compare/user.py": "from metewand.compare.registry import get\n",
            },
            ("metewand.compare.kinds", "metewand.compare.registry", "metewand.compare.user"),
        ),
        # a relative import of a sibling module, and a string naming the other
        (
            {
                "metewand/runtime/ring_a.py": "from . import ring_b\n",
                "metewand/runtime/ring_b.py": "LOAD = 'metewand.runtime.ring_a:thing'\n",
            },
            ("metewand.runtime.ring_a", "metewand.runtime.ring_b"),
        ),
    ],
)
def test_the_checker_catches_circles(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    clean_tree: tuple[list[str], list[str]],
    files: dict[str, str],
    members: tuple[str, ...],
) -> None:
    assert clean_tree[1] == []
    _plant(tmp_path, monkeypatch, files)
    found = cycles()
    assert len(found) == 1, found
    assert all(member in found[0] for member in members), found


def test_type_only_imports_make_no_circle_but_keep_the_layers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    typed = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {} import X\n"
    _plant(
        tmp_path,
        monkeypatch,
        {
            "metewand/compare/ring_a.py": "from metewand.compare import ring_b\n",
            "metewand/compare/ring_b.py": typed.format("metewand.compare.ring_a"),
            "metewand/runtime/typed.py": typed.format("metewand.compare.ring_a"),
        },
    )
    assert cycles() == []
    found = violations()
    assert len(found) == 1 and "runtime.typed" in found[0] and "type; upward" in found[0], found


def test_allowed_dependencies_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _plant(
        tmp_path,
        monkeypatch,
        {
            "metewand/cli/x.py": (
                "from metewand.compare import scores\nimport metewand.measure\n"
                "from metewand import __version__\nLOAD = 'metewand.suites.browser.suite:from_ref'\n"
            ),
            "metewand/suites/browser/x.py": "from . import rows\nfrom metewand import canonical\n",
            "metewand/suites/__init__.py": "SUITES = {'browser': 'metewand.suites.browser.suite'}\n",
            "metewand/worker.py": "from metewand import canonical\n",
            "metewand/runtime/x.py": (
                '"""Loads metewand.suites.browser.suite by name."""\n'
                "KEY = 'metewand.fixture_context'\nFILE = 'metewand.toml'\n"
            ),
        },
    )
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
