"""The Microsoft 365 backend: real ``msal`` and ``httpx`` against the Graph stand-in over HTTPS on 127.0.0.1.

Checked: the client-credentials sign-in and its cached token (one token request for several bookings),
the documented create request (the organiser's mailbox, ``Prefer: outlook.timezone``, wall-clock times with
the zone, attendees, ``transactionId``, a Teams meeting only when asked), exactly one event when a response
is lost and the create retried, 429 with ``Retry-After`` honoured, a mailbox the application access policy
refuses answered with a clear message and nothing booked, a wrong secret and an unknown tenant, a series as
Graph's ``patternedRecurrence``, getSchedule read into busy intervals and working hours (a Windows zone
name mapped to IANA), and the settings selecting the backend.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from app.extras import EXTRAS
from app.settings import Settings
from app.wiring import graph_options
from connectors.http import RetryPolicy
from tests.standins.graph import CLIENT_ID, CLIENT_SECRET, TENANT, GraphStandIn
from tools.calendar import CalendarCreateArgs
from tools.calendar.factory import calendar_backend
from tools.calendar.microsoft import GraphCalendar, GraphCalendarError, graph_recurrence

ORGANISER = "ada@contoso.com"
KEY = "0123456789abcdefghijklmnopqrstuv"


@pytest.fixture
def graph():
    with GraphStandIn({ORGANISER, "alice@contoso.com", "locked@contoso.com"},
                      allowed={ORGANISER, "alice@contoso.com"}) as g:
        yield g


def _backend(g: GraphStandIn, sleeps: list[float] | None = None, **kw) -> GraphCalendar:
    policy = RetryPolicy(attempts=4, backoff_initial=0.01, retry_after_max=30.0,
                         sleep=(sleeps.append if sleeps is not None else (lambda s: None)))
    options = {"tenant_id": TENANT, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, **kw}
    return GraphCalendar(options.pop("tenant_id"), options.pop("client_id"), options.pop("client_secret"),
                         api_endpoint=g.graph, authority_host=g.url, ca_bundle=g.ca_file, policy=policy, **options)


def _args(video: bool = False, **kw) -> CalendarCreateArgs:
    start = (datetime.now(ZoneInfo("Europe/Berlin")) + timedelta(days=2)).replace(hour=15, minute=0, second=0,
                                                                                   microsecond=0)
    raw = {"title": "Release review", "start": start, "duration_minutes": 30, "timezone": "Europe/Berlin",
           "attendees": ["alice@contoso.com", "bob@fabrikam.com"], "description": "Agenda: 5.2",
           "video_conference": video, **kw}
    return CalendarCreateArgs.model_validate(raw)


def test_create_sends_the_documented_request_with_one_cached_token(graph: GraphStandIn) -> None:
    cal = _backend(graph)
    args = _args(video=True)
    ev = cal.create(args, event_id=KEY, organizer_email=ORGANISER)
    [post] = graph.calls("POST", "/events")
    assert post.path == f"/v1.0/users/{ORGANISER}/events"
    assert post.headers["prefer"] == 'outlook.timezone="Europe/Berlin"'
    body = post.body
    assert body["start"] == {"dateTime": args.local_start().strftime("%Y-%m-%dT%H:%M:%S"), "timeZone": "Europe/Berlin"}
    assert body["transactionId"] == KEY and body["subject"] == "Release review"
    assert body["isOnlineMeeting"] is True and body["onlineMeetingProvider"] == "teamsForBusiness"
    assert [a["emailAddress"]["address"] for a in body["attendees"]] == ["alice@contoso.com", "bob@fabrikam.com"]
    assert sorted(a for a, _ in graph.invitations) == ["alice@contoso.com", "bob@fabrikam.com"]
    assert ev.backend == "microsoft" and ev.calendar == ORGANISER and ev.link.startswith("https://outlook.office365")
    assert ev.conference_link.startswith("https://teams.microsoft.com/l/meetup-join/")
    assert ev.raw["start"]["timeZone"] == "Europe/Berlin"  # answered in the organiser's zone

    second = cal.create(_args(title="Retro"), event_id="v" * 32, organizer_email=ORGANISER)
    assert second.conference_link == "" and graph.calls("POST", "/events")[-1].body["isOnlineMeeting"] is False
    assert "onlineMeetingProvider" not in graph.calls("POST", "/events")[-1].body
    assert len(graph.calls("POST", "/oauth2/v2.0/token")) == 1  # msal's cache until expiry
    assert graph.calls("POST", "/oauth2/v2.0/token")[0].body["scope"] == f"{graph.url}/.default"


def test_a_lost_response_is_retried_without_a_second_event(graph: GraphStandIn) -> None:
    graph.fail_next(503, "ServiceNotAvailable", commit=True)
    sleeps: list[float] = []
    ev = _backend(graph, sleeps).create(_args(), event_id=KEY, organizer_email=ORGANISER)
    assert len(graph.calls("POST", "/events")) == 2 and len(sleeps) == 1
    assert [e["id"] for e in graph.events[ORGANISER]] == [ev.event_id]
    again = _backend(graph).create(_args(), event_id=KEY, organizer_email=ORGANISER)  # a retried Confirm
    assert again.event_id == ev.event_id and len(graph.events[ORGANISER]) == 1


def test_throttling_waits_the_retry_after_then_books(graph: GraphStandIn) -> None:
    graph.fail_next(429, "ApplicationThrottled", "Application is over its MailboxConcurrency limit.", times=2,
                    headers={"Retry-After": "7"})
    sleeps: list[float] = []
    _backend(graph, sleeps).create(_args(), event_id=KEY, organizer_email=ORGANISER)
    assert sleeps == [7.0, 7.0] and len(graph.events[ORGANISER]) == 1


def test_throttled_past_the_last_try_is_a_retryable_error(graph: GraphStandIn) -> None:
    graph.fail_next(429, "ApplicationThrottled", times=4, headers={"Retry-After": "1"})
    with pytest.raises(GraphCalendarError) as err:
        _backend(graph).create(_args(), event_id=KEY, organizer_email=ORGANISER)
    assert err.value.retryable and "throttling" in str(err.value) and not graph.events


def test_a_mailbox_outside_the_access_policy_is_refused_clearly(graph: GraphStandIn) -> None:
    sleeps: list[float] = []
    with pytest.raises(GraphCalendarError) as err:
        _backend(graph, sleeps).create(_args(), event_id=KEY, organizer_email="locked@contoso.com")
    msg = str(err.value)
    assert err.value.status == 403 and err.value.code == "ErrorAccessDenied" and not err.value.retryable
    assert "locked@contoso.com" in msg and "application access policy" in msg and "Nothing was booked" in msg
    assert not graph.events and sleeps == [] and not graph.invitations


def test_unknown_mailbox_wrong_secret_and_unknown_tenant(graph: GraphStandIn) -> None:
    with pytest.raises(GraphCalendarError, match="no calendar for nobody@contoso.com"):
        _backend(graph).create(_args(), event_id=KEY, organizer_email="nobody@contoso.com")
    with pytest.raises(GraphCalendarError, match="invalid_client.*GRAPH_CLIENT_SECRET"):
        _backend(graph, client_secret="wrong").create(_args(), event_id=KEY, organizer_email=ORGANISER)
    with pytest.raises(GraphCalendarError, match="GRAPH_TENANT_ID"):
        _backend(graph, tenant_id="fabrikam.onmicrosoft.com").create(_args(), event_id=KEY, organizer_email=ORGANISER)
    with pytest.raises(GraphCalendarError, match="e-mail address is unknown"):
        _backend(graph).create(_args(), event_id=KEY, organizer_email=None)
    assert not graph.events


@pytest.mark.parametrize(("rule", "pattern", "rng"), [
    ("FREQ=WEEKLY;BYDAY=MO,WE;COUNT=6", {"type": "weekly", "interval": 1, "daysOfWeek": ["monday", "wednesday"],
                                         "firstDayOfWeek": "monday"}, {"type": "numbered", "numberOfOccurrences": 6}),
    ("FREQ=DAILY;INTERVAL=2", {"type": "daily", "interval": 2}, {"type": "noEnd"}),
    ("FREQ=MONTHLY;BYMONTHDAY=7", {"type": "absoluteMonthly", "interval": 1, "dayOfMonth": 7}, {"type": "noEnd"}),
    ("FREQ=MONTHLY;BYDAY=-1MO;UNTIL=20271231", {"type": "relativeMonthly", "interval": 1, "index": "last",
                                               "daysOfWeek": ["monday"]}, {"type": "endDate", "endDate": "2027-12-31"}),
])
def test_a_series_becomes_a_patterned_recurrence(rule: str, pattern: dict, rng: dict) -> None:
    start = datetime(2027, 6, 7, 9, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    out = graph_recurrence(rule, start, "Europe/Berlin")
    assert out["pattern"] == pattern
    assert out["range"] == {"startDate": "2027-06-07", "recurrenceTimeZone": "Europe/Berlin", **rng}


def test_get_schedule_reads_busy_times_and_working_hours(graph: GraphStandIn) -> None:
    day = (datetime.now(timezone.utc) + timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
    graph.add_busy("alice@contoso.com", day + timedelta(hours=9), day + timedelta(hours=10))
    graph.set_working_hours("alice@contoso.com", "Pacific Standard Time", "09:00", "17:30")
    [alice, ghost] = _backend(graph).busy(["alice@contoso.com", "ghost@fabrikam.com"], day, day + timedelta(days=1),
                                          organizer_email=ORGANISER)
    assert [(b.start, b.end) for b in alice.busy] == [(day + timedelta(hours=9), day + timedelta(hours=10))]
    assert alice.timezone == "America/Los_Angeles" and alice.work_start == (9, 0) and alice.work_end == (17, 30)
    assert alice.work_days == (0, 1, 2, 3, 4)
    assert ghost.error and not ghost.busy
    [post] = graph.calls("POST", "/calendar/getSchedule")
    assert post.path == f"/v1.0/users/{ORGANISER}/calendar/getSchedule"


def test_settings_select_the_microsoft_backend(tmp_path, graph: GraphStandIn) -> None:
    s = Settings(chatops_data_dir=tmp_path, calendar_backend="microsoft", graph_tenant_id=TENANT,
                 graph_client_id=CLIENT_ID, graph_client_secret=CLIENT_SECRET, graph_api_endpoint=graph.graph,
                 graph_authority_host=graph.url, graph_ca_bundle=graph.ca_file)
    cal = calendar_backend(s.calendar_backend, graph=graph_options(s))
    assert isinstance(cal, GraphCalendar)
    cal.create(_args(), event_id=KEY, organizer_email=ORGANISER)
    assert len(graph.events[ORGANISER]) == 1
    assert next(e for e in EXTRAS if e.name == "microsoft").wanted(s)
