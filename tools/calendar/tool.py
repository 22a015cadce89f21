"""The ``calendar.create`` tool: a side-effect tool, so it only ever runs on a confirmed pending action.

The planner proposes it (``Reply.pending_action``); :class:`app.actions.ActionService` stores the
proposal and, once the requester confirms, calls :meth:`CalendarCreate.run` with a
:class:`~tools.base.ToolContext` whose ``extra`` holds the action's ``idempotency_key`` (the
event id on every backend) and, when known, the ``requester_email``. ``ToolRegistry.call``
refuses to run it directly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ClassVar, Protocol

from tools.base import ToolContext
from tools.errors import ToolArgumentError

from .args import CalendarCreateArgs, CreatedEvent
from .google import EVENT_ID

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
    """``calendar.create``: put one event in a calendar (Google or the local one).

    Args:
        backend: the calendar backend, or a function building it on first use (so wiring the tool
            opens no database and reads no credentials until an action is confirmed).
    """

    name: ClassVar[str] = "calendar.create"
    description: ClassVar[str] = (
        "Create a calendar event and invite attendees. Side effect: it is shown to the requester as a preview "
        "and runs only after they confirm. Fill start with the date and time in the requester's time zone; for a "
        "recurring series also fill recurrence (an RFC 5545 RRULE) with start as its first occurrence.")
    Args: ClassVar[type[CalendarCreateArgs]] = CalendarCreateArgs
    side_effect: ClassVar[bool] = True
    permission: ClassVar[str] = "everyone"

    def __init__(self, backend: CalendarBackend | Callable[[], CalendarBackend]) -> None:
        self._backend: CalendarBackend | None = None
        self._factory: Callable[[], CalendarBackend] | None = None
        if callable(backend) and not hasattr(backend, "create"):
            self._factory = backend
        else:
            self._backend = backend  # type: ignore[assignment]
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

    def run(self, args: CalendarCreateArgs, ctx: ToolContext) -> CreatedEvent:  # type: ignore[override]
        """Create the event.

        ``ctx.extra["idempotency_key"]`` (required, base32hex) becomes the event id;
        ``ctx.extra["requester_email"]`` (optional) the organizer / delegated user.

        Raises:
            ToolArgumentError: without a valid idempotency key.
            ToolError: the backend's errors (e.g. :class:`~tools.calendar.google.GoogleCalendarError`).
        """
        key = str(ctx.extra.get("idempotency_key") or "")
        if not EVENT_ID.match(key):
            raise ToolArgumentError("calendar.create runs only for a confirmed pending action with a base32hex "
                                    "idempotency key")
        return self.backend.create(args, event_id=key, requester=ctx.user_id,
                                   organizer_email=ctx.extra.get("requester_email") or None)
