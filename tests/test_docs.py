"""The documentation site's sources: the nav names existing pages, the API reference covers the
public API. Cheap checks only; `make docs` builds the site (mkdocs build --strict)."""

import importlib.util
import re
from pathlib import Path

import sgrld

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _nav_pages() -> list[str]:
    """Every ``*.md`` file the nav of mkdocs.yml names (read as text: no YAML tags to resolve)."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1]
    nav = re.split(r"\n(?=\S)", nav, maxsplit=1)[0]  # up to the next top-level key
    return re.findall(r"([\w./-]+\.md)\s*$", nav, flags=re.M)


def test_nav_names_only_existing_pages():
    pages = _nav_pages()
    assert len(pages) >= 20
    assert [p for p in pages if not (DOCS / p).is_file()] == []
    assert len(set(pages)) == len(pages)


def test_every_page_is_in_the_nav():
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert on_disk - set(_nav_pages()) == set()


def test_every_public_name_is_in_the_api_reference():
    api = "\n".join(p.read_text(encoding="utf-8") for p in (DOCS / "api").glob("*.md"))
    missing = [name for name in sgrld.__all__ if not re.search(rf"\bsgrld\.{name}\b", api)]
    assert missing == []


def test_includes_name_existing_sections():
    """Each ``<!-- include FILE#Heading -->`` of a page finds its file and heading."""
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    includes = [m for p in DOCS.glob("*.md") for m in hooks.INCLUDE.finditer(p.read_text("utf-8"))]
    assert len(includes) >= 10
    for m in includes:
        assert hooks.section((ROOT / m["file"]).read_text("utf-8"), m["heading"]).strip()
