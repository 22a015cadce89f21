"""A pending action and its outcome as Slack Block Kit (the preview with its buttons, the settled view).

Buttons: the Confirm button's ``action_id`` is ``action_confirm:<key>`` and Cancel's is
``action_cancel:<key>``; both carry the idempotency key in ``value``. A preview with choices (other free
times) adds one button per choice between them: ``action_confirm:<key>#<n>`` with value ``<key>#<n>``;
whichever is pressed first confirms the one action, once. The adapter routes ``^action_(confirm|cancel):``
to :meth:`app.actions.ActionService.handle_button` and then either updates the message with
:func:`slack_outcome_blocks` (``outcome.final``) or tells only the clicker (``outcome.private`` or a
retry) with ``outcome.message``. User-supplied text is escaped for mrkdwn (``&``, ``<``, ``>``).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from agent.models import PendingAction
from state import PendingRecord
from tools.actions import ActionTool

from app.actions import CANCEL_PREFIX, CHOICE_SEPARATOR, CONFIRM_PREFIX, ActionOutcome
from ..action_views import (EXCERPT, MAX_CHOICES, excerpt, expiry_of, headline, key_of, notes_of, preview_of,
                            record_outcome, settled_summary, web_links, words_of)
from .mrkdwn import escape as _esc

__all__ = ["slack_preview_blocks", "slack_outcome_blocks", "slack_blocks_for_record", "preview_text",
           "outcome_text"]


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
    key, preview, w = key_of(action), preview_of(action, tool, viewer_tz, extra_fields), words_of(tool)
    requester = requester_id or (action.requester if isinstance(action, PendingRecord) else "")
    lines = [f"*{_esc(preview.title)}*", *(f"*{_esc(label)}:* {_esc(value)}" for label, value in preview.fields)]
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _esc(w.lead)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]}},
    ]
    if preview.details:
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": _esc(excerpt(preview.details, EXCERPT))}]})
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
    expiry = expiry_of(action, viewer_tz)
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
    head = f"{icon} {_esc(headline(outcome))}"
    if outcome.record is not None:
        head += f"\n{_esc(settled_summary(outcome, viewer_tz))}"
    links = web_links(outcome)
    if links:
        head += "\n" + "  \u00b7  ".join(f"<{url}|{_esc(label)}>" for label, url in links)
    blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": head[:3000]}})
    if outcome.status in {"failed", "expired"}:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _esc(outcome.message)[:3000]}]})
    notes = notes_of(outcome)
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
    return slack_outcome_blocks(record_outcome(rec, tool), viewer_tz=viewer_tz)


def preview_text(action: PendingAction | PendingRecord, tool: ActionTool | None, viewer_tz: str | None = None) -> str:
    """Plain one-line fallback text of a preview (Slack's ``text`` for notifications)."""
    return f"Confirm or cancel: {preview_of(action, tool, viewer_tz).summary}"


def outcome_text(outcome: ActionOutcome) -> str:
    """Plain fallback text of an outcome (Slack's ``text`` when updating the message)."""
    return outcome.message
