"""Pure renderers of pending actions and their outcomes: Slack Block Kit, terminal text, Adaptive Cards.

Nothing here talks to a platform or the state store; every function takes a pending action
(:class:`agent.models.PendingAction` as the agent proposed it, or the stored
:class:`state.PendingRecord`) or an :class:`app.actions.ActionOutcome`, and returns data.

Slack buttons: the Confirm button's ``action_id`` is ``action_confirm:<key>`` and Cancel's is
``action_cancel:<key>``; both carry the idempotency key in ``value``. The adapter routes
``^action_(confirm|cancel):`` to :meth:`app.actions.ActionService.handle_button` and then either
updates the message with :func:`slack_outcome_blocks` (``outcome.final``) or tells only the
clicker (``outcome.private`` or a retry) with ``outcome.message``.

Times are shown in the viewer's (the requester's) time zone, with the event's own zone added when
it differs. User-supplied text is escaped for Slack mrkdwn (``&``, ``<``, ``>``).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from agent.models import PendingAction
from state import PendingRecord
from tools.calendar.args import CalendarCreateArgs
from tools.calendar.propose import excerpt_text, format_duration, format_when

from app.actions import CANCEL_PREFIX, CONFIRM_PREFIX, ActionOutcome, parse_action_id
from .links import web_url

__all__ = ["CONFIRM_PREFIX", "CANCEL_PREFIX", "parse_action_id", "slack_preview_blocks", "slack_outcome_blocks",
           "slack_blocks_for_record", "preview_text", "outcome_text", "terminal_preview", "terminal_outcome",
           "adaptive_card", "adaptive_card_outcome"]

_EXCERPT = 300


def _key_args(action: PendingAction | PendingRecord) -> tuple[str, CalendarCreateArgs]:
    """The key and the arguments as a model (not re-validated: an old preview may lie in the past)."""
    key = action.idempotency_key if isinstance(action, PendingAction) else action.key
    raw = dict(action.args)
    for k in ("start", "end"):
        if isinstance(raw.get(k), str):
            raw[k] = datetime.fromisoformat(raw[k].replace("Z", "+00:00"))
    raw.setdefault("attendees", [])
    raw.setdefault("timezone", "UTC")
    raw.setdefault("title", "Event")
    return key, CalendarCreateArgs.model_construct(**raw)


def _esc(text: str) -> str:
    """Escape text for Slack mrkdwn."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _when(args: CalendarCreateArgs, viewer_tz: str | None) -> str:
    return format_when(args, viewer_tz) if args.start else "(no time)"


def _expiry(action: PendingAction | PendingRecord, viewer_tz: str | None) -> str:
    if isinstance(action, PendingRecord):
        from zoneinfo import ZoneInfo

        from tools.calendar.args import valid_timezone

        tz = ZoneInfo(viewer_tz) if viewer_tz and valid_timezone(viewer_tz) else timezone.utc
        return action.expires_at.astimezone(tz).strftime("%H:%M %Z")
    return ""


# -- Slack ------------------------------------------------------------------------------------------
def slack_preview_blocks(action: PendingAction | PendingRecord, *, viewer_tz: str | None = None,
                         requester_id: str | None = None) -> list[dict[str, Any]]:
    """Block Kit blocks of a preview: title, time in the viewer's zone, length, attendees, video,
    place, description excerpt, then Confirm / Cancel buttons.

    Args:
        action: the proposal (or its stored record, which adds the requester and the expiry).
        viewer_tz: the requester's IANA zone (Slack ``users.info`` ``tz``); the event's zone when None.
        requester_id: shown as "only <@U…> can confirm" (the record's requester by default).

    Returns:
        a list of blocks for ``chat.postMessage(blocks=...)``; button ``action_id`` values are
        ``action_confirm:<key>`` / ``action_cancel:<key>`` and each button's ``value`` is the key.
    """
    key, args = _key_args(action)
    requester = requester_id or (action.requester if isinstance(action, PendingRecord) else "")
    lines = [f"*{_esc(args.title)}*", f":calendar: {_esc(_when(args, viewer_tz))}",
             f":stopwatch: {format_duration(args.duration_minutes)}",
             ":busts_in_silhouette: " + (_esc(", ".join(args.attendees)) if args.attendees else "only you")]
    if args.video_conference:
        lines.append(":movie_camera: with a video call")
    if args.location:
        lines.append(f":round_pushpin: {_esc(args.location)}")
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "I can add this to the calendar:"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]}},
    ]
    if args.description:
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": _esc(excerpt_text(args.description, _EXCERPT))}]})
    blocks.append({"type": "actions", "block_id": f"pending_action:{key}"[:255], "elements": [
        {"type": "button", "action_id": f"{CONFIRM_PREFIX}{key}", "style": "primary", "value": key,
         "text": {"type": "plain_text", "text": "Confirm", "emoji": False}},
        {"type": "button", "action_id": f"{CANCEL_PREFIX}{key}", "style": "danger", "value": key,
         "text": {"type": "plain_text", "text": "Cancel", "emoji": False}},
    ]})
    notes = []
    if requester:
        notes.append(f"Only <@{requester}> can confirm or cancel.")
    expiry = _expiry(action, viewer_tz)
    if expiry:
        notes.append(f"The preview expires at {expiry}.")
    notes.append("Nothing is booked until you confirm.")
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": " ".join(notes)}]})
    return blocks


