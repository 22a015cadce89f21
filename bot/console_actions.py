"""A pending action and its outcome as terminal text (``chatops actions show|confirm|cancel``, ``chatops ask``)."""

from __future__ import annotations

from agent.models import PendingAction
from state import PendingRecord
from tools.actions import ActionTool

from app.actions import ActionOutcome
from .action_views import excerpt, expiry_of, key_of, preview_of

__all__ = ["terminal_preview", "terminal_outcome"]


def terminal_preview(action: PendingAction | PendingRecord, tool: ActionTool | None,
                     viewer_tz: str | None = None) -> str:
    """The preview for a console: the title, a line per field, the details, then the key to confirm or
    cancel it with."""
    preview = preview_of(action, tool, viewer_tz)
    lines = [f"Pending: {preview.title}", *(f"  {label.lower():<10} {value}" for label, value in preview.fields)]
    if preview.details:
        lines.append(f"  {'about':<10} {excerpt(preview.details, 160)}")
    expiry = expiry_of(action, viewer_tz)
    lines.append(f"  {'key':<10} {key_of(action)}" + (f" (expires {expiry})" if expiry else ""))
    return "\n".join(lines)


def terminal_outcome(outcome: ActionOutcome) -> str:
    """One line per outcome, with the action's link when there is one (a local ``file://`` one too: the
    console runs where the file is)."""
    link = outcome.result.get("link", "") if outcome.result else ""
    text = f"[{outcome.status}] {outcome.message}"
    if link and link not in text:
        text += f"\n  {link}"
    return text
