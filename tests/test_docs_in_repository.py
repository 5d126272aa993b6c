"""The documentation reads in the repository as well as on the site (issue 53): a page made of
``mkdocs`` directives (``<!-- include ... -->``, ``::: module``) still has a line of text and a
link that works on disk, and the README's first link is "Your first posterior"."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DIRECTIVE = re.compile(r"^(<!-- include .*-->|::: .*|    options:.*|      members: .*)$", re.M)
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _prose(text: str) -> str:
    """The page without its title, its directives and its code blocks."""
    text = re.sub(r"```.*?```", "", re.sub(r"\A# .*\n", "", text), flags=re.S)
    return "\n".join(line for line in DIRECTIVE.sub("", text).splitlines() if line.strip())


@pytest.mark.parametrize("page", sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")))
def test_every_page_has_text_and_a_link_that_works_in_the_repository(page):
    path = DOCS / page
    prose = _prose(path.read_text(encoding="utf-8"))
    assert len(prose.split()) >= 8, f"{page} is only directives"
    targets = [m[1] for m in LINK.finditer(prose) if not m[1].startswith(("http", "mailto"))]
    working = [t for t in targets if (path.parent / t).exists()]
    assert working, f"{page}: no link that works in the repository ({targets})"


def test_readmes_first_link_is_your_first_posterior():
    first = LINK.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert first[1] == "docs/first-posterior.md"
