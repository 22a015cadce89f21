"""The ``calendar.create`` tool: one implementation of the action-tool contract (:mod:`tools.actions`).

It recognises meeting requests (:mod:`.intent`), reads one into :class:`~.args.CalendarCreateArgs` or a
clarifying question (:func:`.propose.propose_event`), previews the event (title, when in the viewer's
zone, length, attendees, video, room, description) and, once the requester confirmed, books it with
the action's idempotency key as the event id on every backend, so a repeat finds the first event.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ClassVar, Protocol

from tools.actions import ActionRequest, ActionResult, ActionWords, Clarification, Preview, Proposal
from tools.base import ToolContext
from tools.errors import ToolError, ToolUnavailableError
from tools.invites import Courier, DeliveryError, names

from .args import DEFAULT_DURATION_MINUTES, EVENT_ID, CalendarCreateArgs, CreatedEvent
from .intent import meeting_intent

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


class CalendarCreate:
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
    side_effect: ClassVar[bool] = True
    permission: ClassVar[str] = "everyone"
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
        from .propose import invalid_question, propose_event, summary_line

        given_later = bool(request.completion) and "@" in request.completion
        p = propose_event(request.text, now=request.sent_at, timezone_name=request.timezone,
                          default_duration=self.default_duration_minutes, description=request.background,
                          addresses_given_later=given_later)
        d = p.draft
        trace = {"title": d.title, "start": d.start.isoformat() if d.start else None, "duration": d.duration_minutes,
                 "attendees": d.attendees, "missing": d.missing, "vague": d.vague, "unknown_people": d.unknown_people}
        if p.args is None:
            return Clarification(p.question or invalid_question(p.invalid), trace)
        return Proposal(p.args, summary_line(p.args, request.timezone), trace)

    def preview(self, args: CalendarCreateArgs, viewer_tz: str | None = None) -> Preview:  # type: ignore[override]
        """Title; When (the viewer's zone, a series in words), Length, Attendees, Video, Where; the description."""
        from .propose import format_duration, format_when, summary_line

        fields = [("When", format_when(args, viewer_tz) if args.start else "(no time)"),
                  ("Length", format_duration(args.duration_minutes)),
                  ("Attendees", ", ".join(args.attendees) if args.attendees else "only you")]
        if args.video_conference:
            fields.append(("Video", "yes"))
        if args.location:
            fields.append(("Where", args.location))
        return Preview(args.title, tuple(fields), summary_line(args, viewer_tz), args.description)

    def execute(self, args: CalendarCreateArgs, key: str, ctx: ToolContext) -> ActionResult:  # type: ignore[override]
        """Book the event with ``key`` (base32hex) as its id, organised by ``ctx.user_email`` when known.

        Returns:
            ok with the event's link (Google's page, or the local ``.ics`` as a ``file://`` URL) and
            the video call's; a backend failure as not ok, ``retryable`` when Google may answer later.
        """
        from .propose import summary_line

        if not EVENT_ID.match(key):
            return ActionResult(False, "This request has no valid event id, so nothing was booked.")
        try:
            ev = self.backend.create(args, event_id=key, requester=ctx.user_id,
                                     organizer_email=ctx.user_email or None)
        except ToolError as exc:
            retry = bool(getattr(exc, "retryable", False)) or isinstance(exc, ToolUnavailableError)
            return ActionResult(False, str(exc), retryable=retry, details={"error": str(exc)})
        links = [("Open in Google Calendar" if ev.backend == "google" else "Open the .ics", ev.link)]
        if ev.conference_link:
            links.append(("Join the video call", ev.conference_link))
        details = ev.as_dict()
        notes: tuple[str, ...] = ()
        if self.invite_by_dm and args.attendees and ev.created:
            notes, details["invitations"] = self._invite(args, ev.raw, ctx)
        message = " ".join([f"Booked: {summary_line(args, ctx.timezone or args.timezone)}.", *notes])
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

    def _invite(self, args: CalendarCreateArgs, event: dict, ctx: ToolContext) -> tuple[tuple[str, ...], dict]:
        """Send the booked event's ``.ics`` to every attendee in the workspace through ``ctx.courier``.

        Returns:
            the sentences for the requester (who got it, who was not invited, whose DM failed: nothing is
            said to be sent that was not) and the same as JSON for the stored result.
        """
        from .local import event_ics
        from .propose import summary_line

        record: dict = {"sent": [], "not_in_workspace": [], "failed": []}
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
