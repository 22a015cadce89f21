"""Text conversion: Markdown clean-up and HTML to Markdown with headings kept.

The chunker reads Markdown whose ``#`` lines are the headings. Connectors call
:func:`clean_markdown` on Markdown sources and :func:`html_to_markdown` on HTML, so every
document reaches the chunker in the same shape: headings as ATX lines, links reduced to their
text, images as ``[image: alt]``, no inline HTML, no template shortcodes. Inline Markdown is read
by markdown-it-py (:mod:`connectors.markdown_inline`), never by regexes.

HTML nested deeper than :data:`MAX_HTML_DEPTH` elements (``markdownify`` recurses per element, so
about 400 nested ``<div>`` raise ``RecursionError``) is flattened first by
:func:`flatten_deep_html`, so such a page is still indexed.
"""

from __future__ import annotations

import re
import unicodedata

from bs4 import BeautifulSoup, Comment, Declaration, Doctype, NavigableString, ProcessingInstruction, Tag
from markdown_it import MarkdownIt
from markdownify import markdownify

from .fences import FenceTracker
from .markdown_inline import clean_inline, parse_blocks, plain_inline
from .templates import strip_templates

__all__ = ["clean_markdown", "html_to_markdown", "flatten_deep_html", "slugify", "first_heading", "FenceTracker",
           "join_soft_breaks", "MAX_HTML_DEPTH"]

#: Elements nested deeper than this are flattened before ``markdownify`` (which recurses per element).
MAX_HTML_DEPTH = 100
#: Elements that end a paragraph when the deep part of a page is flattened.
_BLOCK_TAGS = frozenset({
    "address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "dialog", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
    "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
})
_KEPT_BLOCKS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6", "pre"})
_NOT_TEXT = (Comment, Declaration, Doctype, ProcessingInstruction)

_TEMPLATE_LINE = re.compile(r"^\s*(?:\{%.*?%\}|\{\{.*?\}\}|\{#.*?#\}|\s)+$")
_HARD_BREAK = re.compile(r"(?: {2,}|\\)$")
_QUOTE_MARKS = re.compile(r"^\s*(?:>\s?)*")
# Block structure only: inline parsing (emphasis, links) is not needed to find paragraphs' lines.
_PARSER = MarkdownIt("commonmark", {"html": True}).enable("table").disable(["inline", "text_join"])
# Comments go before template lines are dropped and paragraphs joined, as text: one may span blank lines
# (CommonMark then sees no comment, only its pieces) or hide a paragraph, a heading or template tags.
# Template syntax (Jinja/Liquid/Hugo, _TEMPLATE_LINE) is no Markdown at all: markdown-it has no token for it.
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BLANKS = re.compile(r"\n{3,}")


def join_soft_breaks(md: str) -> str:
    """Join the lines of each Markdown paragraph into one line, as CommonMark renders them.

    A paragraph hard-wrapped at 80 columns becomes one line (a soft line break is a space), so a
    sentence is never cut at a line end. Parsed with ``markdown-it-py`` (CommonMark plus GFM
    tables): list items' paragraphs join the same way (the marker stays on the first line), block
    quotes lose the ``>`` of their continuation lines; hard breaks (two trailing spaces or a
    backslash) stay line breaks; tables, code (fenced or indented), HTML blocks and ATX headings are
    left as they are; a setext heading (``Title`` over ``=====``) becomes an ATX line (``# Title``),
    the shape the chunker reads.

    Args:
        md: Markdown.

    Returns:
        The same Markdown with as many or fewer lines; no text is added or dropped.
    """
    lines = md.split("\n")
    if len(lines) < 2:
        return md
    replace: dict[int, tuple[int, str]] = {}  # first line -> (end line, new text)
    quote_depth = 0
    for tok in _PARSER.parse(md):
        if tok.type == "blockquote_open":
            quote_depth += 1
        elif tok.type == "blockquote_close":
            quote_depth -= 1
        elif tok.type == "heading_open" and tok.markup in ("=", "-") and tok.map:
            s, e = tok.map
            body = " ".join(_continuation(lines[i], quote_depth) for i in range(s, e - 1))
            replace[s] = (e, f"{'#' * int(tok.tag[1])} {body.strip()}")
        elif tok.type == "paragraph_open" and tok.map and tok.map[1] - tok.map[0] > 1:
            s, e = tok.map
            e = min(e, len(lines))
            out = [lines[s]]
            for i in range(s + 1, e):
                cont = _continuation(lines[i], quote_depth)
                if _HARD_BREAK.search(lines[i - 1]):
                    out[-1] = out[-1].rstrip(" \\")
                    out.append(cont)
                elif cont:
                    out[-1] = f"{out[-1].rstrip()} {cont}"
            out[-1] = out[-1].rstrip()
            replace[s] = (e, "\n".join(out))
    if not replace:
        return md
    result: list[str] = []
    i = 0
    while i < len(lines):
        if i in replace:
            end, text = replace[i]
            result.append(text)
            i = max(end, i + 1)
        else:
            result.append(lines[i])
            i += 1
    return "\n".join(result)


