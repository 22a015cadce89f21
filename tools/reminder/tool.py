"""The ``reminder.create`` tool: one-off reminders as direct messages, through the outbox port."""

from __future__ import annotations

from datetime import timezone
from typing import ClassVar
from zoneinfo import ZoneInfo

from pydantic import ValidationError

from tools.actions import ActionRequest, ActionResult, ActionToolBase, ActionWords, Clarification, Preview, Proposal
from tools.arg_checks import problems
from tools.base import ToolContext
from tools.dates import valid_timezone

from .args import ReminderCreateArgs
from .read import is_reminder_request, read_reminder

__all__ = ["ReminderCreate", "NO_OUTBOX"]

#: The result when the bot has no outbox (no state store) to keep the reminder in.
NO_OUTBOX = ("Reminders need the state store, which delivers them at their time, and this bot runs without one; "
             "nothing was scheduled.")


class ReminderCreate(ActionToolBase):
    """``reminder.create``: send the requester a direct message at a time they choose, once.

    Execution stores the message in the outbox (:attr:`tools.base.ToolContext.outbox`) under the
    action's idempotency key, so a repeated confirmation schedules it once; the scheduler delivers it.
    """

    name: ClassVar[str] = "reminder.create"
    description: ClassVar[str] = (
        "Set a one-off reminder: the bot sends the user a direct message with the text at the time given "
        "(e.g. 'remind me to send the report tomorrow at 9', 'remind me in 2 hours to call Bob'). One time "
        "only: it cannot repeat (no 'every Monday'); a word such as 'weekly' that describes the thing to do "
        "('send the weekly report') is part of the text, not a repeat. Fill at with the date and time in the "
        "user's time zone (ISO 8601 with offset) and text with what to remind them of. Side effect: it is shown "
        "as a preview "
        "and runs only after the user confirms.")
    Args: ClassVar[type[ReminderCreateArgs]] = ReminderCreateArgs
    words: ClassVar[ActionWords] = ActionWords(
        verb="set", past="scheduled", done="Reminder set", lead="I can remind you:",
        time_passed="The reminder time has passed, so I didn't set it. Ask me again with a new time.")

    def intent(self, text: str) -> float:
        """0.9 for "remind me ..." / "set a reminder ..." (above a meeting's score: "remind me to book a
        call" is a reminder), else 0.0."""
        return 0.9 if is_reminder_request(text) else 0.0

    def propose(self, request: ActionRequest) -> Proposal | Clarification:
        """Read the text and the time (see :mod:`.read`), or ask for what is missing."""
        draft = read_reminder(request.text, now=request.sent_at, timezone_name=request.timezone)
        trace = {"text": draft.text, "at": draft.at.isoformat() if draft.at else None, "when": draft.when_phrase,
                 "repeating": draft.repeating}
        question = draft.clarification()
        if question:
            return Clarification(question, trace)
        try:
            args = ReminderCreateArgs.model_validate({"text": draft.text, "at": draft.at, "timezone": draft.timezone},
                                                     context={"now": request.sent_at})
        except ValidationError as exc:
            return Clarification(f"I can't set that reminder as asked: {problems(exc)}. Could you correct it? "
                                 "Nothing has been scheduled yet.", trace)
        return Proposal(args, self.preview(args, request.timezone).summary, trace)

    def preview(self, args: ReminderCreateArgs, viewer_tz: str | None = None) -> Preview:
        """Title "Reminder"; When (in the viewer's zone, with the reminder's own when it differs), What."""
        when = _when(args, viewer_tz)
        return Preview("Reminder", (("When", when), ("What", args.text)), f"Reminder: {args.text}, {when}")

    def execute(self, args: ReminderCreateArgs, key: str, ctx: ToolContext) -> ActionResult:
        """Schedule the direct message for ``ctx.user_id`` on ``ctx.platform`` at ``args.at`` under ``key``.

        Returns:
            ok (also when ``key`` was scheduled before: nothing new); not ok and not retryable without
            an outbox or a recipient, or when the outbox refuses the message.
        """
        if ctx.outbox is None:
            return ActionResult(False, NO_OUTBOX)
        if not ctx.user_id or not ctx.platform:
            return ActionResult(False, "I can't tell whom to remind, so nothing was scheduled.")
        at = args.at.astimezone(timezone.utc)
        try:
            new = ctx.outbox.schedule_message(key, platform=ctx.platform, user_id=ctx.user_id,
                                              channel_id=ctx.channel_id, at=at, text=f"Reminder: {args.text}")
        except ValueError as exc:
            return ActionResult(False, f"The reminder could not be stored ({exc}).")
        when = _when(args, ctx.timezone)
        return ActionResult(True, f"Reminder set: I'll message you {when}: \u201c{args.text}\u201d.",
                            details={"key": key, "at": at.isoformat(), "scheduled": new, "delivery": "direct message"})


def _when(args: ReminderCreateArgs, viewer_tz: str | None) -> str:
    """``Thu 14 Mar 2030, 09:00 (Europe/Berlin)`` in the viewer's zone; the reminder's own added when it differs."""
    tz_name = viewer_tz if viewer_tz and valid_timezone(viewer_tz) else args.timezone
    local = args.at.astimezone(ZoneInfo(tz_name))
    text = f"{local:%a %d %b %Y, %H:%M} ({tz_name})"
    if tz_name != args.timezone:
        text += f"; {args.at.astimezone(ZoneInfo(args.timezone)):%a %H:%M} {args.timezone}"
    return text