def slack_outcome_blocks(outcome: ActionOutcome, *, viewer_tz: str | None = None) -> list[dict[str, Any]]:
    """Blocks that replace a settled preview (no buttons): booked with the event link, cancelled,
    expired or failed, with the event's title and time."""
    icon = {"done": ":white_check_mark:", "already_done": ":white_check_mark:", "cancelled": ":x:",
            "already_cancelled": ":x:", "expired": ":hourglass:", "failed": ":warning:"}.get(outcome.status,
                                                                                            ":information_source:")
    blocks: list[dict[str, Any]] = []
    head = f"{icon} {_esc(_headline(outcome))}"
    if outcome.record is not None:
        _, args = _key_args(outcome.record)
        head += f"\n*{_esc(args.title)}*, {_esc(_when(args, viewer_tz))}"
        if args.attendees:
            head += f"\nwith {_esc(', '.join(args.attendees))}"
    link = web_url(outcome.result.get("link")) if outcome.result else ""
    if link:  # a local calendar's file:// .ics path is the server's, never posted to chat
        label = "Open in Google Calendar" if outcome.result.get("backend") == "google" else "Open the .ics"
        head += f"\n<{link}|{label}>"
    conf = outcome.result.get("conference_link") if outcome.result else ""
    if conf:
        head += f"  \u00b7  <{conf}|Join the video call>"
    blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": head[:3000]}})
    if outcome.status in {"failed", "expired"}:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _esc(outcome.message)[:3000]}]})
    return blocks


def slack_blocks_for_record(rec: PendingRecord, *, viewer_tz: str | None = None,
                            now: datetime | None = None) -> list[dict[str, Any]]:
    """Blocks for a stored action in whatever state it is: the preview with buttons while it can be
    confirmed, the settled view otherwise (a redelivered message must not show fresh buttons for an
    action that is already booked)."""
    now = now or datetime.now(timezone.utc)
    if rec.status == "pending" and now < rec.expires_at:
        return slack_preview_blocks(rec, viewer_tz=viewer_tz)
    return slack_outcome_blocks(_record_outcome(rec, now), viewer_tz=viewer_tz)


def _record_outcome(rec: PendingRecord, now: datetime) -> ActionOutcome:
    status = {"done": "already_done", "cancelled": "already_cancelled", "failed": "failed",
              "executing": "in_progress"}.get(rec.status, "expired")
    msg = {"already_done": "Booked.", "already_cancelled": "Cancelled; nothing was booked.",
           "failed": str((rec.result or {}).get("message") or "This request failed; nothing was booked."),
           "in_progress": "It's being booked right now."}.get(status, "This preview expired; nothing was booked.")
    return ActionOutcome(status, msg, rec, dict(rec.result or {}) if rec.status == "done" else {})  # type: ignore[arg-type]


def _headline(outcome: ActionOutcome) -> str:
    return {"done": "Booked",
            "already_done": "Booked", "cancelled": "Cancelled, nothing was booked",
            "already_cancelled": "Cancelled, nothing was booked", "expired": "Preview expired, nothing was booked",
            "failed": "Not booked"}.get(outcome.status, outcome.message)


def preview_text(action: PendingAction | PendingRecord, viewer_tz: str | None = None) -> str:
    """Plain one-line fallback text of a preview (Slack's ``text`` for notifications)."""
    _, args = _key_args(action)
    who = f" with {', '.join(args.attendees)}" if args.attendees else ""
    return f"Confirm or cancel: {args.title}, {_when(args, viewer_tz)}{who}"


