"""Microsoft 365 calendars through Microsoft Graph (``CALENDAR_BACKEND=microsoft``).

- **Authentication**: the bot is an application (client credentials, no user signs in): ``msal``'s
  :class:`~msal.ConfidentialClientApplication` asks ``{authority}/{tenant}/oauth2/v2.0/token`` for the
  scope ``{graph}/.default`` and keeps the token in its in-memory cache until it expires, so one token
  serves every booking of the next hour. The app needs the application permission ``Calendars.ReadWrite``
  (admin consent) and, limited by an Exchange application access policy, reaches only the organisers'
  mailboxes (docs/how-to/microsoft-calendar.md).
- **Booking**: ``POST /users/{organiser}/events`` in the organiser's own calendar; Exchange sends the
  attendees their invitations. ``Prefer: outlook.timezone="<zone>"`` makes Graph answer in the
  organiser's zone; a video call is ``isOnlineMeeting: true`` with ``onlineMeetingProvider:
  teamsForBusiness`` (the answer's ``onlineMeeting.joinUrl`` is the Teams link).
- **Exactly once**: the action's idempotency key is the event's ``transactionId``, which Graph keeps to
  avoid redundant POSTs on client retries: a repeated create answers the event the first one made. So
  a lost response, a 429 or a 5xx is retried safely (``tenacity``; ``Retry-After`` honoured, capped).
- **Free/busy**: ``POST /users/{organiser}/calendar/getSchedule`` (see :meth:`GraphCalendar.busy`).
- Errors become :class:`GraphCalendarError` with a message the requester can act on
  (:func:`map_graph_error`); a mailbox the access policy refuses (``403 ErrorAccessDenied``) says so.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import httpx
import msal
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from connectors.http import RetryPolicy, parse_retry_after
from tools.errors import ToolError, ToolUnavailableError

from .args import CalendarCreateArgs, CreatedEvent
from .freebusy import BusyInterval, Schedule
from .recurrence import WEEKDAY_CODES, rrule_parts

__all__ = ["GraphCalendar", "GraphCalendarError", "map_graph_error", "graph_event_body", "graph_recurrence",
           "GRAPH_ENDPOINT", "AUTHORITY_HOST"]

log = logging.getLogger(__name__)

#: Microsoft Graph v1.0 (worldwide); national clouds have their own (``https://graph.microsoft.us/v1.0``).
GRAPH_ENDPOINT = "https://graph.microsoft.com/v1.0"
#: The Microsoft identity platform's sign-in host (``https://login.microsoftonline.us`` for US Government).
AUTHORITY_HOST = "https://login.microsoftonline.com"
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_DAYS = dict(zip(WEEKDAY_CODES, ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")))
_INDEX = {1: "first", 2: "second", 3: "third", 4: "fourth", -1: "last"}


class GraphCalendarError(ToolError):
    """A Microsoft Graph call failed.

    Attributes:
        status: the HTTP status (0: no answer).
        code: Graph's error code (``ErrorAccessDenied``, ``ErrorInvalidUser``...) or the sign-in error.
        retryable: trying again later is safe and may succeed.
    """

    def __init__(self, message: str, status: int = 0, code: str = "", retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retryable = retryable


class _Retry(Exception):
    def __init__(self, error: GraphCalendarError, retry_after: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def _error_of(resp: httpx.Response) -> tuple[str, str]:
    """Graph's ``error.code`` and ``error.message`` from an error body (``("", "")`` when none)."""
    try:
        err = resp.json().get("error") or {}
        return str(err.get("code") or ""), str(err.get("message") or "")
    except (ValueError, AttributeError):
        return "", ""


