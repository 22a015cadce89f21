"""What every platform's rendering of a pending action shares: the tool's preview of the stored arguments,
the settled outcome's headline, summary, links and notes, in the tool's words.

Nothing here talks to a platform or the state store, and nothing here knows a tool: every function takes
a pending action (:class:`agent.models.PendingAction` as the agent proposed it, or the stored
:class:`state.PendingRecord`) with its action tool (:class:`tools.actions.ActionTool`, from
:meth:`app.actions.ActionService.tool`; None when it is not registered here), or an
:class:`app.actions.ActionOutcome` (which carries its tool). Each platform draws them in its own folder:
Block Kit in :mod:`bot.slack.action_blocks`, Adaptive Cards in :mod:`bot.teams.action_cards`, the
terminal in :mod:`bot.cli_actions`. Times are shown in the viewer's (the requester's) time zone, as the
tool's preview puts them; links that are not web links (a local calendar's ``file://`` path is the
server's) are never offered.
"""

from __future__ import annotations

import dataclasses
from datetime import timezone
from zoneinfo import ZoneInfo

from agent.models import PendingAction
from state import PendingRecord
from tools.actions import ActionTool, ActionWords, Preview, fallback_preview, stored_args
from tools.dates import valid_timezone

from app.actions import ActionOutcome, Status
from .links import web_url

__all__ = ["EXCERPT", "MAX_CHOICES", "key_of", "preview_of", "notes_of", "words_of", "excerpt", "expiry_of",
           "web_links", "record_outcome", "settled_summary", "headline"]

EXCERPT = 300
#: At most this many choice buttons (Slack allows 25 elements in an actions block; Teams cards show ~5 actions).
MAX_CHOICES = 3
_GENERIC = ActionWords()


def key_of(action: PendingAction | PendingRecord) -> str:
    return action.idempotency_key if isinstance(action, PendingAction) else action.key


def preview_of(action: PendingAction | PendingRecord, tool: ActionTool | None, viewer_tz: str | None,
             extra_fields: tuple[tuple[str, str], ...] = ()) -> Preview:
    """The tool's preview of the stored arguments (not re-validated: an old preview may lie in the past), with
    ``extra_fields`` (:meth:`app.actions.ActionService.preview_fields`) after the tool's own."""
    args = stored_args(tool, dict(action.args)) if tool is not None else None
    if tool is None or args is None:
        return fallback_preview(action.summary)
    preview = tool.preview(args, viewer_tz)
    return dataclasses.replace(preview, fields=preview.fields + tuple(extra_fields)) if extra_fields else preview


def notes_of(outcome: ActionOutcome) -> list[str]:
    """The done action's notes (who got an invitation, whose failed), as the tool stored them."""
    raw = outcome.result.get("notes") if outcome.result and outcome.status in {"done", "already_done"} else None
    return [str(n) for n in raw or [] if str(n).strip()]


def words_of(tool: ActionTool | None) -> ActionWords:
    return tool.words if tool is not None else _GENERIC


def excerpt(text: str, limit: int) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters (with an ellipsis)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[:limit - 1].rsplit(" ", 1)[0] + "\u2026"


def expiry_of(action: PendingAction | PendingRecord, viewer_tz: str | None) -> str:
    if isinstance(action, PendingRecord):
        tz = ZoneInfo(viewer_tz) if viewer_tz and valid_timezone(viewer_tz) else timezone.utc
        return action.expires_at.astimezone(tz).strftime("%H:%M %Z")
    return ""


def web_links(outcome: ActionOutcome) -> list[tuple[str, str]]:
    """The outcome's web links as ``(label, url)`` (stored ``links``; an older record's bare ``link``)."""
    raw = outcome.result.get("links") if outcome.result else None
    pairs = [(str(x[0]), str(x[1])) for x in raw or [] if isinstance(x, (list, tuple)) and len(x) == 2]
    if not pairs and outcome.result and outcome.result.get("link"):
        pairs = [("Open", str(outcome.result["link"]))]
    return [(label, url) for label, url in ((lab, web_url(u)) for lab, u in pairs) if url]


def record_outcome(rec: PendingRecord, tool: ActionTool | None) -> ActionOutcome:
    w = words_of(tool)
    seen_as: dict[str, Status] = {"done": "already_done", "cancelled": "already_cancelled", "failed": "failed",
                                  "executing": "in_progress"}
    status = seen_as.get(rec.status, "expired")
    msg = {"already_done": f"{w.done}.", "already_cancelled": f"Cancelled; nothing was {w.past}.",
           "failed": str((rec.result or {}).get("message") or f"This request failed; nothing was {w.past}."),
           "in_progress": f"It's being {w.past} right now."}.get(status, f"This preview expired; nothing was {w.past}.")
    return ActionOutcome(status, msg, rec, dict(rec.result or {}) if rec.status == "done" else {},
                         tool)


def settled_summary(outcome: ActionOutcome, viewer_tz: str | None) -> str:
    """The settled action's one line: the result's ``summary`` when it differs from the preview (a picked
    choice, in the requester's zone), else the preview's in the viewer's zone."""
    done = str((outcome.result or {}).get("summary") or "") if outcome.status in {"done", "already_done"} else ""
    assert outcome.record is not None
    return done or preview_of(outcome.record, outcome.tool, viewer_tz).summary


def headline(outcome: ActionOutcome) -> str:
    w = outcome.words
    return {"done": w.done, "already_done": w.done, "cancelled": f"Cancelled, nothing was {w.past}",
            "already_cancelled": f"Cancelled, nothing was {w.past}",
            "expired": f"Preview expired, nothing was {w.past}",
            "failed": f"Not {w.past}"}.get(outcome.status, outcome.message)
