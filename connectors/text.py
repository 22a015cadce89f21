"""Text conversion: Markdown clean-up and HTML to Markdown with headings kept.

The chunker reads Markdown whose ``#`` lines are the headings. Connectors call
:func:`clean_markdown` on Markdown sources and :func:`html_to_markdown` on HTML, so every
document reaches the chunker in the same shape: headings as ATX lines, links reduced to their
text, images as ``[image: alt]``, no inline HTML, no template shortcodes.

HTML nested deeper than :data:`MAX_HTML_DEPTH` elements (``markdownify`` recurses per element, so
about 400 nested ``<div>`` raise ``RecursionError``) is flattened first by
:func:`flatten_deep_html`, so such a page is still indexed.
"""

from __future__ import annotations

import re
import unicodedata

from bs4 import BeautifulSoup, Comment, Declaration, Doctype, NavigableString, ProcessingInstruction, Tag
from markdownify import markdownify

__all__ = ["clean_markdown", "html_to_markdown", "flatten_deep_html", "slugify", "first_heading", "FenceTracker",
           "MAX_HTML_DEPTH"]

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

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\((?:[^()\s]|\([^)]*\))*(?:\s+\"[^\"]*\")?\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_LINK_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+\S+.*$")
_SHORTCODE = re.compile(r"\{\{[<%].*?[%>]\}\}", re.S)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BLANKS = re.compile(r"\n{3,}")


class FenceTracker:
    """Tracks fenced code blocks line by line, as CommonMark defines them: a fence opens with three or
    more backticks or tildes and closes only with a line of the same character at least as long, so
    a ```` ``` ```` inside a ``~~~`` block is code, not a closing fence."""

    def __init__(self) -> None:
        self._open: str | None = None

    @property
    def inside(self) -> bool:
        """True while inside a fenced block (after its opening line, before its closing one)."""
        return self._open is not None

    def feed(self, line: str) -> bool:
        """Consume ``line``; returns True when it is code or a fence line (not prose)."""
        m = _FENCE.match(line)
        if self._open is None:
            if m:
                self._open = m.group(1)
                return True
            return False
        if m and m.group(1)[0] == self._open[0] and len(m.group(1)) >= len(self._open) \
                and not line.strip()[len(m.group(1)):].strip():
            self._open = None
        return True


def _html_fragment_to_text(fragment: str) -> str:
    """Inline HTML inside Markdown: keep the readable text, drop the tags."""
    if "<" not in fragment:
        return fragment
    return _HTML_TAG.sub("", fragment)


def clean_markdown(md: str) -> str:
    """Normalise a Markdown page for chunking and quoting.

    Keeps headings, lists, tables, emphasis and fenced code verbatim; outside code fences it
    reduces links to their text, images to ``[image: alt]``, drops HTML comments, inline HTML
    tags, reference-link definitions and Hugo/Jinja-style shortcodes (``{{< ... >}}``).

    Args:
        md: Markdown text (front matter already removed).

    Returns:
        The cleaned Markdown, with at most one blank line between blocks.
    """
    md = md.replace("\r\n", "\n").replace("\r", "\n")
    # Split into prose and fenced-code segments first, so nothing inside code is touched.
    segments: list[tuple[bool, list[str]]] = []
    fence = FenceTracker()
    for line in md.split("\n"):
        code = fence.feed(line)
        if segments and segments[-1][0] == code:
            segments[-1][1].append(line)
        else:
            segments.append((code, [line]))
    out: list[str] = []
    for code, lines in segments:
        if code:
            out.extend(lines)
            continue
        prose = _SHORTCODE.sub("", _HTML_COMMENT.sub("", "\n".join(lines)))
        for line in prose.split("\n"):
            if _LINK_DEF.match(line):
                continue
            line = _IMAGE.sub(lambda m: f"[image: {m.group(1).strip()}]" if m.group(1).strip() else "", line)
            line = _LINK.sub(r"\1", line)
            line = _REF_LINK.sub(r"\1", line)
            line = _html_fragment_to_text(line)
            out.append(line.rstrip())
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
        alt = (img.get("alt") or "").strip()
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
    """Remove Markdown emphasis and code markers from a heading or title."""
    return re.sub(r"[*_`]+", "", text).strip()


def slugify(heading: str) -> str:
    """GitHub-style anchor for a heading: lowercase, punctuation dropped, spaces to hyphens.

    ``"Travel & Expenses (FY24)"`` becomes ``"travel--expenses-fy24"``, as GitHub and Hugo render it.
    """
    text = unicodedata.normalize("NFKC", strip_inline(heading)).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")
