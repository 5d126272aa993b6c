"""The architecture, kept: layers that import only downwards, no cycles, no borrowed privates, and
the size limits of modules and functions (README "Architecture").

Every rule walks the source with :mod:`ast`, so it sees imports inside functions too. Each rule is
tested on a small tree of its own that breaks it, so a rule that stops finding anything fails.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = "sgrld"
APP = "sgrld_app"
REPRODUCTIONS = "sgrld_reproductions"

RANKS = {
    "numerics": 0,
    "metrics": 1,
    "parts": 2,
    "samplers": 3,
    "chains": 4,
    "samples": 5,
    "bnn": 5,
    "data": 5,
    "evaluation": 5,
}
"""Each layer of the library (a subpackage of ``sgrld``) and its rank: a module may import from
its own layer and from layers of a lower rank; layers of the same rank do not import each other.
The package's ``__init__``, ``__main__`` and :data:`BESIDE_THE_LAYERS` stand above every layer;
the application (``sgrld_app``) above the library, and the reproductions above all."""
BESIDE_THE_LAYERS = ("interrupts",)
"""Modules at the library's top level beside its layers: ``sgrld.interrupts``, which the package
imports to install the ``sgrld`` command's signal guard before any layer loads JAX."""
ENTRY_POINT = f"{LIBRARY}.__main__"
"""``python -m sgrld``: the one module of the library that imports the application (its
``cli``); it is no library code but the command's entry point, which Python looks for in the
package named after ``-m``."""

MAX_MODULE_LINES = 500
MAX_FUNCTION_CODE_LINES = 60
SCAFFOLDING = f"{REPRODUCTIONS}.scaffolding"
"""The one package every reproduction may share (its ``__init__`` lists what it shares);
otherwise a reproduction (a subpackage of ``sgrld_reproductions``) imports only the library and its
own modules."""


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    where: str
    tree: ast.Module

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


def modules(root: Path, packages: tuple[str, ...]) -> dict[str, Module]:
    """Every module of ``packages`` under ``root``, by dotted name."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name, where = ".".join(parts), str(path.relative_to(root))
            found[name] = Module(name, path, where, ast.parse(path.read_text()))
    return found


def imports(module: Module, known: dict[str, Module]) -> Iterator[tuple[str, str, int]]:
    """``(imported module, imported name or "", line)`` for each import of a known module,
    relative imports resolved; ``from package import submodule`` names the submodule."""
    roots = {name.split(".")[0] for name in known}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in roots:
                    yield alias.name, "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
            if node.level:
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] not in roots:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub, "", node.lineno) if sub in known else (target, alias.name, node.lineno)


def layer(name: str) -> str | None:
    """The layer of a library module (None: the package's ``__init__``, ``__main__`` or a module
    beside the layers), or the application's (``sgrld_app``: one layer)."""
    parts = name.split(".")
    if parts[0] == APP:
        return APP
    return parts[1] if parts[0] == LIBRARY and len(parts) > 1 and parts[1] in RANKS else None


def rank(name: str) -> float:
    if name.split(".")[0] == REPRODUCTIONS:
        return len(RANKS) + 2
    if name.split(".")[0] == APP:
        return len(RANKS) + 1
    found = layer(name)
    return RANKS[found] if found else len(RANKS)


def upward_imports(known: dict[str, Module]) -> list[str]:
    """Imports of a layer above (or beside) the importer's, of the package root from inside a
    layer, and of the reproductions from the library."""
    found = []
    for module in known.values():
        for target, _, line in imports(module, known):
            if target == module.name or target.startswith(module.name + "."):
                continue
            if module.name == ENTRY_POINT and target == f"{APP}.cli":
                continue
            same_layer = layer(target) is not None and layer(target) == layer(module.name)
            if target.split(".")[0] == REPRODUCTIONS == module.name.split(".")[0]:
                continue  # between reproductions: borrowed_reproductions
            if not same_layer and rank(target) >= rank(module.name):
                found.append(f"{module.where}:{line}: {module.name} -> {target}")
    return found


def borrowed_reproductions(known: dict[str, Module]) -> list[str]:
    """Imports of another reproduction's modules: a reproduction is ``sgrld_reproductions.NAME``
    (a subpackage); it may import the library, :data:`SCAFFOLDING` and its own subpackage."""
    found = []
    for module in known.values():
        parts = module.name.split(".")
        if parts[0] != REPRODUCTIONS or module.name == SCAFFOLDING:
            continue
        own = ".".join(parts[:2])
        for target, _, line in imports(module, known):
            if target.split(".")[0] != REPRODUCTIONS or target == SCAFFOLDING:
                continue
            if module.name == REPRODUCTIONS or not (target == own or target.startswith(own + ".")):
                found.append(f"{module.where}:{line}: {module.name} -> {target}")
    return found


def cycles(known: dict[str, Module]) -> list[list[str]]:
    """The import cycles between modules (strongly connected components of two or more, or a
    module importing itself through a package): Tarjan's algorithm."""
    graph = {
        name: sorted({t for t, _, _ in imports(m, known) if t in known and t != name})
        for name, m in known.items()
    }
    # A package's __init__ re-exporting its submodules is not a cycle: edges from a package to its
    # own submodules are dropped.
    for name in graph:
        graph[name] = [t for t in graph[name] if not t.startswith(name + ".")]
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def private_imports(known: dict[str, Module]) -> list[str]:
    """``from other_module import _name``: a private name borrowed across modules."""
    found = []
    for module in known.values():
        for target, name, line in imports(module, known):
            private = name.startswith("_") or target.rsplit(".", 1)[-1].startswith("_")
            if private and target != module.name and not target.endswith("__main__"):
                what = f"{target}.{name}" if name else target
                found.append(f"{module.where}:{line}: {module.name} <- {what}")
    return found