def outcome_text(outcome: ActionOutcome) -> str:
    """Plain fallback text of an outcome (Slack's ``text`` when updating the message)."""
    return outcome.message


# -- terminal ---------------------------------------------------------------------------------------
def terminal_preview(action: PendingAction | PendingRecord, viewer_tz: str | None = None) -> str:
    """The preview for a console: the event's lines, then how to confirm or cancel it."""
    key, args = _key_args(action)
    lines = [f"Pending: {args.title}", f"  when       {_when(args, viewer_tz)}",
             f"  length     {format_duration(args.duration_minutes)}",
             "  attendees  " + (", ".join(args.attendees) if args.attendees else "only you")]
    if args.video_conference:
        lines.append("  video      yes")
    if args.location:
        lines.append(f"  where      {args.location}")
    if args.description:
        lines.append(f"  about      {excerpt_text(args.description, 160)}")
    expiry = _expiry(action, viewer_tz)
    lines.append(f"  key        {key}" + (f" (expires {expiry})" if expiry else ""))
    return "\n".join(lines)


def terminal_outcome(outcome: ActionOutcome) -> str:
    """One line per outcome, with the event link when there is one."""
    link = outcome.result.get("link", "") if outcome.result else ""
    text = f"[{outcome.status}] {outcome.message}"
    if link and link not in text:
        text += f"\n  {link}"
    return text


# -- Microsoft Teams --------------------------------------------------------------------------------
def adaptive_card(action: PendingAction | PendingRecord, *, viewer_tz: str | None = None) -> dict[str, Any]:
    """An Adaptive Card (schema 1.4) of the preview with Confirm / Cancel ``Action.Submit`` buttons whose
    ``data`` is ``{"action": "action_confirm" | "action_cancel", "key": <key>}``."""
    key, args = _key_args(action)
    facts = [{"title": "When", "value": _when(args, viewer_tz)},
             {"title": "Length", "value": format_duration(args.duration_minutes)},
             {"title": "Attendees", "value": ", ".join(args.attendees) if args.attendees else "only you"}]
    if args.video_conference:
        facts.append({"title": "Video", "value": "yes"})
    if args.location:
        facts.append({"title": "Where", "value": args.location})
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": "I can add this to the calendar:", "wrap": True},
        {"type": "TextBlock", "text": args.title, "weight": "Bolder", "size": "Medium", "wrap": True},
        {"type": "FactSet", "facts": facts},
    ]
    if args.description:
        body.append({"type": "TextBlock", "text": excerpt_text(args.description, _EXCERPT), "wrap": True,
                     "isSubtle": True, "size": "Small"})
    body.append({"type": "TextBlock", "text": "Nothing is booked until you confirm.", "wrap": True, "isSubtle": True,
                 "size": "Small"})
    return {
        "type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "version": "1.4",
        "body": body,
        "actions": [
            {"type": "Action.Submit", "title": "Confirm", "style": "positive",
             "data": {"action": CONFIRM_PREFIX.rstrip(":"), "key": key}},
            {"type": "Action.Submit", "title": "Cancel", "style": "destructive",
             "data": {"action": CANCEL_PREFIX.rstrip(":"), "key": key}},
        ],
    }


def adaptive_card_outcome(outcome: ActionOutcome, *, viewer_tz: str | None = None) -> dict[str, Any]:
    """The Adaptive Card that replaces a settled preview (no actions; an ``Action.OpenUrl`` to the event)."""
    body: list[dict[str, Any]] = [{"type": "TextBlock", "text": _headline(outcome), "weight": "Bolder", "wrap": True}]
    if outcome.record is not None:
        _, args = _key_args(outcome.record)
        body.append({"type": "TextBlock", "text": f"{args.title}, {_when(args, viewer_tz)}", "wrap": True})
    if outcome.status in {"failed", "expired"}:
        body.append({"type": "TextBlock", "text": outcome.message, "wrap": True, "isSubtle": True})
    card: dict[str, Any] = {"type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                            "version": "1.4", "body": body}
    link = web_url(outcome.result.get("link")) if outcome.result else ""
    if link:
        card["actions"] = [{"type": "Action.OpenUrl", "title": "Open the event", "url": link}]
    return card
