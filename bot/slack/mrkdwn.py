"""Markdown to Slack mrkdwn, Markdown made safe for Slack's ``markdown`` block, and splitting text to
Slack's limits (pure functions).

The ``markdown`` block renders standard Markdown itself, so answers go out as the agent wrote them; only
what Slack itself would read in text from a page is neutralised (:func:`markdown_safe`, for posted and
streamed answers alike): its control sequences (``<!channel>``, ``<!here>``, ``<@U123>``, ``<#C123>``,
``<!subteam^...>``) and its links (``<https://evil|https://intranet>``), by escaping ``&``, ``<`` and
``>`` as Slack's formatting rules ask (a blockquote's leading ``>`` aside), and Markdown links whose label
reads as another address than their target (:func:`bot.links.honest_links`). The mrkdwn conversion
(:func:`to_mrkdwn`) remains for section text (pending action previews, notices).

Slack's mrkdwn differs from Markdown: ``*bold*``, ``_italic_``, ``~strike~``, ``<url|label>`` links, no
headings (rendered bold here), and ``&``, ``<``, ``>`` must be escaped. Code spans and fenced code keep
their content (escaped only). Citation markers such as ``[1]`` pass through unchanged.
"""

from __future__ import annotations

import re

from ..links import honest_links

__all__ = ["to_mrkdwn", "markdown_safe", "markdown_piece", "escape", "split_text", "truncate"]

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_CODE = re.compile(r"`[^`\n]+`")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")

# Private-use characters as placeholders: they cannot occur in Slack text we would produce.
_B = "\ue000"
_P = "\ue001"


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


def _inline(text: str) -> str:
    """Convert one line of Markdown (code spans already protected) to mrkdwn."""
    links: list[str] = []

    def keep(s: str) -> str:
        links.append(s)
        return f"{_P}{len(links) - 1}{_P}"

    text = _IMAGE.sub(lambda m: keep(f"<{m.group(2)}|{escape(m.group(1)) or 'image'}>"), text)
    text = _LINK.sub(lambda m: keep(f"<{m.group(2)}|{escape(m.group(1)).replace('|', '∣')}>"), honest_links(text))
    text = escape(text)
    text = _BOLD.sub(lambda m: f"{_B}{m.group(2)}{_B}", text)
    text = _ITALIC_STAR.sub(lambda m: f"_{m.group(1)}_", text)
    text = _STRIKE.sub(lambda m: f"~{m.group(1)}~", text)
    text = text.replace(_B, "*")
    return re.sub(f"{_P}(\\d+){_P}", lambda m: links[int(m.group(1))], text)


def _line(line: str) -> str:
    if _RULE.match(line):
        return "──────────"
    m = _HEADING.match(line)
    if m:
        return f"*{_inline(m.group(1)).strip('*')}*"
    m = _QUOTE.match(line)
    if m:
        return "> " + _line(m.group(1)) if m.group(1).strip() else ">"
    m = _BULLET.match(line)
    if m:
        return f"{m.group(1)}• {_inline(m.group(2))}"
    return _inline(line)


def _prose(text: str) -> str:
    """Convert Markdown without fenced code to mrkdwn, protecting inline code spans."""
    out = []
    for line in text.split("\n"):
        spans: list[str] = []

        def keep(m: re.Match[str]) -> str:
            spans.append(escape(m.group(0)))
            return f"{_P}c{len(spans) - 1}{_P}"

        protected = _CODE.sub(keep, line)
        converted = _line(protected)
        out.append(re.sub(f"{_P}c(\\d+){_P}", lambda m: spans[int(m.group(1))], converted))
    return "\n".join(out)


def to_mrkdwn(markdown: str) -> str:
    """Markdown to Slack mrkdwn (see the module docstring). Never raises; ``None`` gives ``""``."""
    if not markdown:
        return ""
    parts: list[str] = []
    pos = 0
    for m in _FENCE.finditer(markdown):
        parts.append(_prose(markdown[pos:m.start()]))
        body = m.group(0)[3:]
        body = body[:-3] if body.endswith("```") else body
        body = body.split("\n", 1)[1] if "\n" in body and re.match(r"^[\w+-]*\n", body) else body
        parts.append("```" + escape(body.strip("\n")) + "```")
        pos = m.end()
    parts.append(_prose(markdown[pos:]))
    return "".join(parts).strip()


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
