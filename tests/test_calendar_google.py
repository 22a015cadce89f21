"""The Google Calendar backend: the real ``google-api-python-client`` against a stand-in API on 127.0.0.1.

The client is built from the bundled discovery document with ``client_options={"api_endpoint":
stand-in}``. Checked: the request (path, query ``sendUpdates=all`` and ``conferenceDataVersion=1``
only for a video call, the JSON body with the idempotency key as event id and in private extended
properties, the Bearer token), the idempotent retry (a lost response is retried and answered 409,
and the event the first attempt made is returned, so the calendar holds one event), ``Retry-After``
and backoff, the mapping of 400/401/403/404/409/429/5xx to clear messages with retries only for the
transient ones, a service account with domain-wide delegation acting as the requester (the
stand-in's token endpoint verifies the signed assertion and its ``sub``), an OAuth user token that
refreshes itself, a series sent as ``recurrence: ["RRULE:..."]`` (the stand-in refuses a malformed
``recurrence`` as Google does), and the whole confirm flow through :class:`app.actions.ActionService`.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.oauth2.credentials import Credentials
from googleapiclient.errors import HttpError

from agent.models import PendingAction, Turn, idempotency_key
from app.actions import ActionService
from app.settings import Settings
from tests.standins.google_calendar import GoogleCalendarStandin
from state import StateStore
from tools.base import ToolRegistry
from tools.calendar import CalendarCreate, CalendarCreateArgs
from tools.calendar.factory import calendar_backend
from tools.calendar.google import GoogleCalendar, GoogleCalendarError, credentials_factory
from tests.helpers import public_viewer

TOKEN = "ya29.standin-token"
OWNER = "owner@example.com"


@pytest.fixture
def standin():
    with GoogleCalendarStandin(tokens={TOKEN: OWNER}, calendars={"team@group.calendar.google.com"}) as s:
        yield s


def _args(video: bool = False, **kw) -> CalendarCreateArgs:
    start = (datetime.now(ZoneInfo("Europe/Berlin")) + timedelta(days=2)).replace(hour=15, minute=0, second=0,
                                                                                   microsecond=0)
    raw = {"title": "Release review", "start": start, "duration_minutes": 30, "timezone": "Europe/Berlin",
           "attendees": ["alice@example.com", "bob@example.com"], "description": "Agenda: the 5.2 release",
           "video_conference": video}
    raw.update(kw)
    return CalendarCreateArgs.model_validate(raw)


def _backend(standin: GoogleCalendarStandin, sleeps: list[float] | None = None, **kw) -> GoogleCalendar:
    return GoogleCalendar(lambda email: Credentials(token=TOKEN), api_endpoint=standin.endpoint,
                          sleep=(sleeps.append if sleeps is not None else (lambda s: None)), **kw)


def test_insert_sends_the_documented_request(standin: GoogleCalendarStandin) -> None:
    key = idempotency_key("google", "insert")
    args = _args(video=True)
    ev = _backend(standin).create(args, event_id=key, requester="U1")
    (req,) = standin.api_requests()
    assert req.method == "POST" and req.path == "/calendar/v3/calendars/primary/events"
    assert req.query["sendUpdates"] == ["all"] and req.query["conferenceDataVersion"] == ["1"]
    assert req.headers["authorization"] == f"Bearer {TOKEN}"
    body = req.body
    assert body["id"] == key and body["summary"] == "Release review"
    assert body["extendedProperties"] == {"private": {"chatopsKey": key}}
    assert body["start"] == {"dateTime": args.local_start().isoformat(), "timeZone": "Europe/Berlin"}
    assert body["end"] == {"dateTime": args.local_end().isoformat(), "timeZone": "Europe/Berlin"}
    assert body["attendees"] == [{"email": "alice@example.com"}, {"email": "bob@example.com"}]
    assert body["description"] == "Agenda: the 5.2 release"
    assert body["conferenceData"]["createRequest"] == {"requestId": key, "conferenceSolutionKey": {"type": "hangoutsMeet"}}
    assert ev.created and ev.event_id == key and ev.backend == "google"
    assert ev.link.startswith("https://www.google.com/calendar/event?eid=")
    assert ev.conference_link.startswith("https://meet.google.com/")
    assert standin.events[(OWNER, key)]["attendees"][0]["responseStatus"] == "needsAction"


def test_no_conference_parameters_without_a_video_call(standin: GoogleCalendarStandin) -> None:
    ev = _backend(standin, calendar_id="team@group.calendar.google.com").create(
        _args(), event_id=idempotency_key("google", "novideo"))
    (req,) = standin.api_requests()
    assert req.path == "/calendar/v3/calendars/team%40group.calendar.google.com/events"  # as Google receives it
    assert "conferenceDataVersion" not in req.query and "conferenceData" not in req.body
    assert ev.conference_link == "" and ev.calendar == "team@group.calendar.google.com"


def _next_monday_9() -> datetime:
    now = datetime.now(ZoneInfo("Europe/Berlin"))
    return (now + timedelta(days=7 - now.weekday())).replace(hour=9, minute=0, second=0, microsecond=0)


def test_a_series_sends_its_rrule_as_recurrence(standin: GoogleCalendarStandin) -> None:
    key = idempotency_key("google", "series")
    args = _args(start=_next_monday_9(), duration_minutes=25, recurrence="RRULE:FREQ=WEEKLY;BYDAY=MO")
    ev = _backend(standin).create(args, event_id=key)
    (req,) = standin.api_requests()
    assert req.body["recurrence"] == ["RRULE:FREQ=WEEKLY;BYDAY=MO"]
    assert req.body["start"] == {"dateTime": args.local_start().isoformat(), "timeZone": "Europe/Berlin"}
    assert ev.created and standin.events[(OWNER, key)]["recurrence"] == ["RRULE:FREQ=WEEKLY;BYDAY=MO"]
    single = _backend(standin).create(_args(), event_id=idempotency_key("google", "single"))
    assert "recurrence" not in standin.api_requests()[-1].body and "recurrence" not in single.raw


@pytest.mark.parametrize("recurrence, message", [
    ("FREQ=WEEKLY;BYDAY=MO", "Invalid recurrence rule."),  # no RRULE: prefix
    (["WEEKLY"], "Invalid recurrence rule."),
    ([7], "Invalid recurrence rule."),
])
def test_the_standin_rejects_a_malformed_recurrence_like_google(standin: GoogleCalendarStandin, recurrence,
                                                                message: str) -> None:
    key = idempotency_key("google", "bad-series", str(recurrence))
    service = build_service_for(standin)
    body = {"id": key, "summary": "x", "start": {"dateTime": "2030-01-07T09:00:00+01:00", "timeZone": "Europe/Berlin"},
            "end": {"dateTime": "2030-01-07T09:30:00+01:00", "timeZone": "Europe/Berlin"}, "recurrence": recurrence}
    with pytest.raises(HttpError) as exc:
        service.events().insert(calendarId="primary", body=body).execute(num_retries=0)
    assert exc.value.resp.status == 400 and message in exc.value.content.decode()
    no_zone = {**body, "recurrence": ["RRULE:FREQ=WEEKLY"], "start": {"dateTime": "2030-01-07T09:00:00+01:00"}}
    with pytest.raises(HttpError, match="Missing time zone definition for start time"):
        service.events().insert(calendarId="primary", body=no_zone).execute(num_retries=0)
    assert standin.events == {}


def build_service_for(standin: GoogleCalendarStandin):
    from tools.calendar.google import build_service

    return build_service(Credentials(token=TOKEN), standin.endpoint)


def test_a_lost_response_is_retried_without_double_booking(standin: GoogleCalendarStandin) -> None:
    key = idempotency_key("google", "lost")
    standin.fail_next(503, commit=True)  # the insert happened, the answer was a 503
    sleeps: list[float] = []
    ev = _backend(standin, sleeps).create(_args(), event_id=key)
    methods = [(r.method, r.path.rsplit("/", 1)[-1]) for r in standin.api_requests()]
    assert methods == [("POST", "events"), ("POST", "events"), ("GET", key)]  # retry -> 409 -> read it
    assert sleeps == [0.5]
    assert [k for k in standin.events if k[1] == key] == [(OWNER, key)]
    assert ev.event_id == key and not ev.created and ev.link


def test_retry_after_and_backoff(standin: GoogleCalendarStandin) -> None:
    standin.fail_next(429, headers={"Retry-After": "7"})
    standin.fail_next(403, reason="rateLimitExceeded", message="Rate Limit Exceeded")
    standin.fail_next(500)
    sleeps: list[float] = []
    ev = _backend(standin, sleeps).create(_args(), event_id=idempotency_key("google", "backoff"))
    assert ev.created
    assert sleeps == [7.0, 1.0, 2.0]
    assert len(standin.api_requests("POST")) == 4 and len(standin.events) == 1


@pytest.mark.parametrize("status, reason, fragments, retried", [
    (400, "invalid", ["rejected the event (400)", "Google said: stand-in error 400"], False),
    (401, "authError", ["credentials (401)", "GOOGLE_OAUTH_TOKEN_FILE"], False),
    (403, "forbidden", ["not allowed", "domain-wide delegation"], False),
    (404, "notFound", ["no calendar 'primary'", "GOOGLE_CALENDAR_ID"], False),
    (429, "rateLimitExceeded", ["rate-limiting", "(429)"], True),
    (403, "userRateLimitExceeded", ["rate-limiting", "403 userRateLimitExceeded"], True),
    (500, "backendError", ["unavailable right now (500)"], True),
    (503, "backendError", ["unavailable right now (503)"], True),
])
def test_errors_map_to_clear_messages(standin: GoogleCalendarStandin, status: int, reason: str,
                                      fragments: list[str], retried: bool) -> None:
    standin.fail_next(status, reason=reason, times=3)
    with pytest.raises(GoogleCalendarError) as exc:
        _backend(standin, max_attempts=3).create(_args(), event_id=idempotency_key("google", "err", str(status), reason))
    err = exc.value
    assert err.status == status and err.retryable == retried
    for fragment in fragments:
        assert fragment in str(err)
    assert len(standin.api_requests("POST")) == (3 if retried else 1)
    assert standin.events == {}


def test_real_401_and_404_from_the_api(standin: GoogleCalendarStandin) -> None:
    bad = GoogleCalendar(lambda e: Credentials(token="revoked"), api_endpoint=standin.endpoint, sleep=lambda s: None)
    with pytest.raises(GoogleCalendarError) as e401:
        bad.create(_args(), event_id=idempotency_key("google", "401"))
    # google-auth tries to refresh a token the API refused; a bare token cannot, so it is a 401 for the user
    assert e401.value.status == 401 and not e401.value.retryable and "expired or was revoked" in str(e401.value)
    assert len(standin.api_requests("POST")) == 1
    missing = _backend(standin, calendar_id="nope@group.calendar.google.com")
    with pytest.raises(GoogleCalendarError) as e404:
        missing.create(_args(), event_id=idempotency_key("google", "404"))
    assert e404.value.status == 404 and "nope@group.calendar.google.com" in str(e404.value)


def test_an_id_of_a_deleted_event_is_reported(standin: GoogleCalendarStandin) -> None:
    key = idempotency_key("google", "deleted")
    backend = _backend(standin)
    backend.create(_args(), event_id=key)
    standin.events[(OWNER, key)]["status"] = "cancelled"  # deleted in Google Calendar since
    with pytest.raises(GoogleCalendarError, match="deleted"):
        backend.create(_args(), event_id=key)


def _service_account_file(tmp_path: Path, standin: GoogleCalendarStandin) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    email = "chatops@project.iam.gserviceaccount.com"
    standin.register_service_account(email, public)
    path = tmp_path / "sa.json"
    path.write_text(json.dumps({"type": "service_account", "project_id": "project", "private_key_id": "k1",
                                "private_key": pem, "client_email": email, "client_id": "1234",
                                "token_uri": standin.token_uri}))
    return path


def test_service_account_books_as_the_requester(tmp_path: Path, standin: GoogleCalendarStandin) -> None:
    backend = GoogleCalendar(credentials_factory(service_account_file=str(_service_account_file(tmp_path, standin))),
                             api_endpoint=standin.endpoint, sleep=lambda s: None)
    key = idempotency_key("google", "delegated")
    backend.create(_args(), event_id=key, organizer_email="alice@example.com")
    token_req = next(r for r in standin.requests if r.path == "/token")
    from google.auth import jwt

    claims = jwt.decode(token_req.body["assertion"], verify=False)
    assert claims["sub"] == "alice@example.com" and "calendar.events" in claims["scope"]
    assert standin.events[("alice@example.com", key)]["organizer"]["email"] == "alice@example.com"
    with pytest.raises(GoogleCalendarError, match="users:read.email"):
        backend.create(_args(), event_id=idempotency_key("google", "no-email"), organizer_email=None)


def test_oauth_user_token_refreshes_itself(tmp_path: Path) -> None:
    with GoogleCalendarStandin(refresh_tokens={"1//refresh": OWNER}) as s:
        token_file = tmp_path / "token.json"
        token_file.write_text(json.dumps({"type": "authorized_user", "client_id": "cid", "client_secret": "secret",
                                          "refresh_token": "1//refresh", "token_uri": s.token_uri}))
        backend = GoogleCalendar(credentials_factory(oauth_token_file=str(token_file), token_uri=s.token_uri),
                                 api_endpoint=s.endpoint, sleep=lambda x: None)
        key = idempotency_key("google", "oauth")
        backend.create(_args(), event_id=key)
        assert [r.path for r in s.requests] == ["/token", "/calendar/v3/calendars/primary/events"]
        assert s.requests[0].body["grant_type"] == "refresh_token"
        assert (OWNER, key) in s.events


def test_settings_select_the_google_backend(tmp_path: Path, standin: GoogleCalendarStandin) -> None:
    settings = Settings(chatops_data_dir=tmp_path, calendar_backend="google", google_calendar_api_endpoint=standin.endpoint,
                        google_service_account_file=str(_service_account_file(tmp_path, standin)))
    from app.wiring import register_action_tools

    tool = register_action_tools(ToolRegistry(), settings).get("calendar.create")
    backend = tool.backend  # built on first use, from the settings the composition root passed in
    assert isinstance(backend, GoogleCalendar) and backend.calendar_id == "primary"
    ev = backend.create(_args(), event_id=idempotency_key("google", "settings"), organizer_email="carol@example.com")
    assert ("carol@example.com", ev.event_id) in standin.events
    with pytest.raises(Exception, match="GOOGLE_SERVICE_ACCOUNT_FILE"):
        calendar_backend("google", state_url=settings.state_url, ics_dir=settings.ics_dir)
    lazy = register_action_tools(ToolRegistry(), Settings(chatops_data_dir=tmp_path, calendar_backend="google"))
    with pytest.raises(Exception, match="GOOGLE_SERVICE_ACCOUNT_FILE"):
        assert lazy.get("calendar.create").backend is None  # raises first


def test_confirm_flow_through_the_action_service(tmp_path: Path, standin: GoogleCalendarStandin) -> None:
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    tools = ToolRegistry()
    tools.register(CalendarCreate(_backend(standin, max_attempts=1)))
    service = ActionService(store, tools)
    turn = Turn(viewer=public_viewer(), text="set up a release review", platform="slack", user_id="U1", channel_id="C1", message_id="1.1")
    args = _args(video=True)
    action = PendingAction("calendar.create", args.model_dump(mode="json"), idempotency_key("flow"), "Release review")
    service.propose(action, turn)

    standin.fail_next(503, times=1)
    first = service.confirm(action.idempotency_key, "U1", user_email="alice@example.com")
    assert first.status == "retry" and not first.final and "Confirm" in first.message
    assert service.get(action.idempotency_key).status == "pending"  # Confirm can be pressed again
    assert standin.events == {}

    done = service.confirm(action.idempotency_key, "U1", user_email="alice@example.com")
    assert done.status == "done" and done.result["link"].startswith("https://www.google.com/calendar/event")
    again = service.confirm(action.idempotency_key, "U1")
    assert again.status == "already_done"
    assert len(standin.api_requests("POST")) == 2 and len(standin.events) == 1
    audit = store.audit_entries(action="calendar.create")
    assert [a.outcome for a in audit] == ["ok", "retry"]
    assert audit[0].actor == "U1" and audit[0].target == action.idempotency_key
    assert audit[0].detail["conference_link"].startswith("https://meet.google.com/")
    store.close()
