"""MkDocs hook: pages include README and RESULTS sections by heading, not by line number.

A line ``<!-- include FILE#Heading -->`` in a page is replaced by that section of ``FILE`` (path
from the repository root): the lines under the heading up to the next heading of the same or a
higher level, without the heading itself, its sub-headings raised so that they sit one level
under the page title. ``<!-- include FILE -->`` includes the whole file, and ``FILE#`` the part
before its first ``##`` heading, title line left out. Links that are relative to the repository
root are rewritten to the site's pages (``benchmarks/RESULTS.md`` -> ``results.md``, ``docs/X`` ->
``X``), and so are a page's own links to the files it includes (``../README.md`` -> ``index.md``,
:data:`PAGE_LINKS`), which a page gives so that it reads in the repository too. The README
stays the one place these sections are written; the pages that include them are doctested
through the README itself.

Example:
    >>> text = "# T\\n\\nIntro\\n\\n## A\\n\\nSee [R](benchmarks/RESULTS.md#x).\\n\\n"
    >>> text += "### B\\n\\nb\\n\\n## C\\n"
    >>> print(section(text, "A"))
    See [R](results.md#x).
    <BLANKLINE>
    ## B
    <BLANKLINE>
    b
    >>> section(text, "")
    'Intro'
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r"^<!-- include (?P<file>[^#\s]+)(?:#(?P<heading>[^>]*?))? -->$", re.M)
HEADING = re.compile(r"^(#{1,6}) (.*)$")
LINKS = {"benchmarks/RESULTS.md": "results.md", "README.md": "index.md", "docs/": ""}
PAGE_LINKS = {"../README.md": "index.md", "../benchmarks/RESULTS.md": "results.md"}
"""Links of a page to the files it includes, which work in the repository, rewritten to the
site's pages that include them."""


def _rewrite_links(text: str) -> str:
    for old, new in LINKS.items():
        text = text.replace(f"]({old}", f"]({new}")
    return text


def section(text: str, heading: str | None) -> str:
    """The part of a Markdown ``text`` under ``heading`` (see the module docstring)."""
    lines, fence, out, level = text.splitlines(), False, [], None
    for line in lines:
        if line.startswith("```"):
            fence = not fence
        match = None if fence else HEADING.match(line)
        if heading is None:  # the whole file
            out.append(line)
            continue
        if level is None:  # looking for the start
            if heading == "" and match is None:
                continue
            if heading == "" and match and len(match.group(1)) == 1:
                level = 1
            elif match and match.group(2).strip() == heading:
                level = len(match.group(1))
            continue
        if match and len(match.group(1)) <= max(level, 2 if heading == "" else level):
            break
        if match:
            line = "#" * (len(match.group(1)) - level + 1) + " " + match.group(2)
        out.append(line)
    if heading is not None and level is None:
        raise ValueError(f"no heading {heading!r} to include")
    return _rewrite_links("\n".join(out).strip("\n"))


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 (MkDocs hook signature)
    def include(match: re.Match) -> str:
        text = (ROOT / match["file"]).read_text(encoding="utf-8")
        return section(text, match["heading"])

    markdown = INCLUDE.sub(include, markdown)
    for old, new in PAGE_LINKS.items():
        markdown = markdown.replace(f"]({old}", f"]({new}")
    return markdown
