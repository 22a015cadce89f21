"""Pure renderers of pending actions and their outcomes: Slack Block Kit, terminal text, Adaptive Cards.

Nothing here talks to a platform or the state store, and nothing here knows a tool: every function
takes a pending action (:class:`agent.models.PendingAction` as the agent proposed it, or the stored
:class:`state.PendingRecord`) with its action tool (:class:`tools.actions.ActionTool`, from
:meth:`app.actions.ActionService.tool`; None when it is not registered here), or an
:class:`app.actions.ActionOutcome` (which carries its tool), and draws the tool's
:class:`tools.actions.Preview` (a title and labelled fields) in the tool's words.

Slack buttons: the Confirm button's ``action_id`` is ``action_confirm:<key>`` and Cancel's is
``action_cancel:<key>``; both carry the idempotency key in ``value``. A preview with choices (other free
times) adds one button per choice between them: ``action_confirm:<key>#<n>`` with value ``<key>#<n>`` (a
Teams card: ``data`` with ``"choice": n``); whichever is pressed first confirms the one action, once. The adapter routes
``^action_(confirm|cancel):`` to :meth:`app.actions.ActionService.handle_button` and then either
updates the message with :func:`slack_outcome_blocks` (``outcome.final``) or tells only the
clicker (``outcome.private`` or a retry) with ``outcome.message``.

Times are shown in the viewer's (the requester's) time zone, as the tool's preview puts them.
User-supplied text is escaped for Slack mrkdwn (``&``, ``<``, ``>``); links that are not web links
(a local calendar's ``file://`` path is the server's) are never offered.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

from agent.models import PendingAction
from state import PendingRecord
from tools.actions import ActionTool, ActionWords, Preview, fallback_preview, stored_args
from tools.dates import valid_timezone

from app.actions import CANCEL_PREFIX, CHOICE_SEPARATOR, CONFIRM_PREFIX, ActionOutcome, parse_action_id
from .links import web_url

__all__ = ["CONFIRM_PREFIX", "CANCEL_PREFIX", "parse_action_id", "slack_preview_blocks", "slack_outcome_blocks",
           "slack_blocks_for_record", "preview_text", "outcome_text", "terminal_preview", "terminal_outcome",
           "adaptive_card", "adaptive_card_outcome"]

_EXCERPT = 300
#: At most this many choice buttons (Slack allows 25 elements in an actions block; Teams cards show ~5 actions).
MAX_CHOICES = 3
_GENERIC = ActionWords()


def _key(action: PendingAction | PendingRecord) -> str:
    return action.idempotency_key if isinstance(action, PendingAction) else action.key


def _preview(action: PendingAction | PendingRecord, tool: ActionTool | None, viewer_tz: str | None,
             extra_fields: tuple[tuple[str, str], ...] = ()) -> Preview:
    """The tool's preview of the stored arguments (not re-validated: an old preview may lie in the past), with
    ``extra_fields`` (:meth:`app.actions.ActionService.preview_fields`) after the tool's own."""
    args = stored_args(tool, dict(action.args)) if tool is not None else None
    if tool is None or args is None:
        return fallback_preview(action.summary)
    preview = tool.preview(args, viewer_tz)
    return dataclasses.replace(preview, fields=preview.fields + tuple(extra_fields)) if extra_fields else preview


def _notes(outcome: ActionOutcome) -> list[str]:
    """The done action's notes (who got an invitation, whose failed), as the tool stored them."""
    raw = outcome.result.get("notes") if outcome.result and outcome.status in {"done", "already_done"} else None
    return [str(n) for n in raw or [] if str(n).strip()]


def _words(tool: ActionTool | None) -> ActionWords:
    return tool.words if tool is not None else _GENERIC


