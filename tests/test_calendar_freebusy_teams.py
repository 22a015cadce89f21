"""Free/busy before booking on Microsoft Teams with Google Calendar: activities POSTed to ``/api/messages`` of
the real Bot Framework ``CloudAdapter``, the roster and replies from the Bot Connector stand-in, the real agent
with ``CALENDAR_BACKEND=google`` (a service account with domain-wide delegation acting as the requester's roster
e-mail) against ``tests/standins/google_calendar.py`` (``freebusy.query`` and ``events.insert``), the real state
store and action service.

"find 30 minutes with grace@example.com next week" gets a card with the first common free slot and the next ones
as buttons (``Action.Submit`` with ``choice``); the picked one is booked once, in Google Calendar; a request at a
time when the attendee is busy says so on the card and offers the next free slots.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo
from pathlib import Path

import pytest

from app.settings import Settings
from tests.standins.google_calendar import GoogleCalendarStandin
from tests.test_calendar_google import _service_account_file
from tests.teams_actions import channel_message, post, teams_bot

USER = "29:aad-user-1"
ADA = "ada@example.com"
BERLIN = ZoneInfo("Europe/Berlin")


def message(service_url: str, text: str, **kw) -> dict:
    return channel_message(service_url, text, user=USER, name="Ada Lovelace", **kw)


@pytest.fixture
def teams(tmp_path: Path, wiki_index):
    google = GoogleCalendarStandin()
    settings = Settings(chatops_data_dir=tmp_path / "data", calendar_backend="google",
                        google_calendar_api_endpoint=google.endpoint,
                        google_service_account_file=str(_service_account_file(tmp_path, google)))
    members = {USER: {"name": "Ada Lovelace", "email": ADA, "userRole": "user", "tenantId": "t1",
                      "aadObjectId": USER.removeprefix("29:")}}
    try:
        with teams_bot(settings, wiki_index, tmp_path, members) as t:
            t.google = google
            yield t
    finally:
        google.close()


def _card(t) -> dict:
    return t.connector.messages()[-1].body["attachments"][0]["content"]


def test_find_30_minutes_next_week_books_the_picked_slot_once_in_google(teams) -> None:
    google: GoogleCalendarStandin = teams.google
    now = datetime.now(BERLIN)
    monday = (now + timedelta(days=7 - now.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    google.add_busy("grace@example.com", monday, monday + timedelta(hours=11))
    post(teams, message(teams.connector.url, "<at>chatops</at> find 30 minutes with grace@example.com next week",
                        activity_id="1700000000300", mention=True))
    card = _card(teams)
    [query] = [r for r in google.requests if r.path == "/calendar/v3/freeBusy"]
    assert sorted(i["id"] for i in query.body["items"]) == [ADA, "grace@example.com"]
    key = next(a for a in card["actions"] if a["title"] == "Confirm")["data"]["key"]
    args = teams.store.get_pending(key).args
    first = datetime.fromisoformat(args["start"])
    assert first == monday + timedelta(hours=11)  # Grace is busy until 11:00; no working hours from Google: 09-17
    picks = [a for a in card["actions"] if "choice" in a.get("data", {})]
    slots = [datetime.fromisoformat(s) for s in args["free_slots"]]
    assert [p["title"] for p in picks] == [f"Book {s.astimezone(BERLIN):%a %d %b %H:%M}" for s in slots]
    assert not google.events  # nothing before a pick

    post(teams, message(teams.connector.url, "", activity_id="c1", value=picks[2]["data"], reply_to="card-1"))
    [event] = google.events.values()
    assert datetime.fromisoformat(event["start"]["dateTime"]) == slots[2]
    assert [a["email"] for a in event["attendees"]] == ["grace@example.com"]
    assert event["organizer"]["email"] == ADA  # booked as the requester (domain-wide delegation)
    updated = json.dumps([c.body for c in teams.connector.calls if c.method == "PUT"][-1], ensure_ascii=False)
    assert "Booked" in updated and f"{slots[2].astimezone(BERLIN):%H:%M}" in updated
    post(teams, message(teams.connector.url, "", activity_id="c2", value=picks[0]["data"], reply_to="card-1"))
    post(teams, message(teams.connector.url, "", activity_id="c3",
                        value=next(a for a in card["actions"] if a["title"] == "Confirm")["data"], reply_to="card-1"))
    assert len(google.events) == 1 and len(google.api_requests("POST")) == 2  # one freeBusy, one insert


def test_a_busy_attendee_is_shown_on_the_card_with_the_next_free_slots(teams) -> None:
    google: GoogleCalendarStandin = teams.google
    tomorrow = (datetime.now(BERLIN) + timedelta(days=1)).replace(hour=10, minute=0, second=0, microsecond=0)
    google.add_busy("grace@example.com", tomorrow, tomorrow + timedelta(hours=2))
    post(teams, message(teams.connector.url, "<at>chatops</at> book a 30 min review with grace@example.com "
                        "tomorrow at 10am", activity_id="1700000000400", mention=True))
    card = _card(teams)
    facts = {f["title"]: f["value"] for b in card["body"] if b["type"] == "FactSet" for f in b["facts"]}
    assert facts["Busy then"] == "grace@example.com" and facts["Next free"]
    picks = [a for a in card["actions"] if "choice" in a.get("data", {})]
    assert picks and not google.events
