"""Pure renderers for Teams: answer and refusal Adaptive Cards, citation entities, help text.

One rendering per answer: the card alone carries the answer (the activity has no ``text``; its
``summary``, from :func:`summary`, is what notifications and the chat list show). The answer's blocks
(:func:`bot.markdown_blocks.parse_blocks`) become card elements: prose in a ``TextBlock`` (Teams supports
a Markdown subset: bold, italic, lists, links), each list in a ``TextBlock`` of its own as a Markdown list,
each table as a ``Table`` element. Cards declare Adaptive Card schema 1.4, or 1.5 (the version Teams
renders up to, and the one that brought ``Table``) when they hold a table. Numbered sources are
``Action.OpenUrl`` buttons. Feedback is Teams' own thumbs up / down (``channelData.feedbackLoopEnabled``,
handled in :mod:`bot.teams.bot`), not card buttons. A streamed answer (personal chats,
:mod:`bot.teams.streaming`) keeps its streamed text (:func:`message_text`: Markdown, a table as an aligned
code block or "Header: value" lines, since a message's text shows no tables) as the final message's
``text`` (still one rendering) and gets :func:`sources_card` (the sources alone) under it. Citations are
also sent as the Teams AI ``citation`` entity (schema.org ``Message`` with ``Claim`` items, marked
``AIGeneratedContent``) so Teams shows its native citation pop-ups where supported.
"""

from __future__ import annotations

import re
from typing import Any

from agent.models import Citation, Reply

from ..links import honest_links
from ..markdown_blocks import ListBlock, Prose, Table, chat_markdown, display_width, list_lines, parse_blocks

__all__ = ["answer_card", "sources_card", "text_elements", "table_element", "citation_entities", "message_text", "summary",
           "HELP_TEXT", "card_attachment", "MAX_TEXT", "MAX_SUMMARY", "MAX_TABLE_CELLS"]

SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
#: Teams rejects message payloads around 28 KB; keep the answer text well below.
MAX_TEXT = 6000
#: Notifications show one or two lines; the summary is cut at a word boundary below this.
MAX_SUMMARY = 200
#: Cells of one ``Table`` element, header included (each costs about 100 bytes of card JSON: with
#: :data:`MAX_TEXT` of text the card stays well under the message limit); rows past it are counted, not shown.
MAX_TABLE_CELLS = 200

HELP_TEXT = ("Ask me anything about the company: policies, processes, tools, benefits. I answer from the "
             "knowledge base and always link my sources. In a channel, mention me; in a personal chat, just ask. "
             "Send `sources` in a personal chat to see what I answer from.")


def _sources(citations: list[Citation]) -> list[Citation]:
    seen: dict[int, Citation] = {}
    for c in sorted(citations, key=lambda c: c.n):
        seen.setdefault(c.n, c)
    return list(seen.values())


def _text(reply: Reply) -> str:
    """The reply text cut to :data:`MAX_TEXT` characters (keeps ``[n]`` markers, matching the citation entity),
    each Markdown link labelled with another address than its target showing the target
    (:func:`bot.links.honest_links`)."""
    text = honest_links(reply.text.strip())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1].rstrip() + "\u2026"


def message_text(reply: Reply) -> str:
    """A streamed answer's text (the message's ``text``, Markdown): :func:`bot.markdown_blocks.chat_markdown`
    of the reply text cut to :data:`MAX_TEXT`; ``[n]`` markers kept."""
    return chat_markdown(_text(reply))


