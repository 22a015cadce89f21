"""From a meeting request to validated ``calendar.create`` arguments, or to one clarifying question.

:func:`propose_event` is what the rule-based planner calls on the requester's own words (never on
retrieved text): it runs :func:`~tools.calendar.extract.extract_event`, fills the defaults (a
30-minute length, the title ``Meeting``), adds the description, and validates the result as
:class:`~tools.calendar.args.CalendarCreateArgs`. :func:`event_lines` and :func:`summary_line`
describe arguments for the tool's preview (:meth:`tools.calendar.tool.CalendarCreate.preview`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from .args import DEFAULT_DURATION_MINUTES, CalendarCreateArgs, valid_timezone
from .extract import EventDraft, extract_event
from .recurrence import describe_end, describe_rrule

__all__ = ["EventProposal", "propose_event", "invalid_question", "event_lines", "summary_line", "format_when",
           "format_duration", "format_slot"]


@dataclass(slots=True)
class EventProposal:
    """The outcome of :func:`propose_event`: ``args`` when complete, else ``question`` or ``invalid``.

    Attributes:
        args: validated arguments, or None.
        question: the clarifying question (what is missing or ambiguous), or None.
        draft: what the extractor read (for the trace).
        invalid: what failed validation (``attendees: 'x@y' is not a valid e-mail address``), or "".
    """

    args: CalendarCreateArgs | None
    question: str | None
    draft: EventDraft
    invalid: str = ""


def propose_event(request: str, *, now: datetime, timezone_name: str,
                  default_duration: int = DEFAULT_DURATION_MINUTES, description: str = "",
                  addresses_given_later: bool = False) -> EventProposal:
    """Read ``request`` and return arguments or a question.

    Args:
        request: the requester's request (only their own message, possibly joined with their
            earlier message in the thread when this one completes it).
        now: the message time (aware); relative dates count from it and the start must follow it.
        timezone_name: the requester's IANA zone.
        default_duration: minutes when the request gives no length.
        description: the event's description (the planner's context: the request, a cited answer).
        addresses_given_later: the request's last part supplied addresses, so names read earlier
            ("with bob") are taken as covered by them.
    """
    draft = extract_event(request, now=now, timezone_name=timezone_name)
    if addresses_given_later and draft.attendees:
        draft.unknown_people.clear()
    question = draft.clarification()
    if question:
        return EventProposal(None, question, draft)
    assert draft.start is not None
    raw = {"title": draft.title, "start": draft.start, "duration_minutes": draft.duration_minutes or default_duration,
           "attendees": draft.attendees, "description": description, "location": draft.location,
           "timezone": draft.timezone, "video_conference": draft.video_conference, "recurrence": draft.recurrence}
    try:
        args = CalendarCreateArgs.model_validate(raw, context={"now": now})
    except ValidationError as exc:
        return EventProposal(None, None, draft, invalid="; ".join(_problem(e) for e in exc.errors()))
    return EventProposal(args, None, draft)


def invalid_question(problems: str) -> str:
    """The question when a meeting request's details do not validate (a bad address, a bad length)."""
    return f"I can't book that as asked: {problems}. Could you correct it? Nothing has been booked."


def _problem(err: ErrorDetails) -> str:
    where = ".".join(str(x) for x in err.get("loc", ()) if x != "__root__")
    msg = str(err.get("msg", "")).removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def format_when(args: CalendarCreateArgs, viewer_tz: str | None = None) -> str:
    """``Thu 13 Mar 2025, 15:00–15:30 (Europe/Berlin)`` in the viewer's zone, with the event's zone
    added when it differs (``…; 07:00 America/Los_Angeles``).

    A series is described in the event's own zone, where its rule repeats:
    ``every Monday, 09:00–09:25, starting Mon 23 Nov 2026 (Europe/Berlin)`` (an end follows the start:
    ``…, starting Mon 23 Nov 2026, 6 times (…)``), with the first start in
    the viewer's zone added when that differs (``…; first Mon 23 Nov 00:00 America/Los_Angeles``).
    """
    if args.recurrence:
        return _format_series(args, viewer_tz)
    tz_name = viewer_tz if viewer_tz and valid_timezone(viewer_tz) else args.timezone
    tz = ZoneInfo(tz_name)
    start, end = args.start.astimezone(tz), (args.end or args.start).astimezone(tz)
    same_day = start.date() == end.date()
    text = (f"{start:%a %d %b %Y}, {start:%H:%M}\u2013{end:%H:%M}" if same_day
            else f"{start:%a %d %b %Y %H:%M} \u2013 {end:%a %d %b %Y %H:%M}") + f" ({tz_name})"
    if tz_name != args.timezone:
        local = args.local_start()
        text += f"; {local:%a %H:%M} {args.timezone}"
    return text


def _format_series(args: CalendarCreateArgs, viewer_tz: str | None) -> str:
    start, end = args.local_start(), args.local_end()
    span = f"{start:%H:%M}\u2013{end:%H:%M}" if start.date() == end.date() else f"{start:%H:%M}\u2013{end:%a %H:%M}"
    assert args.recurrence
    every = describe_rrule(args.recurrence, start, with_end=False)
    text = (f"{every}, {span}, starting {start:%a %d %b %Y}{describe_end(args.recurrence, start)} "
            f"({args.timezone})")
    if viewer_tz and valid_timezone(viewer_tz) and viewer_tz != args.timezone:
        first = args.start.astimezone(ZoneInfo(viewer_tz))
        text += f"; first {first:%a %d %b %H:%M} {viewer_tz}"
    return text


def format_slot(start: datetime, tz_name: str) -> str:
    """A slot's start in ``tz_name``: ``Tue 01 Dec 15:30``."""
    zone = tz_name if valid_timezone(tz_name) else "UTC"
    return f"{start.astimezone(ZoneInfo(zone)):%a %d %b %H:%M}"


def format_duration(minutes: int | None) -> str:
    """``30 min``, ``1 h``, ``1 h 30 min``."""
    m = int(minutes or 0)
    if m < 60:
        return f"{m} min"
    h, rest = divmod(m, 60)
    return f"{h} h" + (f" {rest} min" if rest else "")


def event_lines(args: CalendarCreateArgs, viewer_tz: str | None = None, excerpt: int = 160) -> list[str]:
    """Preview lines: title, when (viewer's zone; a series in words), length, attendees, video, location,
    description excerpt."""
    lines = [f"Title: {args.title}", f"When: {format_when(args, viewer_tz)}",
             f"Length: {format_duration(args.duration_minutes)}",
             "Attendees: " + (", ".join(args.attendees) if args.attendees else "only you")]
    if args.video_conference:
        lines.append("Video call: yes (Google Meet on Google Calendar, Teams on Microsoft 365)")
    if args.location:
        lines.append(f"Where: {args.location}")
    if args.description:
        lines.append(f"Description: {excerpt_text(args.description, excerpt)}")
    return lines


def excerpt_text(text: str, limit: int) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters (with an ellipsis)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit - 1].rsplit(" ", 1)[0]
    return cut + "\u2026"


def summary_line(args: CalendarCreateArgs, viewer_tz: str | None = None) -> str:
    """One line: ``Release review, Thu 13 Mar 2025, 15:00–15:30 (Europe/Berlin) with alice@example.com``."""
    who = f" with {', '.join(args.attendees)}" if args.attendees else ""
    return f"{args.title}, {format_when(args, viewer_tz)}{who}"
