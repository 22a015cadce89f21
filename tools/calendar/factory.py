"""Build ``calendar.create`` from plain settings values (the composition root passes them in)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tools.errors import ToolUnavailableError

from .args import DEFAULT_DURATION_MINUTES
from .tool import CalendarBackend, CalendarCreate

__all__ = ["calendar_backend", "calendar_tool", "purge_local_calendar"]


def calendar_backend(backend: str = "local", *, state_url: str = "", ics_dir: str | Path = "",
                     service_account_file: str | None = None, oauth_token_file: str | None = None,
                     calendar_id: str = "primary", api_endpoint: str | None = None) -> CalendarBackend:
    """The calendar backend: ``"local"`` (events in the state database at ``state_url``, an ``.ics``
    each in ``ics_dir``) or ``"google"`` (a service account with domain-wide delegation, or an OAuth
    user token; ``api_endpoint`` overrides the API's base URL, e.g. for a stand-in).

    Raises:
        ToolUnavailableError: Google without its extra (``chatops-bot[google]``) or a credentials file, or
            unreadable key files.
        ValueError: an unknown backend name.
    """
    if backend == "google":
        try:
            from .google import GoogleCalendar, credentials_factory
        except ImportError as exc:  # the CLI says so at startup (app.extras); a library caller learns it here
            raise ToolUnavailableError("CALENDAR_BACKEND=google needs the google extra, which is not installed: "
                                       "pip install 'chatops-bot[google]'") from exc

        creds = credentials_factory(service_account_file, oauth_token_file)
        return GoogleCalendar(creds, calendar_id=calendar_id, api_endpoint=api_endpoint)
    if backend != "local":
        raise ValueError(f"unknown calendar backend {backend!r}; use 'local' or 'google'")
    from .local import LocalCalendar

    return LocalCalendar(state_url, ics_dir)


def calendar_tool(backend: str = "local", *, default_duration_minutes: int = DEFAULT_DURATION_MINUTES,
                  **options) -> CalendarCreate:
    """``calendar.create`` over :func:`calendar_backend` (``options`` are its keyword arguments), built on
    first use: wiring it opens no database and reads no credentials until an action is confirmed. The local
    calendar invites nobody itself, so its attendees get the ``.ics`` in a DM (``invite_by_dm``)."""
    return CalendarCreate(lambda: calendar_backend(backend, **options), default_duration_minutes,
                          invite_by_dm=backend == "local")


def purge_local_calendar(state_url: str, ics_dir: str | Path, before: datetime) -> int:
    """Retention of the local calendar: delete its events (rows and ``.ics`` files) that ended before
    ``before`` (:meth:`LocalCalendar.purge_ended_before`); returns how many.

    Raises:
        ToolUnavailableError: when the database cannot be opened.
    """
    from .local import LocalCalendar

    cal = LocalCalendar(state_url, ics_dir)
    try:
        return cal.purge_ended_before(before)
    finally:
        cal.close()
