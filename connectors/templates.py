"""Template leftovers in exported pages: shortcodes, unexpanded templates and MDX's JSX.

Static-site generators and wikis leave their own syntax in the source a connector reads; none of it
reads as written, and quoted raw it makes an answer look broken. Two cleaners, both for prose only
(callers keep fenced code out of them, see :func:`connectors.text.clean_markdown`):

- :func:`strip_templates`: Liquid / Jinja / Nunjucks tags (``{% ... %}``), output tags
  (``{{ ... }}``) and comments (``{# ... #}``, ``{% comment %}...{% endcomment %}``), Hugo
  shortcodes (``{{< ... >}}``, ``{{% ... %}}``) and unexpanded MediaWiki / Confluence templates
  (``{{Template|arg}}``). A tag whose visible text is its quoted argument keeps it
  (``{% slack_channel "#help" %}`` becomes ``#help``, ``{% page "Title" %}`` becomes ``Title``);
  control tags (``if``, ``for``, ``include``...), file paths and variables are dropped.
- :func:`strip_mdx`: an ``.mdx`` page without its ``import`` / ``export`` statements, JSX
  components (the tags go, their children's text stays) and ``{...}`` expressions.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .fences import FenceTracker

__all__ = ["strip_templates", "strip_mdx"]

#: Tag names that never stand for visible text (control flow, includes, layout).
_CONTROL = frozenset("""
if elif else elsif endif unless endunless for endfor while endwhile case when endcase with endwith
include include_relative import from extends block endblock macro endmacro call endcall set endset
raw endraw capture endcapture assign increment decrement cycle tablerow endtablerow break continue
filter endfilter autoescape endautoescape highlight endhighlight render section endsection layout
comment endcomment liquid echo link post_url seo feed_meta
""".split())

_COMMENT_BLOCK = re.compile(r"\{%-?\s*comment\s*-?%\}.*?\{%-?\s*endcomment\s*-?%\}", re.S | re.I)
_JINJA_COMMENT = re.compile(r"\{#.{0,2000}?#\}", re.S)
_HUGO = re.compile(r"\{\{[<%].{0,2000}?[%>]\}\}", re.S)
_TAG = re.compile(r"\{%-?\s*(.{0,2000}?)\s*-?%\}", re.S)
_OUTPUT = re.compile(r"\{\{-?\s*([^{}]{0,2000}?)\s*-?\}\}", re.S)
_QUOTED = re.compile(r"\"([^\"\n]{1,200})\"|'([^'\n]{1,200})'")
_PATHLIKE = re.compile(r"/|\\|\.(?:html?|md|mdx|liquid|njk|j2|jinja|ya?ml|json|png|jpe?g|gif|svg|css|js)$", re.I)


def _visible_argument(body: str) -> str:
    """The quoted argument a tag shows as text, or ``""`` (see the module docstring)."""
    name = m.group(0).lower() if (m := re.match(r"[\w.-]*", body)) else ""  # it always matches, maybe empty
    if name in _CONTROL:
        return ""
    m = _QUOTED.search(body)
    if not m:
        return ""
    arg = (m.group(1) or m.group(2) or "").strip()
    if not arg or _PATHLIKE.search(arg) or "{" in arg:
        return ""
    return arg


def _output(m: re.Match[str]) -> str:
    body = m.group(1).strip()
    literal = re.fullmatch(r"\"([^\"\n]{1,200})\"|'([^'\n]{1,200})'", body.split("|", 1)[0].strip())
    if literal:  # {{ "Save" | t }}: a literal is what the page shows
        return literal.group(1) or literal.group(2)
    return ""


_CODE_SPAN = re.compile(r"(`+)[^`\n].*?\1", re.S)


def _outside_code_spans(text: str, fn: Callable[[str], str]) -> str:
    """``fn`` applied to the parts of ``text`` outside inline code spans (```{{ x }}``` stays)."""
    if "`" not in text:
        return fn(text)
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(text):
        out.append(fn(text[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(fn(text[pos:]))
    return "".join(out)


def strip_templates(text: str) -> str:
    """Remove template syntax from prose, keeping a tag's visible argument (see the module docstring).

    Inline code spans (```{% raw %}```) are left as they are: they show the syntax on purpose.

    Args:
        text: prose (no fenced code; the caller keeps code verbatim).

    Returns:
        The text without shortcodes, tags, comments and unexpanded templates; nothing else changes.
    """
    if "{" not in text:
        return text
    return _outside_code_spans(text, _strip_templates)


def _strip_templates(text: str) -> str:
    text = _COMMENT_BLOCK.sub("", text)
    text = _JINJA_COMMENT.sub("", text)
    text = _HUGO.sub("", text)
    text = _TAG.sub(lambda m: _visible_argument(m.group(1)), text)
    # {{ var }}, {{generator:x}}, {{Template|arg}}: nested templates ({{a|{{b}}}}) from the inside out.
    for _ in range(5):
        new = _OUTPUT.sub(_output, text)
        if new == text:
            break
        text = new
    return text


# -- MDX -------------------------------------------------------------------------------------------

_MDX_STATEMENT = re.compile(r"^(?:import|export)\s")
_JSX_OPEN = re.compile(r"<(/?)([A-Z][\w.]*|>)?")


def _skip(text: str, i: int) -> int:
    """Index just past the JSX tag (``text[i] == "<"``) or ``{...}`` expression (``text[i] == "{"``)
    starting at ``i``: quotes and ``{}`` nesting are respected; the end of ``text`` when unclosed."""
    tag = text[i] == "<"
    depth = 0
    quote = ""
    for j in range(i + 1 if tag else i, len(text)):
        ch = text[j]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(depth - 1, 0)
            if not tag and depth == 0:
                return j + 1
        elif tag and ch == ">" and depth == 0:
            return j + 1
    return len(text)


def _strip_jsx(prose: str) -> str:
    out: list[str] = []
    i = 0
    n = len(prose)
    while i < n:
        ch = prose[i]
        if ch == "<":
            m = _JSX_OPEN.match(prose, i)
            if m and (m.group(2) or (m.group(1) and prose.startswith("</>", i)) or prose.startswith("<>", i)):
                i = _skip(prose, i)  # <Note type="x">, </Note>, <Card />, <> and </>
                continue
        elif ch == "{" and not prose.startswith("{{", i) and not prose.startswith("{%", i):
            i = _skip(prose, i)  # {/* comment */}, {props.value}
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def strip_mdx(text: str) -> str:
    """An ``.mdx`` page as Markdown: ``import``/``export`` statements, JSX component tags and ``{...}``
    expressions removed outside fenced code, the text between a component's tags kept.

    An ``import``/``export`` statement runs from its line to the next blank line (``export const
    meta = {...}`` may span lines). Lower-case HTML tags are left to the Markdown cleaner.

    Args:
        text: the page source (front matter already removed).

    Returns:
        Markdown; lines that held only JSX are left empty.
    """
    fence = FenceTracker()
    out: list[str] = []
    prose: list[str] = []
    in_statement = False

    def flush() -> None:
        if prose:
            out.append(_outside_code_spans("\n".join(prose), _strip_jsx))
            prose.clear()

    for line in text.replace("\r\n", "\n").split("\n"):
        if fence.feed(line):
            flush()
            out.append(line)
            continue
        if in_statement:
            in_statement = bool(line.strip())
            prose.append("")
            continue
        if _MDX_STATEMENT.match(line):
            in_statement = not _statement_complete(line)
            prose.append("")
            continue
        prose.append(line)
    flush()
    return "\n".join(out)


def _statement_complete(line: str) -> bool:
    """True when an import/export line is a whole statement (braces balanced, not ending in an operator)."""
    s = line.rstrip()
    return s.count("{") <= s.count("}") and s.count("(") <= s.count(")") and not s.endswith(("=", ",", "{", "("))