def _continuation(line: str, quote_depth: int) -> str:
    """A paragraph's later line without its indentation (and block-quote markers inside a quote)."""
    if quote_depth:
        line = _QUOTE_MARKS.sub("", line)
    return line.strip()


def _split_fenced(md: str) -> list[tuple[bool, list[str]]]:
    """``md`` as runs of lines: ``(True, lines)`` for fenced code (fence lines included), else prose."""
    segments: list[tuple[bool, list[str]]] = []
    fence = FenceTracker()
    for line in md.split("\n"):
        code = fence.feed(line)
        if segments and segments[-1][0] == code:
            segments[-1][1].append(line)
        else:
            segments.append((code, [line]))
    return segments


def clean_markdown(md: str) -> str:
    """Normalise a Markdown page for chunking and quoting.

    Keeps headings, lists, tables, emphasis and fenced code verbatim; outside code fences it
    drops HTML comments and template syntax (:func:`connectors.templates.strip_templates`: Hugo
    shortcodes, Liquid/Jinja tags, unexpanded wiki templates; a line that held only template tags
    goes), joins each paragraph's soft-wrapped lines into one (:func:`join_soft_breaks`), then
    renders each line's inline syntax as CommonMark reads it (markdown-it-py,
    :func:`connectors.markdown_inline.clean_inline`): links (inline, reference, shortcut) become
    their label, images ``[image: alt]``, inline HTML goes, code spans stay as written; link
    reference definitions (all their lines) go. Lines stay lines: block structure is untouched.

    Args:
        md: Markdown text (front matter already removed).

    Returns:
        The cleaned Markdown, with at most one blank line between blocks.
    """
    md = md.replace("\r\n", "\n").replace("\r", "\n")
    # Split into prose and fenced-code segments first, so nothing inside code is touched.
    stage: list[str] = []
    for code, lines in _split_fenced(md):
        if code:
            stage.extend(lines)
            continue
        kept = [line for line in lines if not ("{" in line and _TEMPLATE_LINE.match(line)
                                               and not strip_templates(line).strip())]
        stage.append(strip_templates(_HTML_COMMENT.sub("", "\n".join(kept))))
    joined = join_soft_breaks("\n".join(stage))
    # Link reference definitions (for reference links, and their lines go); none without a "]:".
    tokens, env = parse_blocks(joined) if "]:" in joined else ([], {})
    definitions = {i for tok in tokens if tok.type == "definition" and tok.map for i in range(*tok.map)}
    out: list[str] = []
    first = 0  # the line number of the segment's first line in ``joined``
    for code, lines in _split_fenced(joined):
        if code:
            out.extend(lines)
        else:
            out.extend(clean_inline(line, env).rstrip() for i, line in enumerate(lines, first) if i not in definitions)
        first += len(lines)
    text = "\n".join(out)
    return _BLANKS.sub("\n\n", text).strip()


