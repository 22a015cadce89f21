"""Google Calendar through ``google-api-python-client``.

- The client is built from the discovery document shipped with the library
  (``build("calendar", "v3", static_discovery=True)``): nothing is downloaded at run time.
  ``api_endpoint`` (``GOOGLE_CALENDAR_API_ENDPOINT``) replaces the whole base URL, e.g.
  ``http://127.0.0.1:8080/calendar/v3/`` for a stand-in.
- Credentials: a service account with domain-wide delegation acting as the requester's e-mail
  (``GOOGLE_SERVICE_ACCOUNT_FILE``; the Workspace admin grants the scope
  ``https://www.googleapis.com/auth/calendar.events`` to the service account's client id), or an
  OAuth user token (``GOOGLE_OAUTH_TOKEN_FILE``, an ``authorized_user`` JSON) that books in that
  user's calendar.
- ``events.insert`` with ``sendUpdates=all`` (attendees get invitations) and, for a video call,
  ``conferenceData.createRequest`` (Google Meet) with ``conferenceDataVersion=1``.
- **Exactly once**: the event ``id`` is the action's idempotency key (base32hex, ``[a-v0-9]``, 32
  characters) and is also stored in the event's private extended properties. A retried insert of
  an event that already exists answers 409 ``duplicate``; the backend then reads that event and
  returns it (``created=False``) instead of booking twice. So retrying is always safe, and the
  backend retries 429, 5xx, rate-limit 403s and connection failures with exponential backoff
  (honouring ``Retry-After``); it never retries 400/401/403/404.
- Errors become :class:`GoogleCalendarError` with a message a user can act on
  (:func:`map_http_error`).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import httplib2
from google.auth import exceptions as auth_exceptions
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError

from tools.errors import ToolError, ToolUnavailableError

from .args import EVENT_ID, CalendarCreateArgs, CreatedEvent
from .freebusy import BusyInterval, Schedule

__all__ = ["GoogleCalendar", "GoogleCalendarError", "map_http_error", "map_auth_error", "event_body", "build_service",
           "credentials_factory", "SCOPES", "FREEBUSY_SCOPES", "EVENT_ID"]

log = logging.getLogger(__name__)

SCOPES = ["https://www.googleapis.com/auth/calendar.events"]
#: What ``freebusy.query`` accepts (``calendar.events`` does not cover it): a separate token, so a deployment
#: whose delegation lacks it still books, and the preview says the calendars were not checked.
FREEBUSY_SCOPES = ["https://www.googleapis.com/auth/calendar.freebusy"]
_RATE_REASONS = {"rateLimitExceeded", "userRateLimitExceeded", "quotaExceeded", "dailyLimitExceeded"}


class GoogleCalendarError(ToolError):
    """A Google Calendar call failed.

    Attributes:
        status: the HTTP status (0 for a connection failure).
        reason: Google's error reason (``duplicate``, ``forbidden``, ``rateLimitExceeded``...) or "".
        retryable: True when trying again later is safe and may succeed.
    """

    def __init__(self, message: str, status: int = 0, reason: str = "", retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.retryable = retryable


def _details(exc: HttpError) -> tuple[str, str]:
    """Google's error ``message`` and first ``reason`` from the JSON error body."""
    try:
        err = json.loads(exc.content.decode("utf-8") if isinstance(exc.content, bytes) else exc.content)["error"]
        reasons = [e.get("reason", "") for e in err.get("errors") or []]
        if not reasons and err.get("details"):
            reasons = [d.get("reason", "") for d in err["details"] if isinstance(d, dict)]
        return str(err.get("message") or ""), next((r for r in reasons if r), "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return str(getattr(exc, "reason", "") or ""), ""


def map_http_error(exc: HttpError, calendar_id: str = "primary") -> GoogleCalendarError:
    """Turn an ``HttpError`` into a :class:`GoogleCalendarError` with an actionable message.

    401 expired or revoked credentials; 403 not allowed (delegation, sharing) or rate-limited
    (retryable); 404 unknown calendar; 409 duplicate id; 429 rate-limited (retryable); 5xx Google
    unavailable (retryable); others: Google's own message.
    """
    status = int(getattr(exc.resp, "status", 0) or 0)
    message, reason = _details(exc)
    said = f" Google said: {message}" if message else ""
    if status == 400:
        return GoogleCalendarError(f"Google Calendar rejected the event (400).{said}", status, reason)
    if status == 401:
        return GoogleCalendarError("Google Calendar did not accept the bot's credentials (401): the token expired or "
                                   "was revoked. Renew GOOGLE_OAUTH_TOKEN_FILE or check the service account key."
                                   + said, status, reason)
    if status == 403 and reason in _RATE_REASONS:
        return GoogleCalendarError(f"Google Calendar is rate-limiting the bot (403 {reason}); try again in a minute."
                                   + said, status, reason, retryable=True)
    if status == 403:
        return GoogleCalendarError("The bot is not allowed to add events to this calendar (403): check that the "
                                   "service account has domain-wide delegation for the calendar.events scope, or "
                                   f"that the calendar {calendar_id!r} is shared with write access." + said,
                                   status, reason)
    if status == 404:
        return GoogleCalendarError(f"Google Calendar has no calendar {calendar_id!r} for this user (404); check "
                                   "GOOGLE_CALENDAR_ID and the requester's account." + said, status, reason)
    if status == 409:
        return GoogleCalendarError("An event with this id already exists (409)." + said, status, reason or "duplicate")
    if status == 410:
        return GoogleCalendarError("The event was deleted in Google Calendar (410)." + said, status, reason)
    if status == 429:
        return GoogleCalendarError("Google Calendar is rate-limiting the bot (429); try again in a minute." + said,
                                   status, reason, retryable=True)
    if status >= 500:
        return GoogleCalendarError(f"Google Calendar is unavailable right now ({status}); try again shortly." + said,
                                   status, reason, retryable=True)
    return GoogleCalendarError(f"Google Calendar answered {status}.{said}", status, reason)


def map_auth_error(exc: Exception, acting_as: str | None = None) -> GoogleCalendarError:
    """Turn a google-auth ``RefreshError`` (no valid access token could be had) into a clear error.

    ``unauthorized_client`` / ``access_denied`` for a service account mean domain-wide delegation is
    missing for the scope or the user; ``invalid_grant`` a revoked or expired token or key.
    """
    text = str(exc)
    who = f" as {acting_as}" if acting_as else ""
    if "unauthorized_client" in text or "access_denied" in text:
        msg = (f"The bot may not act{who} in Google Calendar: grant the service account domain-wide delegation "
               "for https://www.googleapis.com/auth/calendar.events in the Workspace admin console.")
    else:
        msg = ("Google Calendar did not accept the bot's credentials (401): the token expired or was revoked. "
               "Renew GOOGLE_OAUTH_TOKEN_FILE or check the service account key.")
    return GoogleCalendarError(f"{msg} ({text[:200]})", 401, "authError",
                               retryable=bool(getattr(exc, "retryable", False)))


def event_body(args: CalendarCreateArgs, event_id: str) -> dict[str, Any]:
    """The ``events.insert`` body: id, summary, times with the zone, attendees, extended properties,
    ``recurrence: ["RRULE:..."]`` for a series (the start is its first occurrence), and a Google Meet
    create request when a video call was asked for."""
    assert args.end is not None
    body: dict[str, Any] = {
        "id": event_id,
        "summary": args.title,
        "start": {"dateTime": args.local_start().isoformat(), "timeZone": args.timezone},
        "end": {"dateTime": args.local_end().isoformat(), "timeZone": args.timezone},
        "attendees": [{"email": e} for e in args.attendees],
        "extendedProperties": {"private": {"chatopsKey": event_id}},
        "reminders": {"useDefault": True},
    }
    if args.description:
        body["description"] = args.description
    if args.location:
        body["location"] = args.location
    if args.recurrence:
        body["recurrence"] = [f"RRULE:{args.recurrence}"]
    if args.video_conference:
        body["conferenceData"] = {"createRequest": {"requestId": event_id,
                                                    "conferenceSolutionKey": {"type": "hangoutsMeet"}}}
    return body


def build_service(credentials: Any = None, api_endpoint: str | None = None, http: Any = None) -> Any:
    """A Calendar v3 client from the bundled discovery document (no network until a call).

    Args:
        credentials: google-auth credentials (or None with ``http``).
        api_endpoint: replaces the base URL (``http://127.0.0.1:PORT/calendar/v3/``); Google's when None.
        http: an ``httplib2.Http``-like object instead of credentials (tests, proxies).
    """
    options = {"api_endpoint": api_endpoint} if api_endpoint else None
    return build("calendar", "v3", credentials=credentials, http=http, static_discovery=True,
                 cache_discovery=False, client_options=options)


def credentials_factory(service_account_file: str | None = None, oauth_token_file: str | None = None,
                        scopes: list[str] | None = None, token_uri: str | None = None) -> Callable[[str | None], Any]:
    """A function ``requester_email -> credentials``.

    With a service account file: domain-wide delegation, the credentials act as the requester
    (``subject``); a requester without a known e-mail raises :class:`GoogleCalendarError`. With an
    OAuth token file: the same user's credentials for everyone (they refresh themselves).
    ``token_uri`` replaces the OAuth token endpoint (google-auth always uses Google's for user
    tokens; a stand-in or proxy needs its own).

    Raises:
        ToolUnavailableError: when neither file is given or a file cannot be read.
    """
    scopes = scopes or SCOPES
    if service_account_file:
        from google.oauth2 import service_account

        try:
            base = service_account.Credentials.from_service_account_file(service_account_file, scopes=scopes)
        except (OSError, ValueError, KeyError) as exc:
            raise ToolUnavailableError(f"cannot read GOOGLE_SERVICE_ACCOUNT_FILE {service_account_file}: {exc}") from exc
        if token_uri:
            base = base.with_token_uri(token_uri)

        def delegated(email: str | None) -> Any:
            if not email:
                raise GoogleCalendarError("Booking on Google Calendar acts as the requester, but their e-mail address "
                                          "is unknown (the Slack app needs the users:read.email scope).")
            return base.with_subject(email)

        return delegated
    if oauth_token_file:
        from google.oauth2.credentials import Credentials

        try:
            creds = Credentials.from_authorized_user_file(oauth_token_file, scopes)
        except (OSError, ValueError, KeyError) as exc:
            raise ToolUnavailableError(f"cannot read GOOGLE_OAUTH_TOKEN_FILE {oauth_token_file}: {exc}") from exc
        if token_uri:
            creds = creds.with_token_uri(token_uri)
        return lambda _email: creds
    raise ToolUnavailableError("CALENDAR_BACKEND=google needs GOOGLE_SERVICE_ACCOUNT_FILE (domain-wide delegation) "
                               "or GOOGLE_OAUTH_TOKEN_FILE")


class GoogleCalendar:
    """Creates events on Google Calendar, exactly once per idempotency key.

    Args:
        credentials_for: requester e-mail -> google-auth credentials (:func:`credentials_factory`).
        calendar_id: the calendar to write to (``primary`` = the acting user's own).
        api_endpoint: base URL override (see :func:`build_service`).
        max_attempts: tries per insert (1 = no retry).
        backoff_s: first retry delay in seconds, doubled each time (a ``Retry-After`` header wins, capped at 30 s).
        sleep: the sleep function (tests pass one that does not wait).
        service_factory: ``(credentials, api_endpoint) -> client``; :func:`build_service` by default.
        freebusy_credentials_for: requester e-mail -> credentials with :data:`FREEBUSY_SCOPES` (free/busy);
            ``credentials_for`` when None.
    """

    name = "google"

    def __init__(self, credentials_for: Callable[[str | None], Any], calendar_id: str = "primary",
                 api_endpoint: str | None = None, max_attempts: int = 4, backoff_s: float = 0.5,
                 sleep: Callable[[float], None] = time.sleep,
                 service_factory: Callable[[Any, str | None], Any] | None = None,
                 freebusy_credentials_for: Callable[[str | None], Any] | None = None) -> None:
        self.credentials_for = credentials_for
        self.freebusy_credentials_for = freebusy_credentials_for or credentials_for
        self.calendar_id = calendar_id
        self.api_endpoint = api_endpoint
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        self.sleep = sleep
        self.service_factory = service_factory or (lambda creds, endpoint: build_service(creds, endpoint))
        self._services: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _service(self, email: str | None, *, freebusy: bool = False) -> Any:
        key = ("freebusy:" if freebusy else "") + (email or "")
        creds_for = self.freebusy_credentials_for if freebusy else self.credentials_for
        with self._lock:
            if key not in self._services:
                self._services[key] = self.service_factory(creds_for(email), self.api_endpoint)
            return self._services[key]

    def create(self, args: CalendarCreateArgs, *, event_id: str, requester: str = "",
               organizer_email: str | None = None) -> CreatedEvent:
        """Insert the event (see the module docstring for retries and the 409 path).

        Args:
            args: validated arguments.
            event_id: the idempotency key, used as the Google event id.
            requester: the requester's platform id (logged only).
            organizer_email: the requester's e-mail (the delegated subject with a service account).

        Raises:
            GoogleCalendarError: mapped HTTP errors, connection failures after the last attempt, or an
                id that belongs to an event deleted earlier.
        """
        if not EVENT_ID.match(event_id):
            raise GoogleCalendarError(f"event id {event_id!r} is not base32hex ([a-v0-9], 5-1024 characters)")
        service = self._service(organizer_email)
        body = event_body(args, event_id)
        params: dict[str, Any] = {"calendarId": self.calendar_id, "body": body, "sendUpdates": "all"}
        if args.video_conference:
            params["conferenceDataVersion"] = 1
        last: GoogleCalendarError | None = None
        for attempt in range(self.max_attempts):
            wait = self.backoff_s * (2 ** attempt)
            try:
                event = service.events().insert(**params).execute(num_retries=0)
                log.info("google calendar: created %s for %s", event_id, requester)
                return self._created(event, True)
            except HttpError as exc:
                err = map_http_error(exc, self.calendar_id)
                if err.status == 409:
                    return self._existing(service, event_id)
                if not err.retryable:
                    raise err from exc
                last = err
                retry_after = _retry_after(exc)
                if retry_after is not None:
                    wait = min(retry_after, 30.0)
            except auth_exceptions.RefreshError as exc:
                err = map_auth_error(exc, organizer_email)
                if not err.retryable:
                    raise err from exc
                last = err
            except (OSError, socket.timeout, httplib2.HttpLib2Error, auth_exceptions.TransportError) as exc:
                last = GoogleCalendarError(f"Cannot reach Google Calendar ({exc.__class__.__name__}: {exc}); "
                                           "try again shortly.", 0, "", retryable=True)
            if attempt + 1 < self.max_attempts:
                log.warning("google calendar: attempt %d for %s failed (%s); retrying in %.1f s", attempt + 1,
                            event_id, last, wait)
                self.sleep(wait)
        assert last is not None
        raise last

    def busy(self, emails: list[str], start: datetime, end: datetime, *,
             organizer_email: str | None = None) -> list[Schedule]:
        """Free/busy of ``emails`` between ``start`` and ``end`` (aware) through ``freebusy.query`` (acting as
        the organiser); Google gives no working hours, and an address it cannot read comes back with ``error``.

        Raises:
            GoogleCalendarError: a mapped HTTP or credentials error.
        """
        service = self._service(organizer_email, freebusy=True)
        body = {"timeMin": start.astimezone(timezone.utc).isoformat(), "timeMax": end.astimezone(timezone.utc)
                .isoformat(), "items": [{"id": e} for e in emails]}
        try:
            answer = service.freebusy().query(body=body).execute(num_retries=2)
        except HttpError as exc:
            raise map_http_error(exc, self.calendar_id) from exc
        except auth_exceptions.RefreshError as exc:
            raise map_auth_error(exc, organizer_email) from exc
        calendars = {k.lower(): v for k, v in (answer.get("calendars") or {}).items()}
        out: list[Schedule] = []
        for email in emails:
            cal = calendars.get(email.lower()) or {}
            if cal.get("errors"):
                out.append(Schedule(email, error=str(cal["errors"][0].get("reason") or "unreadable")))
                continue
            out.append(Schedule(email, tuple(
                BusyInterval(datetime.fromisoformat(b["start"].replace("Z", "+00:00")),
                             datetime.fromisoformat(b["end"].replace("Z", "+00:00")))
                for b in cal.get("busy") or [])))
        return out

    def _existing(self, service: Any, event_id: str) -> CreatedEvent:
        """The event a duplicate id points at: ours from an earlier attempt, unless it was deleted."""
        try:
            event = service.events().get(calendarId=self.calendar_id, eventId=event_id).execute(num_retries=2)
        except HttpError as exc:
            raise map_http_error(exc, self.calendar_id) from exc
        except auth_exceptions.RefreshError as exc:
            raise map_auth_error(exc) from exc
        if event.get("status") == "cancelled":
            raise GoogleCalendarError("This event was created earlier and then deleted in Google Calendar; ask me "
                                      "again to book a new one.", 409, "duplicate")
        ours = (event.get("extendedProperties") or {}).get("private", {}).get("chatopsKey")
        if ours not in (None, event_id):
            raise GoogleCalendarError("Another event already uses this id in Google Calendar.", 409, "duplicate")
        return self._created(event, False)

    def _created(self, event: dict[str, Any], created: bool) -> CreatedEvent:
        conf = event.get("hangoutLink") or next(
            (e.get("uri", "") for e in (event.get("conferenceData") or {}).get("entryPoints", [])
             if e.get("entryPointType") == "video"), "")
        return CreatedEvent(event_id=event.get("id", ""), link=event.get("htmlLink", ""), backend="google",
                            created=created, conference_link=conf, calendar=self.calendar_id, raw=event)


def _retry_after(exc: HttpError) -> float | None:
    value = exc.resp.get("retry-after") if hasattr(exc.resp, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
