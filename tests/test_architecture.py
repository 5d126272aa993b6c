"""The architecture, kept: layers that import only downwards, in the library (``sgrld``) and in
the application (``sgrld_app``) above it; no cycles, no borrowed privates; the reproductions use
the application only through its declared API; and the size limits of modules and functions
(README "Architecture").

Every rule walks the source with :mod:`ast`, so it sees imports inside functions too, and the
imports that are not statements: ``importlib.import_module("name")`` and ``__import__("name")``
with a literal name, and entry-point strings (``"package.module:object"``) in the source and in
``pyproject.toml``. Each rule is tested on a small tree of its own that breaks it, so a rule that
stops finding anything fails.
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
import tomllib
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

APP_RANKS = {"config": 0, "run": 1, "build": 2, "commands": 3}
"""The application's layers and their ranks, as the library's (:data:`RANKS`): a module imports
from its own layer and those below. ``config`` reads and checks configurations; ``run`` runs an
experiment over epochs and writes what it leaves (records, scores, checkpoints, run folders,
reports), knowing no configuration; ``build`` turns configurations into experiments, runs and
sweeps; ``commands`` are the ``sgrld`` command, the demo and the API of the reproductions. The
package's ``__init__`` stands above them."""
APP_LAYERS = {
    "config": "config",
    "checkpoint": "run",
    "records": "run",
    "scoring": "run",
    "run_folder": "run",
    "experiment": "run",
    "epoch_writer": "run",
    "run_end": "run",
    "runner": "run",
    "auto_rate": "run",
    "report": "run",
    "sampler_from_config": "build",
    "data_and_model": "build",
    "from_config": "build",
    "launch": "build",
    "sweep_resume": "build",
    "sweep_rates": "build",
    "sweep_table": "build",
    "sweep": "build",
    "argument_types": "commands",
    "arguments": "commands",
    "demo": "commands",
    "cli": "commands",
    "api": "commands",
}
"""Each module (or subpackage) of the application and its layer (one of :data:`APP_RANKS`)."""
APP_API = f"{APP}.api"
"""The application's API for the reproductions: they import this module and the names of its
``__all__``, and nothing else of the application."""

MAX_MODULE_LINES = 400
"""The limit of a module's lines in every package: the library, the application and the
reproductions."""
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


ENTRY = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
"""An entry-point string, ``"package.module:object"``."""
IMPORTERS = ("import_module", "__import__")
"""The functions that import a module named by a string: ``importlib.import_module`` (however
imported) and the builtin ``__import__``."""


def dynamic_imports(tree: ast.Module) -> Iterator[tuple[str, str, int]]:
    """``(module, name or "", line)`` of each import that is no statement: a call of one of
    :data:`IMPORTERS` with a literal name, and a string that is an entry point (:data:`ENTRY`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in IMPORTERS and isinstance(node.args[0].value, str):
                yield node.args[0].value, "", node.lineno
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if ENTRY.fullmatch(node.value):
                target, name = node.value.split(":")
                yield target, name.split(".")[0], node.lineno


def imports(module: Module, known: dict[str, Module]) -> Iterator[tuple[str, str, int]]:
    """``(imported module, imported name or "", line)`` for each import of a known module,
    relative imports resolved; ``from package import submodule`` names the submodule. The imports
    by a literal name and the entry-point strings (:func:`dynamic_imports`) count as imports."""
    roots = {name.split(".")[0] for name in known}
    for target, name, line in dynamic_imports(module.tree):
        if target.split(".")[0] in roots:
            sub = f"{target}.{name}"
            yield (sub, "", line) if name and sub in known else (target, name, line)
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
    """The layer of a library module (``"numerics"``, …) or of an application module
    (``"sgrld_app:config"``, …); None for the packages' ``__init__``, ``sgrld.__main__`` and the
    modules beside the library's layers."""
    parts = name.split(".")
    if len(parts) < 2:
        return None
    if parts[0] == APP:
        return f"{APP}:{APP_LAYERS[parts[1]]}" if parts[1] in APP_LAYERS else None
    return parts[1] if parts[0] == LIBRARY and parts[1] in RANKS else None


def rank(name: str) -> float:
    """The library's layers from 0, its package above them; the application's layers above that,
    its package above them; the reproductions above all."""
    top = name.split(".")[0]
    if top == REPRODUCTIONS:
        return 300
    found = layer(name)
    if top == APP:
        return 200 + (APP_RANKS[found.split(":")[1]] if found else len(APP_RANKS))
    return RANKS[found] if found else 100


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


def api_members(known: dict[str, Module]) -> set[str]:
    """The names of :data:`APP_API`'s ``__all__`` (empty if there is no such module)."""
    api = known.get(APP_API)
    for node in ast.walk(api.tree) if api else ():
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return {e.value for e in node.value.elts}
    return set()