def flatten_deep_html(root: Tag, max_depth: int = MAX_HTML_DEPTH) -> int:
    """Flatten the elements of ``root`` nested more than ``max_depth`` levels deep, in place.

    The content of each element at depth ``max_depth`` (``root``'s children are at depth 1) is
    replaced by flat paragraphs, in document order: its text, cut into ``<p>`` at every block
    element (``div``, ``p``, ``li``, ``td``, ...); headings stay ``<h1>``-``<h6>`` and ``<pre>`` keeps
    its text verbatim, so the chunker still cuts at the headings. Inline markup (emphasis, spans)
    below that depth is lost, its text is kept. Iterative and linear in the size of the tree, so
    any depth is safe; pages nested less deeply are not changed.

    Args:
        root: a parsed tree (a ``BeautifulSoup`` object or a ``Tag``).
        max_depth: the deepest element level left as it is.

    Returns:
        How many elements had their content flattened (0 for a normal page).
    """
    deep: list[Tag] = []
    stack: list[tuple[Tag, int]] = [(root, 0)]
    while stack:
        tag, depth = stack.pop()
        children = [c for c in tag.contents if isinstance(c, Tag)]
        if depth >= max_depth and children:
            deep.append(tag)
        elif depth < max_depth:
            stack.extend((c, depth + 1) for c in children)
    if not deep:
        return 0
    top: Tag = root
    while top.parent is not None:
        top = top.parent
    for tag in deep:
        _flatten(tag, top)
    return len(deep)


def _flatten(tag: Tag, top: Tag) -> None:
    """Replace ``tag``'s content with flat paragraphs (see :func:`flatten_deep_html`)."""
    blocks: list[tuple[str, str]] = []
    texts: list[str] = []
    kinds: list[str] = []

    def close() -> None:
        text = "".join(texts)
        if text.strip():
            blocks.append((kinds[-1] if kinds else "p", text))
        texts.clear()

    stack: list[tuple[object, bool]] = [(c, False) for c in reversed(tag.contents)]
    while stack:
        node, leaving = stack.pop()
        if isinstance(node, Tag):
            name = (node.name or "").lower()
            if leaving:
                if name in _BLOCK_TAGS:
                    close()
                if name in _KEPT_BLOCKS and kinds:
                    kinds.pop()
                continue
            if name in _BLOCK_TAGS:
                close()
            if name in _KEPT_BLOCKS:
                kinds.append(name)
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(node.contents))
        elif isinstance(node, NavigableString) and not isinstance(node, _NOT_TEXT):
            texts.append(str(node))
    close()
    for i in range(len(tag.contents) - 1, -1, -1):  # from the end: each removal is O(1)
        tag.contents[i].extract(_self_index=i)
    for name, text in blocks:
        new = top.new_tag(name) if isinstance(top, BeautifulSoup) else Tag(name=name)
        new.string = text
        tag.append(new)


def html_to_markdown(html: str) -> tuple[str, str]:
    """Convert an HTML page to Markdown with ATX headings, and find its title.

    Uses BeautifulSoup (``html.parser``) to drop ``script``/``style``/``nav`` and read ``<title>``,
    flattens markup nested deeper than :data:`MAX_HTML_DEPTH` (:func:`flatten_deep_html`), then
    ``markdownify`` for the body.

    Args:
        html: the page's HTML.

    Returns:
        ``(title, markdown)``; ``title`` is ``""`` when the page has no ``<title>``.
    """
    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(["script", "style", "nav", "head", "noscript"]):
        tag.decompose()
    for img in soup.find_all("img"):
        alt = img.get("alt")
        alt = alt.strip() if isinstance(alt, str) else ""  # alt is single-valued: a str, never a list
        img.replace_with(f"[image: {alt}]" if alt else "")
    for a in soup.find_all("a"):
        a.replace_with(a.get_text())
    body = soup.body or soup
    flatten_deep_html(body)
    md = markdownify(str(body), heading_style="ATX", bullets="-", strip=["span"])
    return title, clean_markdown(md)


def first_heading(md: str) -> str:
    """Return the text of the first ATX heading of ``md`` outside code fences, or ``""``."""
    fence = FenceTracker()
    for line in md.split("\n"):
        if not fence.feed(line):
            m = _ATX.match(line)
            if m:
                return strip_inline(m.group(2))
    return ""


def strip_inline(text: str) -> str:
    """A heading or title without its Markdown inline syntax (:func:`connectors.markdown_inline.plain_inline`).

    Emphasis markers and code spans' backticks go (``snake_case`` and a lone ``*`` are text and stay),
    links keep their label, inline HTML goes; leading and trailing spaces go.
    """
    return plain_inline(text)


def slugify(heading: str) -> str:
    """GitHub-style anchor for a heading: lowercase, punctuation dropped, spaces to hyphens.

    ``"Travel & Expenses (FY24)"`` becomes ``"travel--expenses-fy24"``, as GitHub and Hugo render it.
    """
    text = unicodedata.normalize("NFKC", strip_inline(heading)).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")