def _esc(text: str) -> str:
    """Escape text for Slack mrkdwn."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _excerpt(text: str, limit: int) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters (with an ellipsis)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[:limit - 1].rsplit(" ", 1)[0] + "\u2026"


def _expiry(action: PendingAction | PendingRecord, viewer_tz: str | None) -> str:
    if isinstance(action, PendingRecord):
        tz = ZoneInfo(viewer_tz) if viewer_tz and valid_timezone(viewer_tz) else timezone.utc
        return action.expires_at.astimezone(tz).strftime("%H:%M %Z")
    return ""


def _links(outcome: ActionOutcome) -> list[tuple[str, str]]:
    """The outcome's web links as ``(label, url)`` (stored ``links``; an older record's bare ``link``)."""
    raw = outcome.result.get("links") if outcome.result else None
    pairs = [(str(x[0]), str(x[1])) for x in raw or [] if isinstance(x, (list, tuple)) and len(x) == 2]
    if not pairs and outcome.result and outcome.result.get("link"):
        pairs = [("Open", str(outcome.result["link"]))]
    return [(label, url) for label, url in ((lab, web_url(u)) for lab, u in pairs) if url]


# -- Slack ------------------------------------------------------------------------------------------
def slack_preview_blocks(action: PendingAction | PendingRecord, tool: ActionTool | None, *,
                         viewer_tz: str | None = None, requester_id: str | None = None,
                         extra_fields: tuple[tuple[str, str], ...] = ()) -> list[dict[str, Any]]:
    """Block Kit blocks of a preview: the tool's lead, the title, a line per field, the details as
    context, then Confirm / Cancel buttons and who may press them until when.

    Args:
        action: the proposal (or its stored record, which adds the requester and the expiry).
        tool: its action tool (None: the stored summary is shown).
        viewer_tz: the requester's IANA zone (Slack ``users.info`` ``tz``); the action's own when None.
        requester_id: shown as "only <@U…> can confirm" (the record's requester by default).
        extra_fields: fields after the tool's own (who will get an invitation in a DM).

    Returns:
        a list of blocks for ``chat.postMessage(blocks=...)``; button ``action_id`` values are
        ``action_confirm:<key>`` / ``action_cancel:<key>`` and each button's ``value`` is the key.
    """
    key, preview, w = _key(action), _preview(action, tool, viewer_tz, extra_fields), _words(tool)
    requester = requester_id or (action.requester if isinstance(action, PendingRecord) else "")
    lines = [f"*{_esc(preview.title)}*", *(f"*{_esc(label)}:* {_esc(value)}" for label, value in preview.fields)]
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _esc(w.lead)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]}},
    ]
    if preview.details:
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": _esc(_excerpt(preview.details, _EXCERPT))}]})
    picks = [{"type": "button", "action_id": f"{CONFIRM_PREFIX}{key}{CHOICE_SEPARATOR}{i}",
              "value": f"{key}{CHOICE_SEPARATOR}{i}", "text": {"type": "plain_text", "text": label[:75], "emoji": False}}
             for i, label in enumerate(preview.choices[:MAX_CHOICES])]
    blocks.append({"type": "actions", "block_id": f"pending_action:{key}"[:255], "elements": [
        {"type": "button", "action_id": f"{CONFIRM_PREFIX}{key}", "style": "primary", "value": key,
         "text": {"type": "plain_text", "text": "Confirm", "emoji": False}},
        *picks,
        {"type": "button", "action_id": f"{CANCEL_PREFIX}{key}", "style": "danger", "value": key,
         "text": {"type": "plain_text", "text": "Cancel", "emoji": False}},
    ]})
    notes = []
    if requester:
        notes.append(f"Only <@{requester}> can confirm or cancel.")
    expiry = _expiry(action, viewer_tz)
    if expiry:
        notes.append(f"The preview expires at {expiry}.")
    notes.append(f"Nothing is {w.past} until you confirm.")
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": " ".join(notes)}]})
    return blocks


def slack_outcome_blocks(outcome: ActionOutcome, *, viewer_tz: str | None = None) -> list[dict[str, Any]]:
    """Blocks that replace a settled preview (no buttons): the headline in the tool's words (done,
    cancelled, expired, failed), the action's one-line summary, and its web links."""
    icon = {"done": ":white_check_mark:", "already_done": ":white_check_mark:", "cancelled": ":x:",
            "already_cancelled": ":x:", "expired": ":hourglass:", "failed": ":warning:"}.get(outcome.status,
                                                                                            ":information_source:")
    blocks: list[dict[str, Any]] = []
    head = f"{icon} {_esc(_headline(outcome))}"
    if outcome.record is not None:
        head += f"\n{_esc(_summary(outcome, viewer_tz))}"
    links = _links(outcome)
    if links:
        head += "\n" + "  \u00b7  ".join(f"<{url}|{_esc(label)}>" for label, url in links)
    blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": head[:3000]}})
    if outcome.status in {"failed", "expired"}:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _esc(outcome.message)[:3000]}]})
    notes = _notes(outcome)
    if notes:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _esc(" ".join(notes))[:3000]}]})
    return blocks


def slack_blocks_for_record(rec: PendingRecord, tool: ActionTool | None, *, viewer_tz: str | None = None,
                            now: datetime | None = None,
                            extra_fields: tuple[tuple[str, str], ...] = ()) -> list[dict[str, Any]]:
    """Blocks for a stored action in whatever state it is: the preview with buttons while it can be
    confirmed, the settled view otherwise (a redelivered message must not show fresh buttons for an
    action that is already done)."""
    now = now or datetime.now(timezone.utc)
    if rec.status == "pending" and now < rec.expires_at:
        return slack_preview_blocks(rec, tool, viewer_tz=viewer_tz, extra_fields=extra_fields)
    return slack_outcome_blocks(_record_outcome(rec, tool), viewer_tz=viewer_tz)


