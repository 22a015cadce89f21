"""Markdown to Slack mrkdwn, Markdown made safe for Slack's ``markdown`` block, and splitting text to
Slack's limits (pure functions).

The ``markdown`` block renders standard Markdown itself, so answers go out as the agent wrote them; only
what Slack itself would read in text from a page is neutralised (:func:`markdown_safe`, for posted and
streamed answers alike): its control sequences (``<!channel>``, ``<!here>``, ``<@U123>``, ``<#C123>``,
``<!subteam^...>``) and its links (``<https://evil|https://intranet>``), by escaping ``&``, ``<`` and
``>`` as Slack's formatting rules ask (a blockquote's leading ``>`` aside), and Markdown links whose label
reads as another address than their target (:func:`bot.links.honest_links`). The mrkdwn conversion
(:func:`to_mrkdwn`, a renderer over markdown-it-py's tokens) remains for section text (pending action
previews, notices).

Slack's mrkdwn differs from Markdown: ``*bold*``, ``_italic_``, ``~strike~``, ``<url|label>`` links, no
headings (rendered bold here), and ``&``, ``<``, ``>`` must be escaped. Code spans and fenced code keep
their content (escaped only). Citation markers such as ``[1]`` pass through unchanged.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from ..links import honest_links

__all__ = ["to_mrkdwn", "markdown_safe", "markdown_piece", "escape", "split_text", "truncate"]

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


#: CommonMark with GFM strikethrough; raw HTML stays text (it is escaped like any other).
_PARSER = MarkdownIt("commonmark", {"html": False}).enable("strikethrough")
_INLINE_MARKS = {"strong": "*", "em": "_", "s": "~"}
_RULE = "──────────"


def _inline(tokens: list[Token], marks: bool = True) -> str:
    """mrkdwn for one inline token's children: ``*bold*``, ``_italic_``, ``~strike~``, ``<url|label>``
    links (labels plain text), code spans escaped; ``marks=False`` drops the emphasis marks (headings,
    which are bold already, and link labels)."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        kind = tok.type.rsplit("_", 1)[0] if tok.type.endswith(("_open", "_close")) else tok.type
        if kind in _INLINE_MARKS:
            out.append(_INLINE_MARKS[kind] if marks else "")
        elif tok.type == "link_open":
            depth, j = 1, i + 1
            while j < len(tokens) and depth:
                depth += {"link_open": 1, "link_close": -1}.get(tokens[j].type, 0)
                j += 1
            href = str(tok.attrs.get("href", ""))
            if tok.markup == "autolink":  # <https://...>: Slack shows the address itself
                out.append(f"<{href}>")
            else:
                label = _inline(tokens[i + 1:j - 1], marks=False).replace("|", "∣")
                out.append(f"<{href}|{label}>" if label else f"<{href}>")
            i = j
            continue
        elif tok.type == "image":
            out.append(f"<{tok.attrs.get('src', '')}|{escape(tok.content) or 'image'}>")
        elif tok.type == "code_inline":
            out.append(f"`{escape(tok.content)}`")
        elif tok.type in ("softbreak", "hardbreak"):
            out.append("\n")
        else:
            out.append(escape(tok.content))
        i += 1
    return "".join(out)


def _blocks(tokens: list[Token], depth: int = 0) -> list[tuple[int, int, str]]:
    """The top-level blocks of ``tokens`` as (first source line, last source line, mrkdwn); list items
    indented two spaces per nesting level ``depth``."""
    out: list[tuple[int, int, str]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        first, last = (tok.map or (0, 0))[0], (tok.map or (0, 1))[1]
        if tok.nesting == 1:  # a container: find its close at the same level
            level, j = 1, i + 1
            while level:
                level += tokens[j].nesting
                j += 1
            inner = tokens[i + 1:j - 1]
            if tok.type == "heading_open":
                out.append((first, last, f"*{_inline(inner[0].children or [], marks=False).strip()}*"))
            elif tok.type == "paragraph_open":
                out.append((first, last, _inline(inner[0].children or [])))
            elif tok.type == "blockquote_open":
                body = _join(_blocks(inner))
                out.append((first, last, "\n".join(f"> {line}" if line else ">" for line in body.split("\n"))))
            elif tok.type in ("bullet_list_open", "ordered_list_open"):
                start = int(tok.attrs.get("start", 1) or 1)
                items = [b for b in _blocks(inner, depth) if b[2]]
                out.extend(items if tok.type == "bullet_list_open" else
                           [(f, la, text.replace("• ", f"{start + n}. ", 1)) for n, (f, la, text) in enumerate(items)])
            elif tok.type == "list_item_open":
                parts = _blocks(inner, depth + 1)
                opens_with_text = bool(inner) and inner[0].type == "paragraph_open" and bool(parts)
                lead, rest = (parts[0][2], parts[1:]) if opens_with_text else ("", parts)
                text = "  " * depth + "• " + lead
                out.append((first, last, "\n".join([text] + [t for _, _, t in rest])))
            else:
                out.extend(_blocks(inner, depth))
            i = j
            continue
        if tok.type in ("fence", "code_block"):
            out.append((first, last, "```" + escape(tok.content.strip("\n")) + "```"))
        elif tok.type == "hr":
            out.append((first, last, _RULE))
        elif tok.type == "inline":
            out.append((first, last, _inline(tok.children or [])))
        i += 1
    return out


def _join(blocks: list[tuple[int, int, str]]) -> str:
    """Blocks joined as they stood in the source: a blank line where one separated them, else a newline."""
    out: list[str] = []
    end = None
    for first, last, text in blocks:
        if end is not None:
            out.append("\n\n" if first > end else "\n")
        out.append(text)
        end = last
    return "".join(out)


def to_mrkdwn(markdown: str) -> str:
    """Markdown (CommonMark, parsed by markdown-it-py) to Slack mrkdwn (see the module docstring): emphasis
    as ``*bold*``, ``_italic_``, ``~strike~``; links as ``<url|label>`` (a label reading as another address
    shows the target, :func:`bot.links.honest_links`); headings bold; list items as ``•`` or numbers;
    quotes, code and rules kept; ``&``, ``<`` and ``>`` escaped everywhere. Never raises; ``None`` gives
    ``""``."""
    if not markdown:
        return ""
    return _join(_blocks(_PARSER.parse(honest_links(markdown)))).strip()


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
