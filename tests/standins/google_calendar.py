"""A stand-in for the Google Calendar API v3 (the parts ``calendar.create`` uses) on 127.0.0.1.

The real ``google-api-python-client`` talks to it over HTTP when built with
``client_options={"api_endpoint": standin.endpoint}`` (the endpoint replaces the whole base URL,
``http://127.0.0.1:PORT/calendar/v3/``). It behaves like Google where the bot depends on it:

- ``POST /calendar/v3/calendars/{calendarId}/events`` (``events.insert``): needs a Bearer token it
  issued or was given (401 ``authError`` otherwise); ``calendarId`` must be ``primary`` or a
  calendar it knows (404 ``notFound``); a client-chosen ``id`` must be base32hex, 5-1024 characters
  (400 ``invalid``); an id already used in that calendar answers 409 ``duplicate`` ("The requested
  identifier already exists."); ``conferenceData.createRequest`` creates a Meet link only with
  ``conferenceDataVersion=1`` (Google ignores it otherwise); the answer is an event resource with
  ``htmlLink``, ``organizer``, ``attendees`` (``needsAction``), ``hangoutLink``...; a series'
  ``recurrence`` must be a list of strings each starting with ``RRULE:``, ``EXRULE:``, ``RDATE:`` or
  ``EXDATE:`` (400 ``invalid`` "Invalid recurrence rule." otherwise), and a recurring event needs a
  ``timeZone`` on its start and end (400 ``invalid`` "Missing time zone definition for start time.").
- ``GET /calendar/v3/calendars/{calendarId}/events/{eventId}`` (``events.get``).
- ``POST /calendar/v3/freeBusy`` (``freebusy.query``): ``calendars: {address: {busy: [{start, end}]}}`` from
  :meth:`GoogleCalendarStandin.add_busy` and the events it holds; an unknown address gets ``errors``. A
  service-account token must carry a scope the method accepts (403 ``insufficientPermissions`` otherwise):
  ``calendar.freebusy`` (or ``calendar``/``calendar.readonly``) for freeBusy, ``calendar.events`` (or
  ``calendar``) for events.insert.
- ``POST /token``: the OAuth 2.0 JWT-bearer grant a service account uses; the assertion's
  signature is checked against the registered public key, and its ``sub`` (domain-wide
  delegation) becomes the acting user, whose ``primary`` calendar the token writes to; and the
  ``refresh_token`` grant an OAuth user token (``authorized_user`` file) uses.

Every request is recorded (:class:`Recorded`: method, path, query, headers, JSON or form body).
:meth:`GoogleCalendarStandin.fail_next` scripts errors in Google's JSON error format
(``{"error": {"code", "message", "errors": [{"domain", "reason", "message"}], "status"}}``),
optionally after committing the insert (a lost response: the event exists, the client saw a 503).
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.standins.base import Handler, StandIn

__all__ = ["GoogleCalendarStandin", "Recorded", "ERROR_STATUS"]

_EVENT_ID = re.compile(r"^[a-v0-9]{5,1024}$")
_RECURRENCE_LINE = re.compile(r"^(?:RRULE|EXRULE|RDATE|EXDATE)[:;]\S")
_BASE = "https://www.googleapis.com/auth/"
#: The scopes ``freebusy.query`` accepts (``calendar.events`` is not one of them).
_FREEBUSY_SCOPES = {_BASE + s for s in ("calendar", "calendar.readonly", "calendar.freebusy",
                                        "calendar.events.freebusy")}
ERROR_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


@dataclass(frozen=True)
class Recorded:
    """One request the stand-in received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class _Failure:
    status: int
    reason: str
    message: str
    commit: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "POST"


def google_error(status: int, reason: str, message: str) -> dict[str, Any]:
    """Google's JSON error body."""
    return {"error": {"code": status, "message": message,
                      "errors": [{"domain": "global", "reason": reason, "message": message}],
                      "status": ERROR_STATUS.get(status, "UNKNOWN")}}


class _Handler(Handler):
    protocol_version = "HTTP/1.1"


