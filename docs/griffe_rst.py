"""Griffe extension: the reStructuredText left in sgrld's Google-style docstrings, as Markdown.

The docstrings mix Google sections with a little reST. Before mkdocstrings parses them, this
rewrites (only in the text it renders, never in the sources):

* ``Example:`` to ``Examples:``, the Google section whose ``>>>`` lines griffe renders as code
  (griffe reads a singular ``Example:`` as an admonition of Markdown text);
* ``:func:`~sgrld.chains.engine.is_kept``` (and ``:class:``, ``:mod:``, ``:attr:``, ``:meth:``, ``:data:``,
  ``:exc:``, ``:obj:``) to a link where the name resolves to a documented object, else code, and
  ``:math:`x``` to inline maths;
* ``.. math::`` blocks to ``$$ … $$`` (rendered by MathJax) and ``.. code-block:: LANG`` to
  fenced code;
* an ``Args:``/``Attributes:`` entry naming several fields (``potential, grad_norm: as in X``),
  which Google style does not have, to one entry per name with the same description.

Example:
    >>> print(rst_to_markdown(".. math:: a\\n          + b\\n\\nSee :func:`~x.f`.", lambda n: None))
    $$
    a
    + b
    $$
    <BLANKLINE>
    See `f`.
    >>> print(rst_to_markdown("Attributes:\\n  a, b,\\n  c: as in X.", lambda n: None))
    Attributes:
      a: as in X.
      b: as in X.
      c: as in X.
"""

import re
import textwrap
from collections.abc import Callable

try:
    import griffe
except ImportError:  # `make test` installs no docs extra: only this module's doctests run then
    griffe = None

ROLE = re.compile(r":(?:func|class|mod|attr|meth|data|exc|obj):`(?P<tilde>~?)(?P<name>[^`<]+?)`")
MATH = re.compile(r":math:`(?P<tex>[^`]+)`")
NAMES = re.compile(
    r"^(?P<indent>[ \t]+)(?P<names>\w+(?:,[ \t]*\n?[ \t]*\w+)+):(?P<desc>[^\n]*)$", re.M
)
DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)\.\. (?P<kind>math|code-block)::[ \t]*(?P<rest>.*)$")


def _directives(text: str) -> str:
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        match = DIRECTIVE.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent, body = match["indent"], [match["rest"]] if match["kind"] == "math" else []
        i += 1
        while i < len(lines) and (
            not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)
        ):
            body.append(lines[i])
            i += 1
        while body and not body[-1].strip():  # trailing blank lines stay outside the block
            body.pop()
            i -= 1
        first, rest = (body[0].strip(), body[1:]) if match["kind"] == "math" else ("", body)
        rest = textwrap.dedent("\n".join(rest)).strip("\n").splitlines()
        if match["kind"] == "math":
            block = ["$$", *([first] if first else []), *rest, "$$"]
        else:
            block = [f"```{match['rest'].strip()}", *rest, "```"]
        out.extend(indent + line if line else line for line in block)
    return "\n".join(out)


def rst_to_markdown(text: str, resolve: Callable[[str], str | None]) -> str:
    """``text`` with the reST above as Markdown; ``resolve(name)`` gives a full path or None."""
    text = re.sub(r"^([ \t]*)Example:[ \t]*$", r"\1Examples:", text, flags=re.M)

    def role(match: re.Match) -> str:
        name = match["name"].strip().removesuffix("()")
        shown = name.rsplit(".", 1)[-1] if match["tilde"] else name
        target = resolve(name)
        if target is None:
            return f"`{shown}`"
        return f'<autoref identifier="{target}" optional>`{shown}`</autoref>'

    def names(match: re.Match) -> str:
        fields = re.split(r",\s*", match["names"])
        return "\n".join(f"{match['indent']}{field}:{match['desc']}" for field in fields)

    text = MATH.sub(lambda m: f"\\({m['tex']}\\)", ROLE.sub(role, text))
    return _directives(NAMES.sub(names, text))


def _resolver(obj: "griffe.Object") -> Callable[[str], str | None]:
    def resolve(name: str) -> str | None:
        head, _, tail = name.partition(".")
        if head == "sgrld":
            return name
        for scope in (obj, obj.parent):
            if scope is None:
                continue
            try:
                path = scope.resolve(head)
            except Exception:  # noqa: BLE001 (griffe raises several kinds; unresolved is fine)
                continue
            return f"{path}.{tail}" if tail else path
        return None

    return resolve


class RstToMarkdown(griffe.Extension if griffe else object):
    """Rewrites each loaded object's docstring (see the module docstring)."""

    def on_instance(self, *, obj: "griffe.Object", **kwargs) -> None:  # noqa: ARG002
        if obj.docstring is not None:
            obj.docstring.value = rst_to_markdown(obj.docstring.value, _resolver(obj))
