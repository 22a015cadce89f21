"""Pure renderers for Teams: answer and refusal Adaptive Cards, citation entities, help text.

One rendering per answer: the card alone carries the answer (the activity has no ``text``; its
``summary``, from :func:`summary`, is what notifications and the chat list show). Cards use Adaptive
Card schema 1.4 (what Teams renders): the answer as a ``TextBlock`` (Teams supports a Markdown subset:
bold, italic, lists, links) and numbered sources as ``Action.OpenUrl`` buttons. Feedback is Teams'
own thumbs up / down (``channelData.feedbackLoopEnabled``, handled in :mod:`bot.teams.bot`), not card
buttons. A streamed answer (personal chats, :mod:`bot.teams.streaming`) keeps its streamed text as the
final message's ``text`` (still one rendering) and gets :func:`sources_card` (the sources alone) under
it. Citations are also sent as the Teams AI ``citation`` entity (schema.org ``Message`` with ``Claim``
items, marked ``AIGeneratedContent``) so Teams shows its native citation pop-ups where supported.
"""

from __future__ import annotations

import re
from typing import Any

from agent.models import Citation, Reply

__all__ = ["answer_card", "sources_card", "citation_entities", "plain_text", "summary", "HELP_TEXT", "card_attachment", "MAX_TEXT",
           "MAX_SUMMARY"]

SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
#: Teams rejects message payloads around 28 KB; keep the answer text well below.
MAX_TEXT = 6000
#: Notifications show one or two lines; the summary is cut at a word boundary below this.
MAX_SUMMARY = 200

HELP_TEXT = ("Ask me anything about the company: policies, processes, tools, benefits. I answer from the "
             "knowledge base and always link my sources. In a channel, mention me; in a personal chat, just ask. "
             "Send `sources` in a personal chat to see what I answer from.")


def _sources(citations: list[Citation]) -> list[Citation]:
    seen: dict[int, Citation] = {}
    for c in sorted(citations, key=lambda c: c.n):
        seen.setdefault(c.n, c)
    return list(seen.values())


def plain_text(reply: Reply) -> str:
    """The reply text for the card's ``TextBlock`` (keeps ``[n]`` markers, matching the citation entity)."""
    text = reply.text.strip()
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1].rstrip() + "\u2026"


def summary(reply: Reply) -> str:
    """The activity's ``summary``: the answer on one line, without ``[n]`` markers, link targets or Markdown emphasis,
    cut at a word boundary to at most :data:`MAX_SUMMARY` characters (with an ellipsis)."""
    text = re.sub(r"\s*\[\d+\]", "", reply.text)
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
    body.append({"type": "TextBlock", "text": plain_text(reply), "wrap": True})
    return _card(body, reply)


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
    card: dict[str, Any] = {"type": "AdaptiveCard", "$schema": SCHEMA, "version": "1.4", "body": body}
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