def beyond_the_api(known: dict[str, Module]) -> list[str]:
    """Imports by the reproductions of the application's modules other than :data:`APP_API`, or
    of names that its ``__all__`` does not list."""
    allowed, found = api_members(known), []
    for module in known.values():
        if module.name.split(".")[0] != REPRODUCTIONS:
            continue
        for target, name, line in imports(module, known):
            if target.split(".")[0] != APP:
                continue
            if target != APP_API or (name and name not in allowed):
                what = f"{target}.{name}" if name else target
                found.append(f"{module.where}:{line}: {module.name} -> {what}")
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


def entry_points(pyproject: Path) -> list[tuple[str, str, str]]:
    """``(group, name, "package.module:object")`` of each entry point of ``pyproject``: the
    console scripts (``[project.scripts]``, group ``console_scripts``) and the other groups."""
    project = tomllib.loads(pyproject.read_text())["project"]
    groups = {"console_scripts": project.get("scripts", {}), **project.get("entry-points", {})}
    return [(g, name, spec) for g, points in groups.items() for name, spec in points.items()]


def defines(module: Module, name: str) -> bool:
    """Whether ``module`` defines or imports ``name`` at its top level."""
    for node in module.tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


ENTRY_GROUPS = {"console_scripts": APP, "sgrld.reproductions": REPRODUCTIONS}
"""The package each group of entry points must point into: the ``sgrld`` script is the
application's, ``sgrld reproduce NAME`` finds the reproductions."""


def broken_entry_points(pyproject: Path, known: dict[str, Module]) -> list[str]:
    """Entry points of ``pyproject`` naming a module or an object that does not exist, or a package
    other than their group's (:data:`ENTRY_GROUPS`)."""
    found = []
    for group, name, spec in entry_points(pyproject):
        target, _, attr = spec.partition(":")
        module = known.get(target)
        if module is None or not attr or not defines(module, attr.split(".")[0]):
            found.append(f"{group}: {name} = {spec}: no such object")
        elif group in ENTRY_GROUPS and target.split(".")[0] != ENTRY_GROUPS[group]:
            found.append(f"{group}: {name} = {spec}: outside {ENTRY_GROUPS[group]}")
    return found


@pytest.fixture(scope="module")
def project() -> dict[str, Module]:
    return modules(ROOT, (LIBRARY, APP, REPRODUCTIONS))


def test_no_upward_imports(project):
    assert upward_imports(project) == []


def test_reproductions_share_only_the_scaffolding(project):
    assert borrowed_reproductions(project) == []


def test_reproductions_use_only_the_applications_api(project):
    assert len(api_members(project)) >= 10
    assert beyond_the_api(project) == []


def test_no_import_cycles(project):
    assert cycles(project) == []


def test_no_private_names_across_modules(project):
    assert private_imports(project) == []


def test_modules_and_functions_within_limits(project):
    assert oversized(project) == []


def test_entry_points_name_what_exists(project):
    points = entry_points(ROOT / "pyproject.toml")
    assert ("console_scripts", "sgrld", f"{APP}.cli:main") in points
    assert len(points) >= 10
    assert broken_entry_points(ROOT / "pyproject.toml", project) == []


def test_top_level_holds_only_layers():
    entries = {p.name for p in (ROOT / LIBRARY).iterdir() if p.name != "__pycache__"}
    beside = {f"{name}.py" for name in BESIDE_THE_LAYERS}
    assert entries == {"__init__.py", "__main__.py", *beside, *RANKS}
    assert len(RANKS) <= 10


def test_every_application_module_has_a_layer():
    entries = {p.name.removesuffix(".py") for p in (ROOT / APP).iterdir()}
    assert entries - {"__init__", "__pycache__"} == set(APP_LAYERS)
    assert set(APP_LAYERS.values()) == set(APP_RANKS)


def test_library_imports_neither_the_application_nor_the_reproductions(project):
    """Only the entry point of ``python -m sgrld`` (:data:`ENTRY_POINT`) imports the application:
    its ``main``, the console script's."""
    library = {k: m for k, m in project.items() if k.split(".")[0] == LIBRARY}
    assert [
        (name, target, what)
        for name, m in library.items()
        for target, what, _ in imports(m, project)
        if target.split(".")[0] in (APP, REPRODUCTIONS)
    ] == [(ENTRY_POINT, f"{APP}.cli", "main")]


def test_beside_the_layers_only_the_standard_library():
    """A module beside the layers loads before any layer (and JAX): it imports only the standard
    library."""
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
    packages = (LIBRARY, APP, REPRODUCTIONS)
    return modules(tmp_path, tuple(p for p in packages if (tmp_path / p).is_dir()))