class GoogleCalendarStandin(StandIn):
    """The stand-in server (see the module docstring). Use as a context manager or call :meth:`close`.

    Args:
        tokens: Bearer token -> the e-mail it acts as (an OAuth user token).
        calendars: extra calendar ids that exist besides each user's ``primary``.
        refresh_tokens: OAuth refresh token -> the e-mail its access tokens act as.
    """

    handler = _Handler

    def __init__(self, tokens: dict[str, str] | None = None, calendars: set[str] | None = None,
                 refresh_tokens: dict[str, str] | None = None) -> None:
        super().__init__()
        self.tokens: dict[str, str] = dict(tokens or {})
        self.refresh_tokens: dict[str, str] = dict(refresh_tokens or {})
        self.calendars = set(calendars or set())
        self.public_keys: dict[str, str] = {}  # service account client_email -> public key PEM
        self.events: dict[tuple[str, str], dict[str, Any]] = {}  # (calendar owner/id, event id) -> resource
        self.busy: dict[str, list[tuple[datetime, datetime]]] = {}  # e-mail -> busy stretches (freeBusy)
        self.known_users: set[str] | None = None  # freeBusy: addresses it can read (None: all)
        self.token_scopes: dict[str, set[str]] = {}  # service-account token -> its scopes (checked per method)
        self.requests: list[Recorded] = []
        self._failures: list[_Failure] = []
        self.start()

    # -- configuration -----------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        """The ``api_endpoint`` for the client: ``http://127.0.0.1:PORT/calendar/v3/``."""
        return f"http://127.0.0.1:{self.port}/calendar/v3/"

    @property
    def token_uri(self) -> str:
        """The OAuth token endpoint for service-account credentials."""
        return f"http://127.0.0.1:{self.port}/token"

    def register_service_account(self, client_email: str, public_key_pem: str) -> None:
        """Accept JWT assertions signed by this service account's key."""
        self.public_keys[client_email] = public_key_pem

    def fail_next(self, status: int, reason: str = "", message: str = "", *, times: int = 1, commit: bool = False,
                  headers: dict[str, str] | None = None, method: str = "POST") -> None:
        """Answer the next ``times`` API requests with ``method`` with this error (the token endpoint is never failed).

        Args:
            commit: store the insert first, then answer the error (the response was "lost").
            headers: extra response headers (``Retry-After``).
        """
        defaults = {400: "invalid", 401: "authError", 403: "forbidden", 404: "notFound", 409: "duplicate",
                    429: "rateLimitExceeded", 500: "backendError", 503: "backendError"}
        with self.lock:
            for _ in range(times):
                self._failures.append(_Failure(status, reason or defaults.get(status, "unknown"),
                                               message or f"stand-in error {status}", commit, dict(headers or {}),
                                               method))

    def api_requests(self, method: str | None = None) -> list[Recorded]:
        """Recorded Calendar API requests (not the token endpoint), optionally of one method."""
        return [r for r in self.requests if r.path.startswith("/calendar/v3/") and (method is None or r.method == method)]

    def close(self) -> None:
        """Stop serving."""
        self.stop()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP --------------------------------------------------------------------------------
    def serve(self, h: Handler, method: str) -> None:
        """Record the request and answer it (a stand-in bug answers 500 with the exception)."""
        url = urlsplit(h.path)
        raw = h.body()
        ctype = h.headers.get("Content-Type", "")
        body: Any = None
        if raw:
            if "json" in ctype:
                body = json.loads(raw)
            elif "x-www-form-urlencoded" in ctype:
                body = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
            else:
                body = raw.decode("utf-8", "replace")
        rec = Recorded(method, url.path, parse_qs(url.query), {k.lower(): v for k, v in h.headers.items()}, body)
        self.record(self.requests, rec)
        try:
            status, payload, headers = self._route(rec)
        except Exception as exc:  # a bug in the stand-in must show up in the test, not hang it
            status, payload, headers = 500, google_error(500, "backendError", f"stand-in crashed: {exc!r}"), {}
        h.reply_json(status, payload, headers, content_type="application/json; charset=UTF-8")

    def _route(self, r: Recorded) -> tuple[int, Any, dict[str, str]]:
        if r.path == "/token" and r.method == "POST":
            return self._token(r)
        if r.path == "/calendar/v3/freeBusy" and r.method == "POST":
            if self._user(r) is None:
                return 401, google_error(401, "authError", "Request had invalid authentication credentials."), {}
            if not self._scoped(r, _FREEBUSY_SCOPES):
                return 403, google_error(403, "insufficientPermissions",
                                         "Request had insufficient authentication scopes."), {}
            return self._free_busy(r)
        m = re.fullmatch(r"/calendar/v3/calendars/([^/]+)/events(?:/([^/]+))?", r.path)
        if not m:
            return 404, google_error(404, "notFound", "Not Found"), {}
        user = self._user(r)
        if user is None:
            return 401, google_error(401, "authError", "Request had invalid authentication credentials. Expected "
                                     "OAuth 2 access token, login cookie or other valid authentication credential."), {}
        calendar = unquote(m[1])
        owner = user if calendar == "primary" else calendar
        if calendar != "primary" and calendar not in self.calendars:
            return 404, google_error(404, "notFound", "Not Found"), {}
        failure = self._take_failure(r.method)
        if r.method == "POST" and m[2] is None and not self._scoped(r, {_BASE + "calendar", _BASE + "calendar.events"}):
            return 403, google_error(403, "insufficientPermissions", "Request had insufficient authentication scopes."), {}
        if r.method == "POST" and m[2] is None:
            if failure and not failure.commit:
                return failure.status, google_error(failure.status, failure.reason, failure.message), failure.headers
            status, payload = self._insert(r, owner, user)
            if failure:
                return failure.status, google_error(failure.status, failure.reason, failure.message), failure.headers
            return status, payload, {}
        if r.method == "GET" and m[2] is not None:
            if failure:
                return failure.status, google_error(failure.status, failure.reason, failure.message), failure.headers
            event = self.events.get((owner, unquote(m[2])))
            if event is None:
                return 404, google_error(404, "notFound", "Not Found"), {}
            return 200, event, {}
        return 405, google_error(405, "httpMethodNotAllowed", "Method not allowed"), {}

    def add_busy(self, email: str, start: datetime, end: datetime) -> None:
        """A busy stretch (aware times) in ``email``'s primary calendar, for ``freeBusy``."""
        with self.lock:
            self.busy.setdefault(email.lower(), []).append((start, end))

    def _free_busy(self, r: Recorded) -> tuple[int, Any, dict[str, str]]:
        """``freebusy.query``: each item's busy intervals (RFC 3339, UTC) between ``timeMin`` and ``timeMax``,
        from :meth:`add_busy` and the events it holds where the address is the organiser or an attendee; an
        address outside :attr:`known_users` (when set) gets ``errors: [{"reason": "notFound"}]``."""
        body = r.body or {}
        lo, hi = _rfc3339(body["timeMin"]), _rfc3339(body["timeMax"])
        out: dict[str, Any] = {}
        for item in body.get("items") or []:
            who = str(item.get("id") or "").lower()
            if self.known_users is not None and who not in self.known_users:
                out[who] = {"errors": [{"domain": "global", "reason": "notFound"}], "busy": []}
                continue
            spans = list(self.busy.get(who, []))
            for (owner, _), e in self.events.items():
                if owner == who or any(str(a.get("email", "")).lower() == who for a in e.get("attendees") or []):
                    spans.append((_rfc3339(e["start"]["dateTime"]), _rfc3339(e["end"]["dateTime"])))
            fmt = "%Y-%m-%dT%H:%M:%SZ"
            out[who] = {"busy": [{"start": a.astimezone(timezone.utc).strftime(fmt),
                                  "end": b.astimezone(timezone.utc).strftime(fmt)}
                                 for a, b in sorted(spans) if a < hi and b > lo]}
        return 200, {"kind": "calendar#freeBusy", "timeMin": body["timeMin"], "timeMax": body["timeMax"],
                     "calendars": out}, {}

    def _take_failure(self, method: str) -> _Failure | None:
        with self.lock:
            for i, f in enumerate(self._failures):
                if f.method == method:
                    return self._failures.pop(i)
        return None

    def _scoped(self, r: Recorded, accepted: set[str]) -> bool:
        """A service-account token carries one of ``accepted`` (other tokens are not checked)."""
        scopes = self.token_scopes.get(r.headers.get("authorization", "")[7:])
        return scopes is None or bool(scopes & accepted)

    def _user(self, r: Recorded) -> str | None:
        auth = r.headers.get("authorization", "")
        if not auth.startswith("Bearer "):
            return None
        return self.tokens.get(auth[7:])

    def _token(self, r: Recorded) -> tuple[int, Any, dict[str, str]]:
        from google.auth import jwt

        form = r.body or {}
        if form.get("grant_type") == "refresh_token":
            user = self.refresh_tokens.get(form.get("refresh_token", ""))
            if user is None:
                return 400, {"error": "invalid_grant", "error_description": "Token has been expired or revoked."}, {}
            token = "user-" + secrets.token_hex(8)
            with self.lock:
                self.tokens[token] = user
            return 200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer",
                         "scope": "https://www.googleapis.com/auth/calendar.events"}, {}
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return 400, {"error": "unsupported_grant_type"}, {}
        assertion = form.get("assertion", "")
        try:
            unverified = jwt.decode(assertion, verify=False)
            key = self.public_keys[unverified["iss"]]
            # Google expects its own token endpoint as the audience, wherever the request was sent.
            claims = jwt.decode(assertion, certs=key, audience=[self.token_uri, "https://oauth2.googleapis.com/token"])
        except Exception as exc:
            return 400, {"error": "invalid_grant", "error_description": f"Invalid JWT Signature. ({exc})"}, {}
        if "calendar" not in claims.get("scope", ""):
            return 400, {"error": "invalid_scope"}, {}
        token = "sa-" + secrets.token_hex(8)
        with self.lock:
            self.tokens[token] = claims.get("sub") or claims["iss"]
            self.token_scopes[token] = set(str(claims.get("scope", "")).split())
        return 200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}, {}

    def _insert(self, r: Recorded, owner: str, user: str) -> tuple[int, Any]:
        body = r.body if isinstance(r.body, dict) else {}
        event_id = body.get("id") or secrets.token_hex(13)
        if not _EVENT_ID.match(event_id):
            return 400, google_error(400, "invalid", "Invalid resource id value.")
        for part in ("start", "end"):
            if not (body.get(part) or {}).get("dateTime") and not (body.get(part) or {}).get("date"):
                return 400, google_error(400, "required", "Missing end time." if part == "end" else "Missing start time.")
        if "recurrence" in body:
            lines = body["recurrence"]
            if not isinstance(lines, list) or not all(isinstance(x, str) and _RECURRENCE_LINE.match(x) for x in lines):
                return 400, google_error(400, "invalid", "Invalid recurrence rule.")
            for part in ("start", "end"):
                if lines and not (body.get(part) or {}).get("timeZone"):
                    return 400, google_error(400, "invalid", f"Missing time zone definition for {part} time.")
        with self.lock:
            if (owner, event_id) in self.events:
                return 409, google_error(409, "duplicate", "The requested identifier already exists.")
            now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            eid = base64.urlsafe_b64encode(f"{event_id} {user}".encode()).decode().rstrip("=")
            event: dict[str, Any] = {
                "kind": "calendar#event", "etag": f"\"{secrets.randbelow(10**15)}\"", "id": event_id,
                "status": "confirmed", "htmlLink": f"https://www.google.com/calendar/event?eid={eid}",
                "created": now, "updated": now, "summary": body.get("summary", ""),
                "creator": {"email": user, "self": True}, "organizer": {"email": user, "self": True},
                "start": body["start"], "end": body["end"], "iCalUID": f"{event_id}@google.com", "sequence": 0,
                "reminders": body.get("reminders", {"useDefault": True}), "eventType": "default",
            }
            for k in ("description", "location", "extendedProperties", "recurrence"):
                if k in body:
                    event[k] = body[k]
            if body.get("attendees"):
                event["attendees"] = [{**a, "responseStatus": "needsAction"} for a in body["attendees"]]
            version = int((r.query.get("conferenceDataVersion") or ["0"])[0])
            create = (body.get("conferenceData") or {}).get("createRequest")
            if create and version >= 1:
                code = "-".join(secrets.token_hex(2)[:n] for n in (3, 4, 3))
                event["hangoutLink"] = f"https://meet.google.com/{code}"
                event["conferenceData"] = {
                    "createRequest": {**create, "status": {"statusCode": "success"}},
                    "entryPoints": [{"entryPointType": "video", "uri": f"https://meet.google.com/{code}",
                                     "label": f"meet.google.com/{code}"}],
                    "conferenceSolution": {"key": {"type": "hangoutsMeet"}, "name": "Google Meet"},
                    "conferenceId": code,
                }
            self.events[(owner, event_id)] = event
        return 200, event


def _rfc3339(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
