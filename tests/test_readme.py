"""The README stays a front door: short, no lab notebook, and an Architecture section that names
every module of the library under its layer (issue 35) and every module of the application
(issue 52; its ``config`` package as one). Its examples run as doctests elsewhere
(``--doctest-glob=README.md``)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_LINES = 250
DIARY = re.compile(r"took|Measured|2026-|here \(")
"""Phrases of a lab notebook: timings, dated measurements, "here (this machine)"."""


def _section(text: str, heading: str) -> str:
    """The lines under ``## heading`` up to the next ``##`` heading (fenced code included)."""
    lines, out, inside, fence = text.splitlines(), [], False, False
    for line in lines:
        if line.startswith("```"):
            fence = not fence
        if not fence and re.match(r"^##? ", line):
            if inside:
                break
            inside = line.strip() == f"## {heading}"
            continue
        if inside:
            out.append(line)
    return "\n".join(out)


def library_modules(package: str = "sgrld") -> list[str]:
    """The dotted name of every module of ``package`` (a package by its own name)."""
    names = []
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def application_modules() -> list[str]:
    """``sgrld_app`` and the dotted name of each of its modules and subpackages (a subpackage as
    one: the README names ``sgrld_app.config``, the docs' architecture page its modules)."""
    found = ["sgrld_app"]
    for path in sorted((ROOT / "sgrld_app").iterdir()):
        if path.suffix == ".py" and path.stem != "__init__" or (path / "__init__.py").is_file():
            found.append(f"sgrld_app.{path.stem}")
    return found


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES


def test_readme_has_no_dated_measurements():
    text = README.read_text(encoding="utf-8")
    assert [line for line in text.splitlines() if DIARY.search(line)] == []


def test_architecture_names_every_module():
    section = _section(README.read_text(encoding="utf-8"), "Architecture")
    assert section.strip(), "README.md has no '## Architecture' section"
    named = set(re.findall(r"(?<![\w/])sgrld(?:\.\w+)*(?![\w/])", section))
    modules = library_modules()
    assert len(modules) > 50
    assert [name for name in modules if name not in named] == []


def test_architecture_names_every_application_module():
    section = _section(README.read_text(encoding="utf-8"), "Architecture")
    named = set(re.findall(r"(?<![\w/])sgrld_app(?:\.\w+)*(?![\w/])", section))
    modules = application_modules()
    assert len(modules) > 20
    assert [name for name in modules if name not in named] == []


def test_architecture_names_no_module_that_is_gone():
    """A dotted name under Architecture that is no module (nor a name in one) is stale."""
    section = _section(README.read_text(encoding="utf-8"), "Architecture")
    modules = {*library_modules(), *library_modules("sgrld_app")}
    named = set(re.findall(r"(?<![\w/])sgrld(?:_app)?(?:\.\w+)+(?![\w/])", section))
    stale = [n for n in named if n not in modules and n.rsplit(".", 1)[0] not in modules]
    assert stale == []