def summary(reply: Reply) -> str:
    """The activity's ``summary``: the answer on one line, without ``[n]`` markers, link targets or Markdown emphasis
    (a table as its "Header: value" rows), cut at a word boundary to at most :data:`MAX_SUMMARY` characters (with an
    ellipsis)."""
    text = re.sub(r"\s*\[\d+\]", "", chat_markdown(honest_links(reply.text), code_width=0))
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # [label](url) -> label
    text = re.sub(r"[*_`#>]+", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= MAX_SUMMARY:
        return text
    return text[: MAX_SUMMARY - 1].rsplit(" ", 1)[0].rstrip(",;:") + "\u2026"


def answer_card(reply: Reply) -> dict[str, Any]:
    """The Adaptive Card of an answer or a refusal, with its sources."""
    body: list[dict[str, Any]] = []
    if reply.refused:
        body.append({"type": "TextBlock", "text": "No sources found", "weight": "Bolder", "wrap": True})
    body.extend(text_elements(_text(reply)))
    return _card(body, reply)


def text_elements(markdown: str) -> list[dict[str, Any]]:
    """Card elements showing ``markdown``: runs of prose in one ``TextBlock``, each list in a ``TextBlock``
    of its own (Markdown list lines; an item's later lines joined onto its first, as Teams shows no nested
    blocks in a list), each table as a ``Table`` element (:func:`table_element`)."""
    elements: list[dict[str, Any]] = []
    prose: list[str] = []

    def flush() -> None:
        if prose:
            elements.append({"type": "TextBlock", "text": "\n\n".join(prose), "wrap": True})
            prose.clear()

    for block in parse_blocks(markdown):
        if isinstance(block, Prose):
            prose.append(block.text)
            continue
        flush()
        if isinstance(block, ListBlock):
            lines = list_lines(block, lambda item: " ".join(chat_markdown(item, code_width=0).split()))
            elements.append({"type": "TextBlock", "text": "\n".join(lines), "wrap": True})
        else:
            elements.extend(table_element(block))
    flush()
    return elements or [{"type": "TextBlock", "text": "", "wrap": True}]


def table_element(table: Table) -> list[dict[str, Any]]:
    """A ``Table`` element (schema 1.5): the header row first (``firstRowAsHeader``, bold), each column as
    wide as its longest cell relative to the others and aligned as the delimiter row says; a row's citation
    markers (:attr:`bot.markdown_blocks.Row.note`) end its last cell. Past :data:`MAX_TABLE_CELLS` cells the
    rest of the rows are named in a subtle ``TextBlock`` under the table."""
    width = max(1, len(table.header.cells))
    keep = max(0, MAX_TABLE_CELLS // width - 1)
    rows = []
    for row in (table.header, *table.rows[:keep]):
        cells = (list(row.cells) + [""] * width)[:width]
        cells[-1] = f"{cells[-1]} {row.note}".strip()
        rows.append(cells)
    columns = []
    for i, align in enumerate((table.align + ("",) * width)[:width]):
        column: dict[str, Any] = {"width": min(max(max(display_width(r[i]) for r in rows), 3), 30)}
        if align:
            column["horizontalCellContentAlignment"] = align
        columns.append(column)

    def cell(text: str, header: bool) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "TextBlock", "text": text, "wrap": True}
        if header:
            block["weight"] = "Bolder"
        return {"type": "TableCell", "items": [block]}

    element = {"type": "Table", "columns": columns, "firstRowAsHeader": True,
               "rows": [{"type": "TableRow", "cells": [cell(t, k == 0) for t in r]} for k, r in enumerate(rows)]}
    left = len(table.rows) - keep
    if left <= 0:
        return [element]
    return [element, {"type": "TextBlock", "text": f"({left} more row{'s' if left > 1 else ''} in the source)",
                      "wrap": True, "size": "Small", "isSubtle": True, "spacing": "None"}]


def sources_card(reply: Reply) -> dict[str, Any] | None:
    """The card under a streamed answer (whose text is the message's own): its sources only; None without
    sources."""
    return _card([], reply) if _sources(reply.citations) else None


def _card(body: list[dict[str, Any]], reply: Reply) -> dict[str, Any]:
    body = list(body)
    actions: list[dict[str, Any]] = []
    sources = _sources(reply.citations)
    if sources:
        body.append({"type": "TextBlock", "text": "Sources", "weight": "Bolder", "spacing": "Medium" if body else "None",
                     "wrap": True})
        for c in sources:
            where = f"{c.title} \u203a {c.section}" if c.section else c.title
            body.append({"type": "TextBlock", "text": f"[{c.n}] {where}", "wrap": True, "size": "Small",
                         "isSubtle": True, "spacing": "None"})
            if c.url.startswith(("http://", "https://")):
                actions.append({"type": "Action.OpenUrl", "title": f"[{c.n}] {_short(c.title)}", "url": c.url})
    version = "1.5" if any(b.get("type") == "Table" for b in body) else "1.4"
    card: dict[str, Any] = {"type": "AdaptiveCard", "$schema": SCHEMA, "version": version, "body": body}
    if actions:
        card["actions"] = actions
    return card


def citation_entities(citations: list[Citation]) -> list[dict[str, Any]]:
    """The Teams AI ``citation`` entity for the message (empty when there are no citations; the
    bare AI label is then added by :class:`bot.teams.entities.AiLabel`)."""
    sources = _sources(citations)
    if not sources:
        return []
    claims = [{"@type": "Claim", "position": c.n,
               "appearance": {"@type": "DigitalDocument", "name": _short(c.title, 80),
                              "url": c.url if c.url.startswith(("http://", "https://")) else None,
                              "abstract": _short(c.quote, 160)}} for c in sources]
    return [{"type": "https://schema.org/Message", "@type": "Message", "@context": "https://schema.org", "@id": "",
             "additionalType": ["AIGeneratedContent"], "citation": claims}]


def card_attachment(card: dict[str, Any]) -> dict[str, Any]:
    """An ``application/vnd.microsoft.card.adaptive`` attachment."""
    return {"contentType": "application/vnd.microsoft.card.adaptive", "content": card}


def _short(text: str, limit: int = 40) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"