def _record_outcome(rec: PendingRecord, tool: ActionTool | None) -> ActionOutcome:
    w = _words(tool)
    status = {"done": "already_done", "cancelled": "already_cancelled", "failed": "failed",
              "executing": "in_progress"}.get(rec.status, "expired")
    msg = {"already_done": f"{w.done}.", "already_cancelled": f"Cancelled; nothing was {w.past}.",
           "failed": str((rec.result or {}).get("message") or f"This request failed; nothing was {w.past}."),
           "in_progress": f"It's being {w.past} right now."}.get(status, f"This preview expired; nothing was {w.past}.")
    return ActionOutcome(status, msg, rec, dict(rec.result or {}) if rec.status == "done" else {},  # type: ignore[arg-type]
                         tool)


def _summary(outcome: ActionOutcome, viewer_tz: str | None) -> str:
    """The settled action's one line: the result's ``summary`` when it differs from the preview (a picked
    choice, in the requester's zone), else the preview's in the viewer's zone."""
    done = str((outcome.result or {}).get("summary") or "") if outcome.status in {"done", "already_done"} else ""
    assert outcome.record is not None
    return done or _preview(outcome.record, outcome.tool, viewer_tz).summary


def _headline(outcome: ActionOutcome) -> str:
    w = outcome.words
    return {"done": w.done, "already_done": w.done, "cancelled": f"Cancelled, nothing was {w.past}",
            "already_cancelled": f"Cancelled, nothing was {w.past}",
            "expired": f"Preview expired, nothing was {w.past}",
            "failed": f"Not {w.past}"}.get(outcome.status, outcome.message)


def preview_text(action: PendingAction | PendingRecord, tool: ActionTool | None, viewer_tz: str | None = None) -> str:
    """Plain one-line fallback text of a preview (Slack's ``text`` for notifications)."""
    return f"Confirm or cancel: {_preview(action, tool, viewer_tz).summary}"


def outcome_text(outcome: ActionOutcome) -> str:
    """Plain fallback text of an outcome (Slack's ``text`` when updating the message)."""
    return outcome.message


# -- terminal ---------------------------------------------------------------------------------------
def terminal_preview(action: PendingAction | PendingRecord, tool: ActionTool | None,
                     viewer_tz: str | None = None) -> str:
    """The preview for a console: the title, a line per field, the details, then the key to confirm or
    cancel it with."""
    preview = _preview(action, tool, viewer_tz)
    lines = [f"Pending: {preview.title}", *(f"  {label.lower():<10} {value}" for label, value in preview.fields)]
    if preview.details:
        lines.append(f"  {'about':<10} {_excerpt(preview.details, 160)}")
    expiry = _expiry(action, viewer_tz)
    lines.append(f"  {'key':<10} {_key(action)}" + (f" (expires {expiry})" if expiry else ""))
    return "\n".join(lines)


def terminal_outcome(outcome: ActionOutcome) -> str:
    """One line per outcome, with the action's link when there is one (a local ``file://`` one too: the
    console runs where the file is)."""
    link = outcome.result.get("link", "") if outcome.result else ""
    text = f"[{outcome.status}] {outcome.message}"
    if link and link not in text:
        text += f"\n  {link}"
    return text


# -- Microsoft Teams --------------------------------------------------------------------------------
def adaptive_card(action: PendingAction | PendingRecord, tool: ActionTool | None, *,
                  viewer_tz: str | None = None, extra_fields: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """An Adaptive Card (schema 1.4) of the preview (the fields as a FactSet, ``extra_fields`` after the
    tool's own) with Confirm / Cancel ``Action.Submit`` buttons whose ``data`` is
    ``{"action": "action_confirm" | "action_cancel", "key": <key>}``."""
    key, preview, w = _key(action), _preview(action, tool, viewer_tz, extra_fields), _words(tool)
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": w.lead, "wrap": True},
        {"type": "TextBlock", "text": preview.title, "weight": "Bolder", "size": "Medium", "wrap": True},
    ]
    if preview.fields:
        body.append({"type": "FactSet", "facts": [{"title": label, "value": value} for label, value in preview.fields]})
    if preview.details:
        body.append({"type": "TextBlock", "text": _excerpt(preview.details, _EXCERPT), "wrap": True,
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
    body: list[dict[str, Any]] = [{"type": "TextBlock", "text": _headline(outcome), "weight": "Bolder", "wrap": True}]
    if outcome.record is not None:
        body.append({"type": "TextBlock", "text": _summary(outcome, viewer_tz), "wrap": True})
    if outcome.status in {"failed", "expired"}:
        body.append({"type": "TextBlock", "text": outcome.message, "wrap": True, "isSubtle": True})
    notes = _notes(outcome)
    if notes:
        body.append({"type": "TextBlock", "text": " ".join(notes), "wrap": True, "isSubtle": True})
    card: dict[str, Any] = {"type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                            "version": "1.4", "body": body}
    links = _links(outcome)
    if links:
        card["actions"] = [{"type": "Action.OpenUrl", "title": label, "url": url} for label, url in links]
    return card
