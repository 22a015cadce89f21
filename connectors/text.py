"""Text conversion: Markdown clean-up and HTML to Markdown with headings kept.

The chunker reads Markdown whose ``#`` lines are the headings. Connectors call
:func:`clean_markdown` on Markdown sources and :func:`html_to_markdown` on HTML, so every
document reaches the chunker in the same shape: headings as ATX lines, links reduced to their
text, images as ``[image: alt]``, no inline HTML, no template shortcodes.
"""

from __future__ import annotations

import re
import unicodedata

from bs4 import BeautifulSoup
from markdownify import markdownify

__all__ = ["clean_markdown", "html_to_markdown", "slugify", "first_heading", "FenceTracker"]

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


def html_to_markdown(html: str) -> tuple[str, str]:
    """Convert an HTML page to Markdown with ATX headings, and find its title.

    Uses BeautifulSoup (``html.parser``) to drop ``script``/``style``/``nav`` and read ``<title>``,
    then ``markdownify`` for the body.

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
