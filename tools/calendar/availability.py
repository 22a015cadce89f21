"""Free/busy before booking, for ``calendar.create``'s proposal.

- :func:`with_availability`: a proposed event gets who is busy at its time and, when someone is, the next
  slots when everybody is free (the preview offers them as buttons).
- :func:`find_time`: "find 30 minutes with alice@example.com this week" becomes an event at the first slot
  when everybody is free in the window the request names, with the next ones as choices.

Both ask the backend's ``busy`` (:class:`~.tool.FreeBusy`) for the requester and the attendees; when the
calendars cannot be read the proposal goes ahead and says so (nothing is claimed about anyone).
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from tools.errors import ToolError

from .args import CalendarCreateArgs
from .freebusy import MAX_SLOTS, Schedule, busy_at, free_slots

__all__ = ["FreeBusy", "with_availability", "find_time", "search_window", "LOOKAHEAD"]

log = logging.getLogger(__name__)

#: How far after a busy time the next free slots are looked for.
LOOKAHEAD = timedelta(days=7)
_WINDOW_WORDS = re.compile(r"\b(today|tomorrow|this\s+week|next\s+week)\b", re.I)


class FreeBusy(Protocol):
    """A calendar backend that can say who is busy (every backend here)."""

    def busy(self, emails: list[str], start: datetime, end: datetime, *,
             organizer_email: str | None = None) -> list[Schedule]:
        """Each address's busy intervals between two aware times (see :mod:`.freebusy`)."""
        ...


def _people(requester_email: str, attendees: list[str]) -> list[str]:
    out: list[str] = []
    for e in [requester_email, *attendees]:
        if e and e.lower() not in out:
            out.append(e.lower())
    return out


def _schedules(backend: FreeBusy, people: list[str], start: datetime, end: datetime,
               organizer: str) -> tuple[list[Schedule], str]:
    try:
        return backend.busy(people, start, end, organizer_email=organizer), ""
    except ToolError as exc:
        log.warning("calendar: free/busy look-up failed (%s)", type(exc).__name__)
        return [], f"calendars not checked: {str(exc)[:200]}"


def _unread(schedules: list[Schedule]) -> str:
    missing = [s.email for s in schedules if s.error]
    return f"could not read the calendar of {', '.join(missing)}" if missing else ""


def with_availability(args: CalendarCreateArgs, backend: FreeBusy, *, requester_email: str,
                      requester_tz: str) -> CalendarCreateArgs:
    """``args`` with ``busy`` (who is busy at its time), ``free_slots`` (when someone is: the next
    :data:`~.freebusy.MAX_SLOTS` starts within :data:`LOOKAHEAD` when everybody is free and at work) and
    ``availability`` (a note). A series or a request without the requester's e-mail is returned unchanged."""
    if args.recurrence or not requester_email or args.end is None:
        return args
    people = _people(requester_email, args.attendees)
    schedules, failed = _schedules(backend, people, args.start, args.start + LOOKAHEAD, requester_email)
    if failed:
        return args.model_copy(update={"availability": failed})
    busy = busy_at(schedules, args.start, args.end)
    slots = free_slots(schedules, duration=args.end - args.start, after=args.start, until=args.start + LOOKAHEAD,
                       requester_tz=requester_tz, skip=[args.start]) if busy else []
    note = "; ".join(x for x in ("" if busy else "everyone is free then", _unread(schedules)) if x)
    return args.model_copy(update={"busy": busy, "free_slots": slots, "availability": note})


def search_window(text: str, now: datetime, tz: str) -> tuple[datetime, datetime]:
    """The window a find-time request names, in the requester's zone: ``today``, ``tomorrow``, ``this week``
    (to Friday's end), ``next week`` (Monday to Friday); the next five days otherwise."""
    local = now.astimezone(ZoneInfo(tz))
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    word = (m.group(1).lower().split()[0] if (m := _WINDOW_WORDS.search(text)) else "")
    if word == "today":
        return now, midnight + timedelta(days=1)
    if word == "tomorrow":
        return midnight + timedelta(days=1), midnight + timedelta(days=2)
    if word == "this" and local.weekday() < 5:
        return now, midnight + timedelta(days=5 - local.weekday())
    if word in ("this", "next"):  # "this week" on a weekend: the coming one
        monday = midnight + timedelta(days=7 - local.weekday())
        return monday, monday + timedelta(days=5)
    return now, midnight + timedelta(days=6)


def find_time(args: CalendarCreateArgs, backend: FreeBusy, *, text: str, now: datetime, requester_email: str,
              requester_tz: str) -> CalendarCreateArgs | str:
    """The event moved to the first slot in the request's window (:func:`search_window`) when everybody is
    free, with up to :data:`~.freebusy.MAX_SLOTS` more as ``free_slots``; or a sentence saying why there is
    none (no e-mail to look up, calendars unreadable, no common free time)."""
    if not requester_email:
        return ("I need your e-mail address to look at calendars (Slack: the users:read.email scope); ask for a "
                "time instead, e.g. 'tomorrow at 3pm'. Nothing has been booked.")
    lo, hi = search_window(text, now, requester_tz)
    people = _people(requester_email, args.attendees)
    schedules, failed = _schedules(backend, people, lo, hi, requester_email)
    if failed:
        return f"I couldn't look at the calendars ({failed}); ask for a time instead. Nothing has been booked."
    duration = timedelta(minutes=args.duration_minutes or 30)
    slots = free_slots(schedules, duration=duration, after=max(lo, now + timedelta(minutes=5)), until=hi,
                       requester_tz=requester_tz, count=MAX_SLOTS + 1)
    if not slots:
        return (f"There is no {args.duration_minutes}-minute slot when {', '.join(people)} are all free within "
                "working hours then; try another week. Nothing has been booked.")
    first = args.at(slots[0])
    note = "; ".join(x for x in ("everyone is free then", _unread(schedules)) if x)
    return first.model_copy(update={"free_slots": slots[1:], "availability": note})
