"""The ``calendar.create`` tool: one implementation of the action-tool contract (:mod:`tools.actions`).

It recognises meeting requests (:mod:`.intent`), reads one into :class:`~.args.CalendarCreateArgs` or a
clarifying question (:func:`.propose.propose_event`), previews the event (title, when in the viewer's
zone, length, attendees, video, room, description) and, once the requester confirmed, books it with
the action's idempotency key as the event id on every backend, so a repeat finds the first event.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, ClassVar, Protocol, TypeVar

from tools.actions import (CHOICE, ActionRequest, ActionResult, ActionToolBase, ActionWords, Clarification, Preview,
                           Proposal)
from tools.arg_checks import problems
from tools.base import ToolContext
from pydantic import ValidationError

from tools.errors import ToolError, ToolUnavailableError
from tools.invites import Courier, DeliveryError, names

from .args import DEFAULT_DURATION_MINUTES, EVENT_ID, CalendarCreateArgs, CreatedEvent
from .freebusy import Schedule
from .intent import is_find_time, meeting_intent

_T = TypeVar("_T")
_F = TypeVar("_F")

# The request reader (.propose: dateparser) is imported by the methods that read or describe a request, and
# the backends (.google: google-api-python-client; .local) by the factory on first use: a question that
# is no meeting request loads neither.

__all__ = ["CalendarCreate", "CalendarBackend"]


class CalendarBackend(Protocol):
    """Where events go: :class:`~tools.calendar.local.LocalCalendar` or
    :class:`~tools.calendar.google.GoogleCalendar`."""

    name: str

    def create(self, args: CalendarCreateArgs, *, event_id: str, requester: str = "",
               organizer_email: str | None = None) -> CreatedEvent:
        """Create the event once per ``event_id`` (a repeat returns the first with ``created=False``)."""
        ...

    def busy(self, emails: list[str], start: datetime, end: datetime, *,
             organizer_email: str | None = None) -> list[Schedule]:
        """Free/busy of ``emails`` between two aware times (:mod:`.freebusy`), read as the organiser."""
        ...


class CalendarCreate(ActionToolBase):
    """``calendar.create``: put one event or a series in a calendar (Google or the local one).

    Args:
        backend: the calendar backend, or a function building it on first use (so wiring the tool
            opens no database and reads no credentials until an action is confirmed).
        default_duration_minutes: the length of a meeting whose request gives none.
        invite_by_dm: the backend invites nobody itself (the local calendar): after booking, each attendee
            who is in the workspace gets the ``.ics`` in a direct message through the requester's platform
            (:attr:`ToolContext.courier`), and the preview says who will (:meth:`invitations`).
    """

    name: ClassVar[str] = "calendar.create"
    description: ClassVar[str] = (
        "Create a calendar event and invite attendees. Side effect: it is shown to the requester as a preview "
        "and runs only after they confirm. Fill start with the date and time in the requester's time zone; for a "
        "recurring series also fill recurrence (an RFC 5545 RRULE) with start as its first occurrence.")
    Args: ClassVar[type[CalendarCreateArgs]] = CalendarCreateArgs
    words: ClassVar[ActionWords] = ActionWords(
        verb="book", past="booked", done="Booked", lead="I can add this to the calendar:",
        time_passed="The start time has passed, so I didn't book it. Ask me again with a new time.",
        undo_hint="delete the event in your calendar if you don't need it")

    def __init__(self, backend: CalendarBackend | Callable[[], CalendarBackend],
                 default_duration_minutes: int = DEFAULT_DURATION_MINUTES, *, invite_by_dm: bool = False) -> None:
        self._backend: CalendarBackend | None = None
        self._factory: Callable[[], CalendarBackend] | None = None
        if callable(backend) and not hasattr(backend, "create"):
            self._factory = backend
        else:
            # a backend object may itself be callable, so callable() cannot tell it from a factory for mypy
            self._backend = backend  # type: ignore[assignment]
        self.default_duration_minutes = default_duration_minutes
        self.invite_by_dm = invite_by_dm
        self._lock = threading.Lock()

    @property
    def backend(self) -> CalendarBackend:
        """The backend (built on first use when a factory was given)."""
        with self._lock:
            if self._backend is None:
                assert self._factory is not None
                self._backend = self._factory()
            return self._backend

    def close(self) -> None:
        """Close the backend if it was built and can be closed."""
        if self._backend is not None and hasattr(self._backend, "close"):
            self._backend.close()

    # -- the action-tool contract ---------------------------------------------------------------
    def intent(self, text: str) -> float:
        """0.7 for a meeting request (:func:`.intent.meeting_intent`), else 0.0."""
        return meeting_intent(text)

    def propose(self, request: ActionRequest) -> Proposal | Clarification:
        """Read the request into arguments (the event's description is ``request.background``), or ask.

        Addresses in the message that completes an earlier request ("bob@example.com") stand for the
        people that request named without one ("with bob").
        """
        from .availability import with_availability
        from .propose import invalid_question, propose_event, summary_line

        if is_find_time(request.text):
            return self._find_time(request)
        given_later = bool(request.completion) and "@" in request.completion
        p = propose_event(request.text, now=request.sent_at, timezone_name=request.timezone,
                          default_duration=self.default_duration_minutes, description=request.background,
                          addresses_given_later=given_later)
        d = p.draft
        trace = {"title": d.title, "start": d.start.isoformat() if d.start else None, "duration": d.duration_minutes,
                 "attendees": d.attendees, "missing": d.missing, "vague": d.vague, "unknown_people": d.unknown_people}
        if p.args is None:
            return Clarification(p.question or invalid_question(p.invalid), trace)
        proposed = args = p.args
        if request.requester_email:  # free/busy is read as the organiser: without their address, nothing is read
            args = self._checked(lambda backend: with_availability(
                proposed, backend, requester_email=request.requester_email, requester_tz=request.timezone), proposed)
        trace["busy"] = list(args.busy)
        return Proposal(args, summary_line(args, request.timezone), trace)

    def _checked(self, check: Callable[[CalendarBackend], _T], fallback: _F) -> _T | _F:
        """``check(backend)``, or ``fallback`` when the backend cannot be built (no credentials yet)."""
        try:
            backend = self.backend
        except ToolError:
            return fallback
        return check(backend)

    def _find_time(self, request: ActionRequest) -> Proposal | Clarification:
        """"find 30 minutes with alice@... this week": the first common free slot, the next ones as choices."""
        from .availability import find_time
        from .extract import extract_event
        from .propose import invalid_question, summary_line

        d = extract_event(request.text, now=request.sent_at, timezone_name=request.timezone)
        trace = {"find_time": True, "duration": d.duration_minutes, "attendees": d.attendees,
                 "unknown_people": d.unknown_people}
        if d.unknown_people:
            names = ", ".join(d.unknown_people)
            return Clarification(f"Whose calendars should I look at? Give me the e-mail address of {names} (or "
                                 "mention them). Nothing has been booked.", trace)
        if not d.attendees:
            return Clarification("Who should I find a time with? Mention them or give their e-mail addresses. "
                                 "Nothing has been booked.", trace)
        raw = {"title": d.title, "start": request.sent_at + timedelta(days=1),
               "duration_minutes": d.duration_minutes or self.default_duration_minutes, "attendees": d.attendees,
               "description": request.background, "location": d.location, "timezone": d.timezone,
               "video_conference": d.video_conference}
        try:
            base = CalendarCreateArgs.model_validate(raw, context={"now": request.sent_at})
        except ValidationError as exc:
            return Clarification(invalid_question(problems(exc)), trace)
        found = self._checked(lambda backend: find_time(
            base, backend, text=request.text, now=request.sent_at, requester_email=request.requester_email,
            requester_tz=request.timezone), "I can't look at calendars right now; ask for a time instead. Nothing "
                                            "has been booked.")
        if isinstance(found, str):
            return Clarification(found, trace)
        trace["slots"] = [found.start.isoformat(), *(s.isoformat() for s in found.free_slots)]
        return Proposal(found, summary_line(found, request.timezone), trace)

    def preview(self, args: CalendarCreateArgs, viewer_tz: str | None = None) -> Preview:
        """Title; When (the viewer's zone, a series in words), Length, Attendees, Busy then / Calendars (free/busy),
        Video, Where; the description; the other free slots as choices (``Tue 01 Dec 15:30``)."""
        from .propose import format_duration, format_slot, format_when, summary_line

        fields = [("When", format_when(args, viewer_tz) if args.start else "(no time)"),
                  ("Length", format_duration(args.duration_minutes)),
                  ("Attendees", ", ".join(args.attendees) if args.attendees else "only you")]
        if args.busy:
            fields.append(("Busy then", ", ".join(args.busy)))
        if args.availability:
            fields.append(("Calendars", args.availability))
        if args.free_slots:
            label = "Also free" if not args.busy else "Next free"
            fields.append((label, ", ".join(format_slot(s, viewer_tz or args.timezone) for s in args.free_slots)))
        if args.video_conference:
            fields.append(("Video", "yes"))
        if args.location:
            fields.append(("Where", args.location))
        return Preview(args.title, tuple(fields), summary_line(args, viewer_tz), args.description,
                       tuple(f"Book {format_slot(s, viewer_tz or args.timezone)}" for s in args.free_slots))

    def execute(self, args: CalendarCreateArgs, key: str, ctx: ToolContext) -> ActionResult:
        """Book the event with ``key`` (base32hex) as its id, organised by ``ctx.user_email`` when known.

        Returns:
            ok with the event's link (Google's page, or the local ``.ics`` as a ``file://`` URL) and
            the video call's; a backend failure as not ok, ``retryable`` when Google may answer later.
        """
        from .propose import summary_line

        if not EVENT_ID.match(key):
            return ActionResult(False, "This request has no valid event id, so nothing was booked.")
        choice = ctx.extra.get(CHOICE)
        if choice is not None:
            if not (isinstance(choice, int) and 0 <= choice < len(args.free_slots)):
                return ActionResult(False, "That time is not one of the choices offered, so nothing was booked.")
            args = args.at(args.free_slots[choice])
        try:
            ev = self.backend.create(args, event_id=key, requester=ctx.user_id,
                                     organizer_email=ctx.user_email or None)
        except ToolError as exc:
            retry = bool(getattr(exc, "retryable", False)) or isinstance(exc, ToolUnavailableError)
            return ActionResult(False, str(exc), retryable=retry, details={"error": str(exc)})
        opener = {"google": "Open in Google Calendar", "microsoft": "Open in Outlook"}.get(ev.backend, "Open the .ics")
        links = [(opener, ev.link)]
        if ev.conference_link:
            links.append(("Join the Teams meeting" if ev.backend == "microsoft" else "Join the video call",
                          ev.conference_link))
        summary = summary_line(args, ctx.timezone or args.timezone)
        picked = {"summary": summary, "start": args.start.isoformat()} if choice is not None else {}
        details = {**ev.as_dict(), **picked}
        notes: tuple[str, ...] = ()
        if self.invite_by_dm and args.attendees and ev.created:
            notes, details["invitations"] = self._invite(args, ev.raw, ctx)
        message = " ".join([f"Booked: {summary}.", *notes])
        return ActionResult(True, message, links=tuple(links), details=details, notes=notes)

    # -- invitations by direct message ------------------------------------------------------------
    def invitations(self, args: CalendarCreateArgs, courier: Courier | None,
                    conversation_id: str = "") -> tuple[str, str] | None:
        """The preview's ``("Invitations", ...)`` field when attendees are invited by DM: who will get the
        ``.ics`` in a DM, who is not in the workspace and will not be invited (None when the backend invites
        them itself, or there is nobody to invite)."""
        if not self.invite_by_dm or not args.attendees:
            return None
        if courier is None:
            return ("Invitations", "none are sent from here: tell the attendees yourself")
        try:
            found = courier.find(args.attendees, conversation_id=conversation_id)
        except DeliveryError as exc:
            return ("Invitations", f"I couldn't check who is in the workspace ({exc.reason}); I'll try to send the "
                                   "invitation in a DM after you confirm")
        inside = [found[a.lower()].label for a in args.attendees if a.lower() in found]
        outside = [a for a in args.attendees if a.lower() not in found]
        parts = []
        if inside:
            parts.append(f"{names(inside)} will get the invitation in a DM")
        if outside:
            are = "is" if len(outside) == 1 else "are"
            parts.append(f"{names(outside)} {are} not in the workspace and will not be invited")
        return ("Invitations", "; ".join(parts))

    def _invite(self, args: CalendarCreateArgs, event: dict[str, Any],
                ctx: ToolContext) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Send the booked event's ``.ics`` to every attendee in the workspace through ``ctx.courier``.

        Returns:
            the sentences for the requester (who got it, who was not invited, whose DM failed: nothing is
            said to be sent that was not) and the same as JSON for the stored result.
        """
        from .local import event_ics
        from .propose import summary_line

        record: dict[str, Any] = {"sent": [], "not_in_workspace": [], "failed": []}
        courier = ctx.courier
        if courier is None:
            record["failed"] = [{"email": a, "reason": "no invitations are sent from here"} for a in args.attendees]
            return (("Nobody was sent an invitation from here: tell the attendees yourself.",), record)
        try:
            found = courier.find(args.attendees, conversation_id=ctx.channel_id)
        except DeliveryError as exc:
            record["failed"] = [{"email": a, "reason": exc.reason} for a in args.attendees]
            return ((f"I couldn't send the invitations: {exc.reason}. Share the .ics with the attendees.",), record)
        data = event_ics(event)
        who = ctx.user_email or "A colleague"
        text = (f"{who} invited you: {summary_line(args, args.timezone)}. The invitation is attached: open it to add "
                "the meeting to your calendar.")
        filename = f"{_slug(args.title)}.ics"
        failed: list[str] = []
        for email in args.attendees:
            person = found.get(email.lower())
            if person is None:
                record["not_in_workspace"].append(email)
                continue
            try:
                courier.send_file(person, text=text, filename=filename, data=data, conversation_id=ctx.channel_id)
                record["sent"].append(email)
            except DeliveryError as exc:
                record["failed"].append({"email": email, "reason": exc.reason})
                failed.append(f"{person.label} ({exc.reason})")
        label = {p.email: p.label for p in found.values()}
        notes = []
        if record["sent"]:
            notes.append(f"{names([label.get(e.lower(), e) for e in record['sent']])} got the invitation in a DM.")
        if record["not_in_workspace"]:
            notes.append(f"Not invited (not in the workspace): {names(record['not_in_workspace'])}.")
        if failed:
            notes.append(f"The invitation could not be sent to {names(failed)}; share the .ics with them.")
        return tuple(notes), record


def _slug(title: str) -> str:
    """A file name for ``title`` (``Release review`` -> ``release-review``; ``invitation`` when nothing is left)."""
    import re

    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60] or "invitation"