def map_graph_error(status: int, code: str, message: str, mailbox: str = "") -> GraphCalendarError:
    """A Graph error answer as a :class:`GraphCalendarError` whose message says what to do.

    400 a refused event; 401 a token Graph does not accept; 403 ``ErrorAccessDenied`` a mailbox outside
    the application access policy (or a permission without admin consent); 404 no such mailbox; 429 and
    5xx retryable; others Graph's own message.
    """
    said = f" Microsoft said: {message}" if message else ""
    who = mailbox or "this user"
    if status == 400:
        return GraphCalendarError(f"Microsoft 365 rejected the event (400 {code}).{said}", status, code)
    if status == 401:
        return GraphCalendarError("Microsoft Graph did not accept the bot's token (401): check GRAPH_TENANT_ID, "
                                  "GRAPH_CLIENT_ID and GRAPH_CLIENT_SECRET." + said, status, code)
    if status == 403:
        return GraphCalendarError(
            f"The bot may not book in {who}'s Microsoft 365 calendar: the tenant's application access policy "
            "does not include this mailbox, or Calendars.ReadWrite has no admin consent (403 "
            f"{code or 'Forbidden'}). Ask your Microsoft 365 admin to add you to the bot's calendar group. "
            "Nothing was booked.", status, code)
    if status == 404:
        return GraphCalendarError(f"Microsoft 365 has no calendar for {who} (404 {code}): the e-mail address must "
                                  "be a user's mailbox in the bot's tenant. Nothing was booked.", status, code)
    if status == 429:
        return GraphCalendarError("Microsoft 365 is throttling the bot (429); try again in a minute. Nothing was "
                                  "booked.", status, code, retryable=True)
    if status >= 500:
        return GraphCalendarError(f"Microsoft 365 is unavailable right now ({status}); try again shortly. Nothing "
                                  "was booked.", status, code, retryable=True)
    return GraphCalendarError(f"Microsoft Graph answered {status} {code}.{said}", status, code)


def graph_recurrence(rule: str, start: datetime, tz: str) -> dict[str, Any]:
    """An RFC 5545 ``RRULE`` value (checked by :func:`~.recurrence.check_rrule`) as Graph's
    ``patternedRecurrence``: ``daily``, ``weekly`` (``daysOfWeek``), ``absoluteMonthly`` (``dayOfMonth``) or
    ``relativeMonthly`` (``index`` + ``daysOfWeek``); the range ``numbered`` (COUNT), ``endDate`` (UNTIL, in
    the event's zone) or ``noEnd``. ``start`` is the first occurrence in the event's zone.

    Raises:
        GraphCalendarError: a rule Graph's pattern cannot express (a negative month day, ``-2FR``).
    """
    parts = rrule_parts(rule)
    freq = str(parts["FREQ"][0]).upper()
    interval = int((parts.get("INTERVAL") or [1])[0])
    byday = [str(d).upper() for d in parts.get("BYDAY") or []]
    pattern: dict[str, Any] = {"interval": interval}
    if freq == "DAILY":
        pattern["type"] = "daily"
    elif freq == "WEEKLY":
        days = byday or [WEEKDAY_CODES[start.weekday()]]
        pattern.update(type="weekly", daysOfWeek=[_DAYS[d[-2:]] for d in days], firstDayOfWeek="monday")
    elif parts.get("BYMONTHDAY") or not byday:
        day = int((parts.get("BYMONTHDAY") or [start.day])[0])
        if day < 1:
            raise GraphCalendarError("Microsoft 365 cannot repeat on a day counted from the month's end; "
                                     "name the day instead (e.g. the last Friday).")
        pattern.update(type="absoluteMonthly", dayOfMonth=day)
    else:
        n, code = (int(byday[0][:-2] or 1), byday[0][-2:])
        if n not in _INDEX:
            raise GraphCalendarError("Microsoft 365 can repeat monthly on the first to fourth or the last weekday "
                                     "of a month only.")
        pattern.update(type="relativeMonthly", index=_INDEX[n], daysOfWeek=[_DAYS[code]])
    rng: dict[str, Any] = {"startDate": start.date().isoformat(), "recurrenceTimeZone": tz}
    if parts.get("COUNT"):
        rng.update(type="numbered", numberOfOccurrences=int(parts["COUNT"][0]))
    elif parts.get("UNTIL"):
        until = parts["UNTIL"][0]
        end_day = until.astimezone(ZoneInfo(tz)).date() if isinstance(until, datetime) else until
        rng.update(type="endDate", endDate=end_day.isoformat())
    else:
        rng["type"] = "noEnd"
    return {"pattern": pattern, "range": rng}