def test_rules_find_their_faults(tmp_path):
    known = _tree(
        tmp_path,
        {
            "sgrld/__init__.py": "",
            "sgrld/numerics/__init__.py": "",
            "sgrld/numerics/a.py": "def f():\n    from sgrld_app import cli\n",
            "sgrld_app/__init__.py": "",
            "sgrld_app/cli.py": "from sgrld_app.demo import _hidden\n",
            "sgrld_app/demo.py": "from sgrld_app import cli\n_hidden = 1\n",
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
    assert cycles(known) == [["sgrld_app.cli", "sgrld_app.demo"]]
    assert [f.split(": ")[1] for f in private_imports(known)] == [
        "sgrld_app.cli <- sgrld_app.demo._hidden"
    ]
    assert [f.split(": ", 1)[1] for f in oversized(known)] == ["g has 63 lines of code"]


def test_imports_by_name_and_entry_points_are_imports(tmp_path):
    """``importlib.import_module`` and ``__import__`` with a literal name and an entry-point
    string are imports: a cycle through one (``sgrld.run.arguments`` -> ``sgrld.run.demo`` by
    ``importlib``, ``demo`` -> ``arguments`` by a statement, as it was), an upward import by one
    and a lower layer of the application reaching a higher one by one are found."""
    known = _tree(
        tmp_path,
        {
            "sgrld/__init__.py": "",
            "sgrld/numerics/__init__.py": "",
            "sgrld/numerics/a.py": "def f():\n    return __import__('sgrld_app.cli')\n",
            "sgrld/data/__init__.py": "",
            "sgrld/data/d.py": "SCRIPT = 'sgrld_app.cli:main'\n",
            "sgrld_app/__init__.py": "",
            "sgrld_app/arguments.py": (
                "import importlib\n"
                "def parser():\n"
                "    importlib.import_module('sgrld_app.demo').add_arguments()\n"
            ),
            "sgrld_app/demo.py": "from sgrld_app.arguments import parser\n",
            "sgrld_app/cli.py": "def main():\n    pass\n",
            "sgrld_app/config/__init__.py": (
                "from importlib import import_module\nimport_module('sgrld_app.runner')\n"
            ),
            "sgrld_app/runner.py": "",
        },
    )
    assert [f.split(": ")[1] for f in upward_imports(known)] == [
        "sgrld.data.d -> sgrld_app.cli",
        "sgrld.numerics.a -> sgrld_app.cli",
        "sgrld_app.config -> sgrld_app.runner",
    ]
    assert cycles(known) == [["sgrld_app.arguments", "sgrld_app.demo"]]


def test_reproductions_beyond_the_api_are_found(tmp_path):
    """A reproduction may import :data:`APP_API` and the names of its ``__all__``; any other
    module of the application (by statement or by name), or a name the API does not list, is
    found."""
    known = _tree(
        tmp_path,
        {
            "sgrld_app/__init__.py": "",
            "sgrld_app/api.py": "from sgrld_app.runner import run\n__all__ = ['run']\n",
            "sgrld_app/runner.py": "def run():\n    pass\n_secret = 1\n",
            "sgrld_reproductions/__init__.py": "",
            "sgrld_reproductions/one/__init__.py": (
                "from sgrld_app import api\n"
                "from sgrld_app.api import run\n"
                "import sgrld_app.api as app\n"
            ),
            "sgrld_reproductions/one/runs.py": (
                "import importlib\n"
                "from sgrld_app import runner\n"
                "from sgrld_app.api import _secret\n"
                "RUNNER = importlib.import_module('sgrld_app.runner')\n"
            ),
        },
    )
    assert [f.split(": ")[1] for f in beyond_the_api(known)] == [
        "sgrld_reproductions.one.runs -> sgrld_app.runner",
        "sgrld_reproductions.one.runs -> sgrld_app.runner",
        "sgrld_reproductions.one.runs -> sgrld_app.api._secret",
    ]


def test_broken_entry_points_are_found(tmp_path):
    known = _tree(
        tmp_path,
        {
            "sgrld_app/__init__.py": "",
            "sgrld_app/cli.py": "def main():\n    pass\n",
            "sgrld_reproductions/__init__.py": "",
            "sgrld_reproductions/one.py": "REPRODUCTION = 1\n",
        },
    )
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [project]
            name = "x"
            [project.scripts]
            sgrld = "sgrld_app.cli:main"
            gone = "sgrld_app.cli:mane"
            other = "sgrld_reproductions.one:REPRODUCTION"
            [project.entry-points."sgrld.reproductions"]
            one = "sgrld_reproductions.one:REPRODUCTION"
            two = "sgrld_reproductions.two:REPRODUCTION"
            """
        )
    )
    assert broken_entry_points(tmp_path / "pyproject.toml", known) == [
        "console_scripts: gone = sgrld_app.cli:mane: no such object",
        "console_scripts: other = sgrld_reproductions.one:REPRODUCTION: outside sgrld_app",
        "sgrld.reproductions: two = sgrld_reproductions.two:REPRODUCTION: no such object",
    ]


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
