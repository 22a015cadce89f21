"""Free/busy before booking (tools/calendar/freebusy.py, availability.py): who is busy at a time, the next slots
when everybody is free within each person's working hours (their own zone where the calendar says, else
09:00-17:00 in the requester's zone), the window a "find time" request names, and the local calendar's
free/busy from its own events (a series' occurrences too)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

from tools.calendar import CalendarCreateArgs
from tools.calendar.availability import search_window, with_availability
from tools.calendar.freebusy import BusyInterval, Schedule, busy_at, free_slots
from tools.calendar.local import LocalCalendar

BERLIN = ZoneInfo("Europe/Berlin")
MONDAY = datetime(2030, 1, 7, tzinfo=BERLIN)  # a Monday, midnight in Berlin


def at(day: int, hour: int, minute: int = 0, tz: ZoneInfo = BERLIN) -> datetime:
    return (MONDAY + timedelta(days=day)).replace(hour=hour, minute=minute, tzinfo=tz)


def test_busy_at_names_who_overlaps() -> None:
    alice = Schedule("alice@x.com", (BusyInterval(at(0, 10), at(0, 11)),))
    bob = Schedule("bob@x.com", (BusyInterval(at(0, 11), at(0, 12)),))
    assert busy_at([alice, bob], at(0, 10, 30), at(0, 11)) == ["alice@x.com"]
    assert busy_at([alice, bob], at(0, 10, 30), at(0, 11, 30)) == ["alice@x.com", "bob@x.com"]
    assert busy_at([alice, bob], at(0, 12), at(0, 13)) == []  # back to back is free


def test_next_slots_skip_busy_times_and_stay_in_default_hours_in_the_requesters_zone() -> None:
    alice = Schedule("alice@x.com", (BusyInterval(at(0, 15), at(0, 16, 30)),))
    slots = free_slots([alice], duration=timedelta(minutes=30), after=at(0, 15), until=at(2, 0),
                       requester_tz="Europe/Berlin", skip=[at(0, 15)])
    assert slots == [at(0, 16, 30), at(1, 9), at(1, 9, 30)]  # 16:30-17:00 fits, then Tuesday from 09:00


def test_an_attendees_own_working_hours_in_their_zone_bound_the_slots() -> None:
    la = ZoneInfo("America/Los_Angeles")
    bob = Schedule("bob@x.com", timezone="America/Los_Angeles", work_days=(0, 1, 2, 3, 4), work_start=(8, 0),
                   work_end=(17, 0))
    me = Schedule("me@x.com")  # unknown hours: 09:00-17:00 Berlin
    slots = free_slots([me, bob], duration=timedelta(minutes=30), after=at(0, 8), until=at(3, 0),
                       requester_tz="Europe/Berlin", count=2)
    # Bob's 08:00 in Los Angeles is 17:00 in Berlin, when the requester's default day (09-17 Berlin) has ended.
    assert slots == []
    bob_early = Schedule("bob@x.com", timezone="America/Los_Angeles", work_days=(0, 1, 2, 3, 4), work_start=(6, 0),
                         work_end=(17, 0))
    slots = free_slots([me, bob_early], duration=timedelta(minutes=30), after=at(0, 8), until=at(3, 0),
                       requester_tz="Europe/Berlin", count=2)
    assert slots == [at(0, 6, tz=la).astimezone(BERLIN), at(0, 6, 30, tz=la).astimezone(BERLIN)]
    assert slots[0].astimezone(BERLIN).hour == 15


def test_weekends_are_not_offered_by_default() -> None:
    slots = free_slots([Schedule("a@x.com")], duration=timedelta(hours=1), after=at(4, 16, 30), until=at(8, 0),
                       requester_tz="Europe/Berlin", count=1)
    assert slots == [at(7, 9)]  # Friday 16:30 has no hour left; Saturday and Sunday are skipped


def test_search_window_reads_the_requests_words() -> None:
    wednesday = at(2, 11)
    assert search_window("find 30 minutes with a@x.com this week", wednesday, "Europe/Berlin") == (wednesday, at(5, 0))
    assert search_window("find 30 minutes with a@x.com next week", wednesday, "Europe/Berlin") == (at(7, 0), at(12, 0))
    assert search_window("find an hour with a@x.com tomorrow", wednesday, "Europe/Berlin") == (at(3, 0), at(4, 0))
    assert search_window("find 30 minutes with a@x.com this week", at(5, 11), "Europe/Berlin") == (at(7, 0), at(12, 0))


def test_the_local_calendar_answers_free_busy_from_its_own_events(tmp_path: Path) -> None:
    cal = LocalCalendar(f"sqlite:///{tmp_path / 'state.sqlite'}", tmp_path / "ics")
    now = at(0, 8)
    one = CalendarCreateArgs.model_validate({"title": "Review", "start": at(0, 10), "duration_minutes": 60,
                                             "timezone": "Europe/Berlin", "attendees": ["bob@x.com"]},
                                            context={"now": now})
    series = CalendarCreateArgs.model_validate({"title": "Standup", "start": at(0, 9), "duration_minutes": 15,
                                                "timezone": "Europe/Berlin", "recurrence": "FREQ=DAILY"},
                                               context={"now": now})
    cal.create(one, event_id="aaaaaaaaaa", organizer_email="alice@x.com")
    cal.create(series, event_id="bbbbbbbbbb", organizer_email="carol@x.com")
    alice, bob, carol = cal.busy(["alice@x.com", "BOB@x.com", "carol@x.com"], at(1, 0), at(2, 0))
    assert alice.busy == () and bob.busy == ()  # Monday's review is outside Tuesday
    assert [(b.start, b.end) for b in carol.busy] == [(at(1, 9), at(1, 9, 15))]  # the series' Tuesday occurrence
    proposal = CalendarCreateArgs.model_validate({"title": "Sync", "start": at(0, 10, 30), "duration_minutes": 30,
                                                  "timezone": "Europe/Berlin", "attendees": ["bob@x.com"]},
                                                 context={"now": now})
    checked = with_availability(proposal, cal, requester_email="carol@x.com", requester_tz="Europe/Berlin")
    assert checked.busy == ["bob@x.com"] and checked.free_slots[0] == at(0, 11)
    free = with_availability(proposal.at(at(0, 14)), cal, requester_email="carol@x.com", requester_tz="Europe/Berlin")
    assert free.busy == [] and free.free_slots == [] and free.availability == "everyone is free then"
    cal.close()


def test_a_time_in_utc_is_compared_as_the_same_instant() -> None:
    alice = Schedule("a@x.com", (BusyInterval(at(0, 10).astimezone(timezone.utc), at(0, 11).astimezone(timezone.utc)),))
    assert busy_at([alice], at(0, 10, 30), at(0, 10, 45)) == ["a@x.com"]


def test_a_choice_button_books_that_slot_and_a_forged_choice_books_nothing(tmp_path: Path) -> None:
    from agent.models import PendingAction, Turn, idempotency_key
    from app.actions import ActionService
    from tests.helpers import public_viewer
    from state import StateStore
    from tools.base import ToolRegistry
    from tools.calendar import CalendarCreate

    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    cal = LocalCalendar(f"sqlite:///{tmp_path / 'state.sqlite'}", tmp_path / "ics")
    tools = ToolRegistry()
    tools.register(CalendarCreate(cal))
    service = ActionService(store, tools)
    start = (datetime.now(BERLIN) + timedelta(days=2)).replace(hour=10, minute=0, second=0, microsecond=0)
    args = CalendarCreateArgs.model_validate({"title": "Sync", "start": start, "duration_minutes": 30,
                                              "timezone": "Europe/Berlin", "attendees": ["bob@x.com"],
                                              "busy": ["bob@x.com"],
                                              "free_slots": [start + timedelta(hours=1), start + timedelta(hours=2)]})
    turn = Turn(viewer=public_viewer(), text="book a sync", platform="slack", user_id="U1", channel_id="C1",
                message_id="1.1")
    for n, forged in enumerate(("#x", "#7")):
        key = idempotency_key("choice", str(n))
        service.propose(PendingAction("calendar.create", args.model_dump(mode="json"), key, "Sync"), turn)
        out = service.handle_button(f"action_confirm:{key}{forged}", f"{key}{forged}", "U1")
        assert out.status in {"not_found", "failed"} and cal.events() == []
    key = idempotency_key("choice", "ok")
    service.propose(PendingAction("calendar.create", args.model_dump(mode="json"), key, "Sync"), turn)
    done = service.handle_button(f"action_confirm:{key}#1", f"{key}#1", "U1")
    assert done.status == "done" and [e["start"] for e in cal.events()] == [start + timedelta(hours=2)]
    assert service.handle_button(f"action_confirm:{key}#0", f"{key}#0", "U1").status == "already_done"
    assert len(cal.events()) == 1
    cal.close()
    store.close()