def graph_event_body(args: CalendarCreateArgs, transaction_id: str) -> dict[str, Any]:
    """The ``POST /users/{id}/events`` body: subject, text body, start and end as wall-clock times in the
    event's zone, required attendees, location, a Teams meeting when a video call was asked for, the
    series' ``recurrence`` and ``transactionId`` (the action's idempotency key)."""
    fmt = "%Y-%m-%dT%H:%M:%S"
    body: dict[str, Any] = {
        "subject": args.title,
        "body": {"contentType": "text", "content": args.description},
        "start": {"dateTime": args.local_start().strftime(fmt), "timeZone": args.timezone},
        "end": {"dateTime": args.local_end().strftime(fmt), "timeZone": args.timezone},
        "attendees": [{"emailAddress": {"address": e}, "type": "required"} for e in args.attendees],
        "transactionId": transaction_id,
        "isOnlineMeeting": bool(args.video_conference),
    }
    if args.video_conference:
        body["onlineMeetingProvider"] = "teamsForBusiness"
    if args.location:
        body["location"] = {"displayName": args.location}
    if args.recurrence:
        body["recurrence"] = graph_recurrence(args.recurrence, args.local_start(), args.timezone)
    return body


def _parse_graph_time(value: Mapping[str, Any], default_tz: str) -> datetime:
    """A Graph ``dateTimeTimeZone`` (``"2026-12-01T09:00:00.0000000"`` + a zone name) as an aware datetime."""
    text = str(value.get("dateTime") or "")[:19]
    zone = _iana(str(value.get("timeZone") or "")) or default_tz
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone))


def _iana(name: str) -> str:
    """An IANA zone for a Graph zone name (IANA already, ``UTC``, or a Windows name such as
    ``Pacific Standard Time`` through ``tzlocal``'s CLDR table); "" when unknown."""
    if not name:
        return ""
    try:
        ZoneInfo(name)
        return name
    except (ValueError, KeyError, OSError):
        pass
    from tzlocal.windows_tz import win_tz

    return win_tz.get(name, "")


def _sign_in_session(ca_bundle: str | None) -> Any:
    """The ``requests`` session msal signs in with: the system's trust, or only ``ca_bundle``'s. requests lets
    ``REQUESTS_CA_BUNDLE`` override a session's own ``verify``, so with a bundle the environment is not read
    (its proxies are copied in explicitly)."""
    import urllib.request

    import requests

    session = requests.Session()
    if ca_bundle:
        session.trust_env = False
        session.verify = ca_bundle
        session.proxies.update(urllib.request.getproxies())
    return session


def _hm(value: str) -> tuple[int, int] | None:
    try:
        h, m = value.split(":")[:2]
        return int(h), int(m)
    except ValueError:
        return None


