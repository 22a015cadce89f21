"""Build ``calendar.create`` from plain settings values (the composition root passes them in)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict, Unpack

from tools.errors import ToolUnavailableError

from .args import DEFAULT_DURATION_MINUTES
from .tool import CalendarBackend, CalendarCreate

__all__ = ["calendar_backend", "calendar_tool", "purge_local_calendar"]


def calendar_backend(backend: str = "local", *, state_url: str = "", ics_dir: str | Path = "",
                     service_account_file: str | None = None, oauth_token_file: str | None = None,
                     calendar_id: str = "primary", api_endpoint: str | None = None,
                     graph: Mapping[str, Any] | None = None) -> CalendarBackend:
    """The calendar backend: ``"local"`` (events in the state database at ``state_url``, an ``.ics``
    each in ``ics_dir``), ``"google"`` (a service account with domain-wide delegation, or an OAuth
    user token; ``api_endpoint`` overrides the API's base URL, e.g. for a stand-in) or ``"microsoft"``
    (Microsoft 365 through Graph; ``graph`` holds :class:`~.microsoft.GraphCalendar`'s keyword arguments:
    ``tenant_id``, ``client_id``, ``client_secret``, ``api_endpoint``, ``authority_host``, ``ca_bundle``).

    Raises:
        ToolUnavailableError: Google or Microsoft without its extra (``chatops-bot[google]``,
            ``chatops-bot[microsoft]``) or credentials, or unreadable key files.
        ValueError: an unknown backend name.
    """
    if backend == "google":
        try:
            from .google import FREEBUSY_SCOPES, GoogleCalendar, credentials_factory
        except ImportError as exc:  # the CLI says so at startup (app.extras); a library caller learns it here
            raise ToolUnavailableError("CALENDAR_BACKEND=google needs the google extra, which is not installed: "
                                       "pip install 'chatops-bot[google]'") from exc

        creds = credentials_factory(service_account_file, oauth_token_file)
        freebusy = credentials_factory(service_account_file, oauth_token_file, scopes=FREEBUSY_SCOPES)
        return GoogleCalendar(creds, calendar_id=calendar_id, api_endpoint=api_endpoint,
                              freebusy_credentials_for=freebusy)
    if backend == "microsoft":
        try:
            from .microsoft import GraphCalendar
        except ImportError as exc:
            raise ToolUnavailableError("CALENDAR_BACKEND=microsoft needs the microsoft extra, which is not installed: "
                                       "pip install 'chatops-bot[microsoft]'") from exc
        options = {k: v for k, v in dict(graph or {}).items() if v is not None}
        return GraphCalendar(str(options.pop("tenant_id", "")), str(options.pop("client_id", "")),
                             str(options.pop("client_secret", "")), **options)
    if backend != "local":
        raise ValueError(f"unknown calendar backend {backend!r}; use 'local', 'google' or 'microsoft'")
    from .local import LocalCalendar

    return LocalCalendar(state_url, ics_dir)


class BackendOptions(TypedDict, total=False):
    """:func:`calendar_backend`'s keyword arguments, which :func:`calendar_tool` passes on."""

    state_url: str
    ics_dir: str | Path
    service_account_file: str | None
    oauth_token_file: str | None
    calendar_id: str
    api_endpoint: str | None
    graph: Mapping[str, Any] | None


def calendar_tool(backend: str = "local", *, default_duration_minutes: int = DEFAULT_DURATION_MINUTES,
                  **options: Unpack[BackendOptions]) -> CalendarCreate:
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
