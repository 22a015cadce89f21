"""A pending action and its outcome as Adaptive Cards (schema 1.4) for Microsoft Teams.

The preview's Confirm / Cancel are ``Action.Submit`` buttons whose ``data`` is ``{"action":
"action_confirm" | "action_cancel", "key": <key>}`` (a choice adds ``"choice": n``); the settled card has
no buttons, an ``Action.OpenUrl`` per web link.
"""

from __future__ import annotations

from typing import Any

from agent.models import PendingAction
from state import PendingRecord
from tools.actions import ActionTool

from app.actions import CANCEL_PREFIX, CONFIRM_PREFIX, ActionOutcome
from ..action_views import (EXCERPT, MAX_CHOICES, excerpt, headline, key_of, notes_of, preview_of,
                            settled_summary, web_links, words_of)

__all__ = ["adaptive_card", "adaptive_card_outcome"]


def adaptive_card(action: PendingAction | PendingRecord, tool: ActionTool | None, *,
                  viewer_tz: str | None = None, extra_fields: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """An Adaptive Card (schema 1.4) of the preview (the fields as a FactSet, ``extra_fields`` after the
    tool's own) with Confirm / Cancel ``Action.Submit`` buttons whose ``data`` is
    ``{"action": "action_confirm" | "action_cancel", "key": <key>}``."""
    key, preview, w = key_of(action), preview_of(action, tool, viewer_tz, extra_fields), words_of(tool)
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": w.lead, "wrap": True},
        {"type": "TextBlock", "text": preview.title, "weight": "Bolder", "size": "Medium", "wrap": True},
    ]
    if preview.fields:
        body.append({"type": "FactSet", "facts": [{"title": label, "value": value} for label, value in preview.fields]})
    if preview.details:
        body.append({"type": "TextBlock", "text": excerpt(preview.details, EXCERPT), "wrap": True,
                     "isSubtle": True, "size": "Small"})
    body.append({"type": "TextBlock", "text": f"Nothing is {w.past} until you confirm.", "wrap": True,
                 "isSubtle": True, "size": "Small"})
    return {
        "type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "version": "1.4",
        "body": body,
        "actions": [
            {"type": "Action.Submit", "title": "Confirm", "style": "positive",
             "data": {"action": CONFIRM_PREFIX.rstrip(":"), "key": key}},
            *({"type": "Action.Submit", "title": label, "data": {"action": CONFIRM_PREFIX.rstrip(":"), "key": key,
                                                                  "choice": i}}
              for i, label in enumerate(preview.choices[:MAX_CHOICES])),
            {"type": "Action.Submit", "title": "Cancel", "style": "destructive",
             "data": {"action": CANCEL_PREFIX.rstrip(":"), "key": key}},
        ],
    }


def adaptive_card_outcome(outcome: ActionOutcome, *, viewer_tz: str | None = None) -> dict[str, Any]:
    """The Adaptive Card that replaces a settled preview (no buttons; ``Action.OpenUrl`` for each web link)."""
    body: list[dict[str, Any]] = [{"type": "TextBlock", "text": headline(outcome), "weight": "Bolder", "wrap": True}]
    if outcome.record is not None:
        body.append({"type": "TextBlock", "text": settled_summary(outcome, viewer_tz), "wrap": True})
    if outcome.status in {"failed", "expired"}:
        body.append({"type": "TextBlock", "text": outcome.message, "wrap": True, "isSubtle": True})
    notes = notes_of(outcome)
    if notes:
        body.append({"type": "TextBlock", "text": " ".join(notes), "wrap": True, "isSubtle": True})
    card: dict[str, Any] = {"type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                            "version": "1.4", "body": body}
    links = web_links(outcome)
    if links:
        card["actions"] = [{"type": "Action.OpenUrl", "title": label, "url": url} for label, url in links]
    return card