def code_lines(node: ast.AST, lines: list[str]) -> int:
    """Lines of a function that hold code: its docstring, blank lines and comments aside."""
    body = getattr(node, "body", [])
    docstring = None
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            docstring = range(body[0].lineno, body[0].end_lineno + 1)
    count = 0
    for number in range(node.lineno, node.end_lineno + 1):
        text = lines[number - 1].strip()
        if text and not text.startswith("#") and (docstring is None or number not in docstring):
            count += 1
    return count


def oversized(known: dict[str, Module]) -> list[str]:
    """Modules over :data:`MAX_MODULE_LINES` lines and functions over
    :data:`MAX_FUNCTION_CODE_LINES` lines of code."""
    found = []
    for module in known.values():
        lines = module.path.read_text().splitlines()
        where = module.where
        if len(lines) > MAX_MODULE_LINES:
            found.append(f"{where}: {len(lines)} lines")
        for node in ast.walk(module.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = code_lines(node, lines)
                if n > MAX_FUNCTION_CODE_LINES:
                    found.append(f"{where}:{node.lineno}: {node.name} has {n} lines of code")
    return found


@pytest.fixture(scope="module")
def project() -> dict[str, Module]:
    return modules(ROOT, (LIBRARY, APP, REPRODUCTIONS))


def test_no_upward_imports(project):
    assert upward_imports(project) == []


def test_reproductions_share_only_the_scaffolding(project):
    assert borrowed_reproductions(project) == []


def test_no_import_cycles(project):
    assert cycles(project) == []


def test_no_private_names_across_modules(project):
    assert private_imports(project) == []


def test_modules_and_functions_within_limits(project):
    assert oversized(project) == []


def test_top_level_holds_only_layers():
    entries = {p.name for p in (ROOT / LIBRARY).iterdir() if p.name != "__pycache__"}
    beside = {f"{name}.py" for name in BESIDE_THE_LAYERS}
    assert entries == {"__init__.py", "__main__.py", *beside, *RANKS}
    assert len(RANKS) <= 10


def test_library_imports_neither_the_application_nor_the_reproductions(project):
    """Only the entry point of ``python -m sgrld`` (:data:`ENTRY_POINT`) imports the application."""
    library = {k: m for k, m in project.items() if k.split(".")[0] == LIBRARY}
    assert [
        (name, target)
        for name, m in library.items()
        for target, _, _ in imports(m, project)
        if target.split(".")[0] in (APP, REPRODUCTIONS)
    ] == [(ENTRY_POINT, f"{APP}.cli")]


def test_beside_the_layers_only_the_standard_library():
    """A module beside the layers loads before any layer (and JAX): it imports only the standard
    library."""
    import sys

    for name in BESIDE_THE_LAYERS:
        tree = ast.parse((ROOT / LIBRARY / f"{name}.py").read_text())
        imported = {
            (a.name if isinstance(node, ast.Import) else node.module).split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0)
            for a in node.names
        }
        assert imported - {"__future__"} <= set(sys.stdlib_module_names), name


# --- each rule finds what it is for, on a tree that breaks it -------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Module]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return modules(tmp_path, (LIBRARY, APP))


def test_rules_find_their_faults(tmp_path):
    known = _tree(
        tmp_path,
        {
            "sgrld/__init__.py": "",
            "sgrld/numerics/__init__.py": "",
            "sgrld/numerics/a.py": "def f():\n    from sgrld_app import cli\n",
            "sgrld_app/__init__.py": "",
            "sgrld_app/cli.py": "from sgrld_app.other import _hidden\n",
            "sgrld_app/other.py": "from sgrld_app import cli\n_hidden = 1\n",
            "sgrld/bnn/__init__.py": "",
            "sgrld/bnn/m.py": "import sgrld.data.d\n",
            "sgrld/data/__init__.py": "",
            "sgrld/data/d.py": "def g():\n" + "    x = 1\n" * 61 + "    return x\n",
        },
    )
    assert [f.split(": ")[1] for f in upward_imports(known)] == [
        "sgrld.bnn.m -> sgrld.data.d",
        "sgrld.numerics.a -> sgrld_app.cli",
    ]
    assert cycles(known) == [["sgrld_app.cli", "sgrld_app.other"]]
    assert [f.split(": ")[1] for f in private_imports(known)] == [
        "sgrld_app.cli <- sgrld_app.other._hidden"
    ]
    assert [f.split(": ", 1)[1] for f in oversized(known)] == ["g has 63 lines of code"]


def test_borrowed_reproductions_finds_an_import_of_another_reproduction(tmp_path):
    """A reproduction may import the library, the scaffolding and its own subpackage; an import of
    another reproduction's module (or of the other reproduction itself) is found."""
    root = tmp_path / "tree"
    _tree(
        root,
        {
            "sgrld_reproductions/__init__.py": "",
            "sgrld_reproductions/scaffolding.py": "import sgrld\n",
            "sgrld_reproductions/one/__init__.py": (
                "from sgrld_reproductions.one import runs\n"
                "from sgrld_reproductions.scaffolding import Reproduction\n"
            ),
            "sgrld_reproductions/one/runs.py": "from sgrld_reproductions.two.runs import helper\n",
            "sgrld_reproductions/two/__init__.py": "from sgrld_reproductions import one\n",
            "sgrld_reproductions/two/runs.py": "import sgrld.numerics\nhelper = 1\n",
        },
    )
    known = modules(root, (REPRODUCTIONS,))
    assert [f.split(": ")[1] for f in borrowed_reproductions(known)] == [
        "sgrld_reproductions.one.runs -> sgrld_reproductions.two.runs",
        "sgrld_reproductions.two -> sgrld_reproductions.one",
    ]
