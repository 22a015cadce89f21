"""Markdown made safe for Slack's ``markdown`` block, mrkdwn escaping, and splitting text to Slack's
limits (pure functions).

The ``markdown`` block renders standard Markdown itself, so answers go out as the agent wrote them; only
what Slack itself would read in text from a page is neutralised (:func:`markdown_safe`, for posted and
streamed answers alike): its control sequences (``<!channel>``, ``<!here>``, ``<@U123>``, ``<#C123>``,
``<!subteam^...>``) and its links (``<https://evil|https://intranet>``), by escaping ``&``, ``<`` and
``>`` as Slack's formatting rules ask (a blockquote's leading ``>`` aside), and Markdown links whose label
reads as another address than their target (:func:`bot.links.honest_links`). Section text (previews,
notices) is plain text escaped by :func:`escape` (mrkdwn needs ``&``, ``<`` and ``>`` escaped).
"""

from __future__ import annotations

import re

from ..links import honest_links

__all__ = ["markdown_safe", "markdown_piece", "escape", "split_text", "truncate"]

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_CODE = re.compile(r"`[^`\n]+`")


def escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` as Slack requires."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# inside code, where entities show as typed: a "<" Slack could read as a mention, a broadcast or a link
_CONTROL = re.compile(r"<(?=[!@#]|[a-z][a-z0-9+.-]*:)", re.I)
# outside code: "&" not already an entity, "<", and ">" but a blockquote's at the start of a line
_ENTITY = re.compile(r"&(?!(?:amp|lt|gt);)|<|(?<!^)(?<!^>)(?<!^ >)>", re.M)
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _prose_safe(text: str) -> str:
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(0)[0]], honest_links(text))


def markdown_piece(markdown: str) -> str:
    """:func:`markdown_safe` without trimming, for one piece of a streamed answer (the pieces, each made
    safe, join to the whole made safe, as long as no code span is cut between two pieces)."""
    if not markdown:
        return ""
    out: list[str] = []
    pos = 0
    for m in re.finditer(f"{_FENCE.pattern}|{_CODE.pattern}", markdown, re.S):
        out.append(_prose_safe(markdown[pos:m.start()]))
        out.append(_CONTROL.sub("<\u2060", m.group(0)))
        pos = m.end()
    out.append(_prose_safe(markdown[pos:]))
    return "".join(out)


def markdown_safe(markdown: str) -> str:
    """``markdown`` for a ``markdown`` block (posted or streamed), with what Slack would read in it
    neutralised: outside code ``&``, ``<`` and ``>`` become entities (Markdown shows them as typed; Slack no
    longer reads a mention, a broadcast or a ``<url|label>`` link; a blockquote's ``>`` stays) and a Markdown
    link labelled with another address than its target shows the target (:func:`bot.links.honest_links`);
    inside code, where entities are shown as typed, such a ``<`` is followed by an invisible word joiner
    (U+2060). Never raises; ``None`` gives ``""``."""
    return markdown_piece(markdown).strip()


def _cut_point(text: str, limit: int) -> int:
    """Where to cut ``text`` at or before ``limit``: a paragraph, line, sentence or word boundary."""
    window = text[:limit]
    for sep in ("\n\n", "\n", ". ", "! ", "? ", "; ", ", ", " "):
        i = window.rfind(sep)
        if i > limit // 3:
            return i + len(sep)
    return limit


def split_text(text: str, limit: int) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` characters at natural boundaries.

    A piece that ends inside a fenced code block closes the fence and the next piece reopens it.
    Entities such as ``&amp;`` and links such as ``<url|label>`` are never cut in half.

    Raises:
        ValueError: when ``limit`` is under 20.
    """
    if limit < 20:
        raise ValueError("limit must be at least 20 characters")
    text = text.strip()
    pieces: list[str] = []
    reopen = False
    while text:
        if reopen:
            text = "```" + text
        if len(text) <= limit:
            pieces.append(text)
            break
        cut = _cut_point(text, limit - 3)
        # never inside a <...> link or an &...; entity
        lt, gt = text.rfind("<", 0, cut), text.rfind(">", 0, cut)
        if lt > gt and lt > 0:
            cut = lt
        amp = text.rfind("&", max(0, cut - 6), cut)
        if amp != -1 and ";" not in text[amp:cut] and re.match(r"&(amp|lt|gt);", text[amp:amp + 5]):
            cut = amp
        if cut <= 3:
            cut = limit - 3
        piece, text = text[:cut].rstrip(), text[cut:].lstrip()
        reopen = piece.count("```") % 2 == 1
        if reopen:
            piece += "```"
        pieces.append(piece)
    return [p for p in pieces if p.strip()]


def truncate(text: str, limit: int, marker: str = "…") -> str:
    """``text`` cut to at most ``limit`` characters, ending with ``marker`` when cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(marker))].rstrip() + marker
