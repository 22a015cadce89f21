"""A stand-in for Microsoft Graph's calendar API and the Microsoft identity platform on https://127.0.0.1.

It serves HTTPS with a self-signed certificate made at start (:attr:`GraphStandIn.ca_file` is the PEM a
client trusts), because ``msal`` accepts only ``https`` authorities. It behaves like Microsoft where the
bot depends on it, and checks the caller:

- ``GET /{tenant}/v2.0/.well-known/openid-configuration``: the tenant's OpenID metadata (``token_endpoint``);
  an unknown tenant answers 400 ``invalid_tenant`` (AADSTS90002), as login.microsoftonline.com does.
- ``POST /{tenant}/oauth2/v2.0/token``: the client-credentials grant (form: ``client_id``,
  ``client_secret``, ``scope`` ending in ``/.default``); a wrong secret answers 401 ``invalid_client``
  (AADSTS7000215). The token (``expires_in`` 3599) is what the API accepts afterwards.
- ``POST /v1.0/users/{id}/events``: needs a Bearer token it issued (401 ``InvalidAuthenticationToken``);
  the mailbox must exist (404 ``ErrorInvalidUser``) and be inside the application access policy (403
  ``ErrorAccessDenied``, "Blocked by tenant configured AppOnly AccessPolicy settings."); start/end are
  ``dateTimeTimeZone`` without an offset; a ``transactionId`` already used in that mailbox answers the
  event it made (no second event); each attendee gets an invitation (recorded in :attr:`invitations`);
  ``isOnlineMeeting`` with ``teamsForBusiness`` adds ``onlineMeeting.joinUrl``; times are answered in the
  zone of ``Prefer: outlook.timezone`` (UTC without one), with ``Preference-Applied``.
- ``POST /v1.0/users/{id}/calendar/getSchedule``: free/busy and working hours of each address in
  ``schedules`` from :meth:`add_busy` / :meth:`set_working_hours` and the events booked here; an address
  with no mailbox gets an ``error`` item.

:meth:`GraphStandIn.fail_next` scripts errors in Graph's format (``{"error": {"code", "message",
"innerError"}}``), e.g. 429 with ``Retry-After``, optionally after storing the event (a lost response).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import secrets
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from zoneinfo import ZoneInfo

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.standins.base import Handler, StandIn

__all__ = ["GraphStandIn", "TENANT", "CLIENT_ID", "CLIENT_SECRET", "Recorded"]

TENANT = "contoso.onmicrosoft.com"
CLIENT_ID = "11111111-2222-3333-4444-555555555555"
CLIENT_SECRET = "standin-secret~value"
_DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


@dataclass
class Recorded:
    """One request: method, path (unquoted), headers (lower-case names), JSON or form body."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class _Failure:
    status: int
    code: str
    message: str
    commit: bool
    headers: dict[str, str] = field(default_factory=dict)
    path_part: str = "/events"


def graph_error(code: str, message: str) -> dict[str, Any]:
    """Graph's error body."""
    return {"error": {"code": code, "message": message,
                      "innerError": {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
                                     "request-id": secrets.token_hex(8), "client-request-id": secrets.token_hex(8)}}}


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "graph-standin")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "standin.pem", directory / "standin.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


class _Handler(Handler):
    protocol_version = "HTTP/1.1"