class GraphCalendar:
    """Books events in Microsoft 365 calendars through Graph, exactly once per idempotency key.

    Args:
        tenant_id: the Microsoft Entra tenant (GUID or ``contoso.onmicrosoft.com``).
        client_id: the app registration's application (client) id.
        client_secret: one of its client secrets.
        api_endpoint: Graph's base URL with the version (:data:`GRAPH_ENDPOINT`).
        authority_host: the sign-in host (:data:`AUTHORITY_HOST`).
        ca_bundle: a PEM file of CA certificates to trust instead of the system's (a TLS-inspecting proxy).
        timeout: seconds per request.
        policy: retries of 429/5xx and transport errors (``Retry-After`` capped at ``retry_after_max``).
        client: an ``httpx.Client`` to use (the caller closes it).

    Raises:
        ToolUnavailableError: a missing tenant, client id or secret.
    """

    name = "microsoft"

    def __init__(self, tenant_id: str, client_id: str, client_secret: str, *, api_endpoint: str = GRAPH_ENDPOINT,
                 authority_host: str = AUTHORITY_HOST, ca_bundle: str | None = None, timeout: float = 20.0,
                 policy: RetryPolicy | None = None, client: httpx.Client | None = None) -> None:
        missing = [n for n, v in (("GRAPH_TENANT_ID", tenant_id), ("GRAPH_CLIENT_ID", client_id),
                                  ("GRAPH_CLIENT_SECRET", client_secret)) if not v]
        if missing:
            raise ToolUnavailableError(f"CALENDAR_BACKEND=microsoft needs {', '.join(missing)} (an app registration "
                                       "with Calendars.ReadWrite; see the how-to 'Microsoft 365 calendar')")
        self.api_endpoint = api_endpoint.rstrip("/")
        url = httpx.URL(self.api_endpoint)
        self.scope = f"{url.scheme}://{url.netloc.decode()}/.default"
        self.authority = f"{authority_host.rstrip('/')}/{tenant_id}"
        self._client_id, self._secret, self._ca = client_id, client_secret, ca_bundle
        self.policy = policy or RetryPolicy(attempts=4, backoff_initial=1.0, backoff_max=8.0, retry_after_max=30.0)
        verify: Any = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else True
        self._own = client is None
        self.client = client or httpx.Client(timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)),
                                             verify=verify)
        self._timeout = timeout
        self._app: msal.ConfidentialClientApplication | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the HTTP client (unless it was passed in)."""
        if self._own:
            self.client.close()

    # -- the token ---------------------------------------------------------------------------------
    def _token(self) -> str:
        """An app-only access token for Graph, from msal's cache while it is valid.

        Raises:
            GraphCalendarError: the tenant, client id or secret was refused, or sign-in cannot be reached.
        """
        with self._lock:
            if self._app is None:
                try:
                    self._app = msal.ConfidentialClientApplication(
                        self._client_id, client_credential=self._secret, authority=self.authority,
                        http_client=_sign_in_session(self._ca), timeout=self._timeout, instance_discovery=False)
                except ValueError as exc:  # msal's word for an unknown tenant / authority
                    raise GraphCalendarError(f"Microsoft sign-in does not know the tenant in {self.authority}: "
                                             f"check GRAPH_TENANT_ID ({str(exc)[:160]})", 401, "invalid_tenant") \
                        from exc
                except OSError as exc:
                    raise GraphCalendarError(f"Cannot reach Microsoft sign-in ({type(exc).__name__}); try again "
                                             "shortly. Nothing was booked.", 0, "", retryable=True) from exc
            app = self._app
        try:
            result = app.acquire_token_for_client(scopes=[self.scope])
        except OSError as exc:
            raise GraphCalendarError(f"Cannot reach Microsoft sign-in ({type(exc).__name__}); try again shortly. "
                                     "Nothing was booked.", 0, "", retryable=True) from exc
        token = result.get("access_token") if isinstance(result, dict) else None
        if not token:
            err = str((result or {}).get("error") or "unknown_error")
            desc = str((result or {}).get("error_description") or "").splitlines()[0][:200]
            raise GraphCalendarError(f"Microsoft sign-in refused the bot ({err}): check GRAPH_CLIENT_ID and "
                                     f"GRAPH_CLIENT_SECRET, and that the secret has not expired. {desc}", 401, err)
        return str(token)

    # -- HTTP ----------------------------------------------------------------------------------------
    def _send(self, method: str, path: str, mailbox: str, *, json: Any = None,
              headers: Mapping[str, str] | None = None) -> httpx.Response:
        h = {"Authorization": f"Bearer {self._token()}", "Accept": "application/json", **(headers or {})}
        try:
            resp = self.client.request(method, f"{self.api_endpoint}/{path.lstrip('/')}", json=json, headers=h)
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise _Retry(GraphCalendarError(f"Cannot reach Microsoft Graph ({type(exc).__name__}); try again "
                                            "shortly.", 0, "", retryable=True), None) from exc
        if resp.status_code < 400:
            return resp
        code, message = _error_of(resp)
        err = map_graph_error(resp.status_code, code, message, mailbox)
        if resp.status_code in _RETRY_STATUSES:
            raise _Retry(err, parse_retry_after(resp.headers.get("Retry-After")))
        raise err

    def _call(self, what: str, fn: Callable[[], httpx.Response]) -> httpx.Response:
        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            return self.policy.wait(state.attempt_number, getattr(exc, "retry_after", None))

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning("microsoft graph %s: %s; retry %d/%d in %.1f s", what, exc, state.attempt_number,
                        self.policy.attempts - 1, state.next_action.sleep if state.next_action else 0.0)

        try:
            for attempt in Retrying(stop=stop_after_attempt(self.policy.attempts), wait=wait,
                                    retry=retry_if_exception(lambda e: isinstance(e, _Retry)),
                                    before_sleep=before_sleep, sleep=self.policy.sleep, reraise=True):
                with attempt:
                    return fn()
        except _Retry as exc:
            raise exc.error from exc
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _mailbox(organizer_email: str | None) -> str:
        if not organizer_email:
            raise GraphCalendarError("Booking in Microsoft 365 uses the organiser's own calendar, but your e-mail "
                                     "address is unknown (Slack: the users:read.email scope; Teams: the roster). "
                                     "Nothing was booked.")
        return quote(organizer_email, safe="@")

    # -- the backend ---------------------------------------------------------------------------------
    def create(self, args: CalendarCreateArgs, *, event_id: str, requester: str = "",
               organizer_email: str | None = None) -> CreatedEvent:
        """Create the event in ``organizer_email``'s calendar, once per ``event_id`` (its ``transactionId``).

        Returns:
            the event (``link``: Outlook's ``webLink``; ``conference_link``: the Teams ``joinUrl``). Graph answers
            a repeated ``transactionId`` with the event the first attempt made, so the calendar holds one.

        Raises:
            GraphCalendarError: refused (mapped, see :func:`map_graph_error`) or unreachable after the retries.
        """
        mailbox = self._mailbox(organizer_email)
        body = graph_event_body(args, event_id)
        prefer = {"Prefer": f'outlook.timezone="{args.timezone}"', "Content-Type": "application/json"}
        resp = self._call(f"create {event_id}", lambda: self._send("POST", f"users/{mailbox}/events", mailbox,
                                                                    json=body, headers=prefer))
        event = resp.json()
        log.info("microsoft calendar: created %s", event_id)
        join = str((event.get("onlineMeeting") or {}).get("joinUrl") or "")
        return CreatedEvent(event_id=str(event.get("id") or ""), link=str(event.get("webLink") or ""),
                            backend="microsoft", conference_link=join,
                            calendar=mailbox, raw=event)

    def busy(self, emails: list[str], start: datetime, end: datetime, *,
             organizer_email: str | None = None) -> list[Schedule]:
        """Free/busy of ``emails`` between ``start`` and ``end`` (aware) through the organiser's
        ``calendar/getSchedule`` (times asked and answered in UTC); a person Graph cannot read comes back
        with ``error`` set. Working hours come with their zone (a Windows zone name mapped to IANA).

        Raises:
            GraphCalendarError: as :meth:`create`.
        """
        mailbox = self._mailbox(organizer_email)
        fmt = "%Y-%m-%dT%H:%M:%S"
        body = {"schedules": list(emails),
                "startTime": {"dateTime": start.astimezone(timezone.utc).strftime(fmt), "timeZone": "UTC"},
                "endTime": {"dateTime": end.astimezone(timezone.utc).strftime(fmt), "timeZone": "UTC"},
                "availabilityViewInterval": 15}
        resp = self._call("getSchedule", lambda: self._send(
            "POST", f"users/{mailbox}/calendar/getSchedule", mailbox, json=body,
            headers={"Prefer": 'outlook.timezone="UTC"', "Content-Type": "application/json"}))
        out: list[Schedule] = []
        for item in resp.json().get("value") or []:
            email = str(item.get("scheduleId") or "")
            if item.get("error"):
                out.append(Schedule(email, error=str(item["error"].get("responseCode") or "unreadable")))
                continue
            busy = tuple(sorted(
                (BusyInterval(_parse_graph_time(i["start"], "UTC"), _parse_graph_time(i["end"], "UTC"),
                              str(i.get("status") or "busy"))
                 for i in item.get("scheduleItems") or [] if str(i.get("status")) != "free"),
                key=lambda b: b.start))
            wh = item.get("workingHours") or {}
            days = tuple(i for i, d in enumerate(_DAYS.values()) if d in (wh.get("daysOfWeek") or []))
            out.append(Schedule(email, busy, _iana(str((wh.get("timeZone") or {}).get("name") or "")), days,
                                _hm(str(wh.get("startTime") or "")), _hm(str(wh.get("endTime") or ""))))
        return out