class GraphStandIn(StandIn):
    """The stand-in (see the module docstring): ``with GraphStandIn(mailboxes=..., allowed=...) as g:``.

    Args:
        mailboxes: the tenant's users' addresses (lower case).
        allowed: the mailboxes the application access policy lets the app reach (None: all of them).
    """

    handler = _Handler

    def __init__(self, mailboxes: set[str], allowed: set[str] | None = None) -> None:
        self.mailboxes = {m.lower() for m in mailboxes}
        self.allowed = None if allowed is None else {m.lower() for m in allowed}
        self.tokens: dict[str, float] = {}
        self.events: dict[str, list[dict[str, Any]]] = {}  # mailbox -> events
        self.invitations: list[tuple[str, str]] = []  # (attendee, event id)
        self.busy: dict[str, list[tuple[dt.datetime, dt.datetime, str]]] = {}
        self.working_hours: dict[str, dict[str, Any]] = {}
        self.requests: list[Recorded] = []
        self._failures: list[_Failure] = []
        self._dir = tempfile.TemporaryDirectory(prefix="graph-standin-")
        cert, key = _self_signed(Path(self._dir.name))
        self.ca_file = str(cert)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cert, key)
        super().__init__(tls=tls)
        self.start()

    # -- configuration -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``https://127.0.0.1:PORT`` (the authority host)."""
        return f"https://127.0.0.1:{self.port}"

    @property
    def graph(self) -> str:
        """Graph's base URL: ``https://127.0.0.1:PORT/v1.0``."""
        return f"{self.url}/v1.0"

    def fail_next(self, status: int, code: str, message: str = "", *, times: int = 1, commit: bool = False,
                  headers: dict[str, str] | None = None, path_part: str = "/events") -> None:
        """Answer the next ``times`` API POSTs whose path contains ``path_part`` with this error."""
        with self.lock:
            self._failures += [_Failure(status, code, message or f"stand-in error {status}", commit,
                                        dict(headers or {}), path_part) for _ in range(times)]

    def add_busy(self, mailbox: str, start: dt.datetime, end: dt.datetime, status: str = "busy") -> None:
        """A busy stretch (aware times) in ``mailbox``'s calendar, for getSchedule."""
        self.busy.setdefault(mailbox.lower(), []).append((start, end, status))

    def set_working_hours(self, mailbox: str, windows_zone: str, start: str = "08:00", end: str = "17:00",
                          days: tuple[str, ...] = tuple(_DAYS[:5])) -> None:
        """Working hours as Outlook keeps them (a Windows zone name such as ``Pacific Standard Time``)."""
        self.working_hours[mailbox.lower()] = {"daysOfWeek": list(days), "startTime": f"{start}:00.0000000",
                                               "endTime": f"{end}:00.0000000", "timeZone": {"name": windows_zone}}

    def calls(self, method: str, contains: str = "") -> list[Recorded]:
        """Recorded requests with ``method`` whose path contains ``contains``."""
        return [r for r in self.requests if r.method == method and contains in r.path]

    def close(self) -> None:
        """Stop serving and delete the certificate."""
        self.stop()
        self._dir.cleanup()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP ------------------------------------------------------------------------------------
    def serve(self, h: Handler, method: str) -> None:
        """Record the request and answer it (a stand-in bug answers 500 with the exception)."""
        url = urlsplit(h.path)
        raw = h.body()
        ctype = h.headers.get("Content-Type", "")
        body: Any = None
        if raw:
            body = ({k: v[0] for k, v in parse_qs(raw.decode()).items()} if "x-www-form-urlencoded" in ctype
                    else json.loads(raw))
        rec = Recorded(method, unquote(url.path), {k.lower(): v for k, v in h.headers.items()}, body)
        self.record(self.requests, rec)
        try:
            status, payload, headers = self._route(rec)
        except Exception as exc:  # a stand-in bug shows in the test
            status, payload, headers = 500, graph_error("generalException", f"stand-in crashed: {exc!r}"), {}
        h.reply_json(status, payload, headers, content_type="application/json; charset=utf-8")

    def _route(self, r: Recorded) -> tuple[int, Any, dict[str, str]]:
        parts = r.path.strip("/").split("/")
        if parts[0] != "v1.0":
            return self._login(r, parts)
        token = r.headers.get("authorization", "").removeprefix("Bearer ")
        if token not in self.tokens:
            return 401, graph_error("InvalidAuthenticationToken", "Access token is empty or invalid."), {}
        if len(parts) < 4 or parts[1] != "users" or r.method != "POST":
            return 400, graph_error("BadRequest", f"Resource not found for the segment '{parts[-1]}'."), {}
        mailbox = parts[2].lower()
        if mailbox not in self.mailboxes:
            return 404, graph_error("ErrorInvalidUser", f"The requested user '{parts[2]}' is invalid."), {}
        if self.allowed is not None and mailbox not in self.allowed:
            return 403, graph_error("ErrorAccessDenied", "Access to OData is disabled: Blocked by tenant configured "
                                                         "AppOnly AccessPolicy settings."), {}
        failure = self._take_failure(r.path)
        if failure and not failure.commit:
            return failure.status, graph_error(failure.code, failure.message), failure.headers
        rest = "/".join(parts[3:])
        if rest == "events":
            answer = self._create(r, mailbox)
        elif rest == "calendar/getSchedule":
            answer = self._schedule(r)
        else:
            return 400, graph_error("BadRequest", f"Resource not found for the segment '{parts[-1]}'."), {}
        if failure:
            return failure.status, graph_error(failure.code, failure.message), failure.headers
        return answer

    def _take_failure(self, path: str) -> _Failure | None:
        with self.lock:
            for i, f in enumerate(self._failures):
                if f.path_part in path:
                    return self._failures.pop(i)
        return None

    def _login(self, r: Recorded, parts: list[str]) -> tuple[int, Any, dict[str, str]]:
        tenant = parts[0]
        if tenant != TENANT:
            return 400, {"error": "invalid_tenant", "error_description": f"AADSTS90002: Tenant '{tenant}' not found."}, {}
        if parts[1:] == ["v2.0", ".well-known", "openid-configuration"] and r.method == "GET":
            base = f"{self.url}/{tenant}"
            return 200, {"token_endpoint": f"{base}/oauth2/v2.0/token", "authorization_endpoint":
                         f"{base}/oauth2/v2.0/authorize", "issuer": f"{base}/v2.0", "jwks_uri":
                         f"{base}/discovery/v2.0/keys", "token_endpoint_auth_methods_supported":
                         ["client_secret_post", "private_key_jwt", "client_secret_basic"]}, {}
        if parts[1:] == ["oauth2", "v2.0", "token"] and r.method == "POST":
            form = r.body or {}
            if form.get("grant_type") != "client_credentials":
                return 400, {"error": "unsupported_grant_type", "error_description": "AADSTS70003"}, {}
            if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
                return 401, {"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret "
                                                                             "provided."}, {}
            if form.get("scope") != f"{self.url}/.default":
                return 400, {"error": "invalid_scope", "error_description": "AADSTS1002012: The provided value for "
                                                                            "scope is not valid."}, {}
            token = "eyJ0eXAi." + secrets.token_urlsafe(24)
            self.tokens[token] = dt.datetime.now().timestamp() + 3599
            return 200, {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}, {}
        return 404, {"error": "not_found"}, {}

    def _create(self, r: Recorded, mailbox: str) -> tuple[int, Any, dict[str, str]]:
        body = r.body or {}
        for side in ("start", "end"):
            value = body.get(side) or {}
            try:
                moment = dt.datetime.fromisoformat(str(value.get("dateTime")))
                ZoneInfo(str(value.get("timeZone")))
            except (ValueError, KeyError):
                return 400, graph_error("ErrorInvalidRequest", f"Invalid {side}."), {}
            if moment.tzinfo is not None:
                return 400, graph_error("ErrorInvalidRequest", "DateTime must not carry an offset."), {}
        zone = _preferred_zone(r.headers.get("prefer", ""))
        with self.lock:
            mine = self.events.setdefault(mailbox, [])
            tx = body.get("transactionId")
            old = next((e for e in mine if tx and e["transactionId"] == tx), None)
            if old is not None:
                return 201, _in_zone(old, zone), _applied(zone)
            event_id = "AAMkAG" + secrets.token_urlsafe(30)
            event = {**body, "id": event_id, "iCalUId": "040000008200E0" + secrets.token_hex(20),
                     "webLink": f"https://outlook.office365.com/owa/?itemid={event_id}&exvsurl=1&path=/calendar/item",
                     "organizer": {"emailAddress": {"address": mailbox}}, "isOrganizer": True,
                     "attendees": [{**a, "status": {"response": "none", "time": "0001-01-01T00:00:00Z"}}
                                   for a in body.get("attendees") or []]}
            if body.get("isOnlineMeeting") and body.get("onlineMeetingProvider") == "teamsForBusiness":
                event["onlineMeeting"] = {"joinUrl": "https://teams.microsoft.com/l/meetup-join/19%3ameeting_"
                                                     f"{secrets.token_hex(12)}%40thread.v2/0"}
            else:
                event["onlineMeeting"] = None
            mine.append(event)
            self.invitations += [(a["emailAddress"]["address"], event_id) for a in body.get("attendees") or []]
        return 201, _in_zone(event, zone), _applied(zone)

    def _schedule(self, r: Recorded) -> tuple[int, Any, dict[str, str]]:
        body = r.body or {}
        start = _utc(body["startTime"])
        end = _utc(body["endTime"])
        out = []
        for who in body.get("schedules") or []:
            who_l = str(who).lower()
            if who_l not in self.mailboxes:
                out.append({"scheduleId": who, "error": {"message": f"The user {who} is not found",
                                                         "responseCode": "ErrorMailRecipientNotFound"}})
                continue
            spans = list(self.busy.get(who_l, []))
            for mb, events in self.events.items():
                for e in events:
                    if mb == who_l or any(a["emailAddress"]["address"].lower() == who_l for a in e["attendees"]):
                        spans.append((_naive_in(e["start"]), _naive_in(e["end"]), "busy"))
            items = [{"isPrivate": False, "status": s,
                      "start": {"dateTime": a.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.0000000"),
                                "timeZone": "UTC"},
                      "end": {"dateTime": b.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.0000000"),
                              "timeZone": "UTC"}}
                     for a, b, s in sorted(spans) if a < end and b > start]
            out.append({"scheduleId": who, "availabilityView": "", "scheduleItems": items,
                        "workingHours": self.working_hours.get(who_l, {
                            "daysOfWeek": _DAYS[:5], "startTime": "08:00:00.0000000", "endTime": "17:00:00.0000000",
                            "timeZone": {"name": "UTC"}})})
        return 200, {"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#Collection("
                                       "microsoft.graph.scheduleInformation)", "value": out}, {}


def _utc(value: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(str(value["dateTime"])[:19]).replace(tzinfo=ZoneInfo(value.get("timeZone", "UTC")))


def _naive_in(value: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(value["dateTime"][:19]).replace(tzinfo=ZoneInfo(value["timeZone"]))


def _preferred_zone(prefer: str) -> str:
    for part in prefer.split(","):
        name, _, value = part.strip().partition("=")
        if name.strip() == "outlook.timezone":
            return value.strip().strip('"')
    return "UTC"


def _applied(zone: str) -> dict[str, str]:
    return {"Preference-Applied": f'outlook.timezone="{zone}"'}


def _in_zone(event: dict[str, Any], zone: str) -> dict[str, Any]:
    out = dict(event)
    for side in ("start", "end"):
        moment = _naive_in(event[side]).astimezone(ZoneInfo(zone))
        out[side] = {"dateTime": moment.strftime("%Y-%m-%dT%H:%M:%S.0000000"), "timeZone": zone}
    return out
