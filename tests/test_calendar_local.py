"""``calendar.create``'s argument model and the embedded calendar backend.

The model refuses what cannot be booked (a past start, an end before the start, lengths outside
5 min-8 h, bad addresses, unknown zones, an end and a length that disagree) and fills the missing
one of end and length. The local calendar keeps events in its own table of the state database
(SQLite here), once per idempotency key even under concurrent inserts, and writes an RFC 5545
``.ics`` per event that ``icalendar`` reads back with the zone, attendees and organizer. A series'
``recurrence`` is stored in normal form, nonsense rules are refused with what is wrong, the ``.ics``
carries the ``RRULE``, and a table made before series existed gains the column.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import icalendar
import pytest
from pydantic import ValidationError

from agent.models import idempotency_key
from state import StateStore
from tools.base import ToolContext, ToolRegistry
from tools.calendar import CalendarCreate, CalendarCreateArgs
from tools.calendar.local import LocalCalendar

BERLIN = ZoneInfo("Europe/Berlin")


def _start(days: int = 2, hour: int = 15) -> datetime:
    return (datetime.now(BERLIN) + timedelta(days=days)).replace(hour=hour, minute=0, second=0, microsecond=0)


def _args(**kw) -> CalendarCreateArgs:
    raw = {"title": "Release review", "start": _start(), "duration_minutes": 30, "attendees": ["Alice@Example.com"],
           "timezone": "Europe/Berlin", "description": "Quarterly release review"}
    raw.update(kw)
    return CalendarCreateArgs.model_validate(raw)


# -- the argument model -----------------------------------------------------------------------------

def test_valid_args_fill_the_end_and_normalise_attendees() -> None:
    a = _args(attendees=["Alice@Example.com", "alice@example.com", "<bob@example.com>"])
    assert a.end == a.start + timedelta(minutes=30)
    assert a.attendees == ["alice@example.com", "bob@example.com"]
    b = _args(duration_minutes=None, end=_start() + timedelta(minutes=45))
    assert b.duration_minutes == 45
    dumped = a.model_dump(mode="json")
    assert dumped["start"].endswith("+01:00") or dumped["start"].endswith("+02:00")
    assert CalendarCreateArgs.model_validate(dumped) == a  # the stored JSON validates back to the same event


@pytest.mark.parametrize("change, message", [
    ({"start": datetime.now(timezone.utc) - timedelta(minutes=1)}, "not in the future"),
    ({"duration_minutes": None, "end": _start() - timedelta(hours=1)}, "end must be after the start"),
    ({"duration_minutes": 2}, "greater than or equal to 5"),
    ({"duration_minutes": 9 * 60}, "less than or equal to 480"),
    ({"duration_minutes": None, "end": _start() + timedelta(hours=9)}, "between 5 and 480"),
    ({"duration_minutes": 30, "end": _start() + timedelta(minutes=45)}, "disagree"),
    ({"duration_minutes": None}, "either end or duration_minutes"),
    ({"attendees": ["not-an-address"]}, "not a valid e-mail"),
    ({"attendees": ["bob@localhost"]}, "not a valid e-mail"),
    ({"timezone": "Mars/Olympus"}, "IANA time zone"),
    ({"start": _start().replace(tzinfo=None)}, "UTC offset"),
    ({"title": "   "}, "title"),
])
def test_invalid_args_are_refused(change: dict, message: str) -> None:
    with pytest.raises(ValidationError) as exc:
        _args(**change)
    assert message in str(exc.value)


def test_start_in_the_future_is_judged_against_the_given_now() -> None:
    start = datetime(2025, 3, 13, 15, tzinfo=timezone.utc)
    ok = CalendarCreateArgs.model_validate({"title": "x", "start": start, "duration_minutes": 30},
                                           context={"now": datetime(2025, 3, 12, tzinfo=timezone.utc)})
    assert ok.end == start + timedelta(minutes=30)
    with pytest.raises(ValidationError):
        CalendarCreateArgs.model_validate({"title": "x", "start": start, "duration_minutes": 30},
                                          context={"now": datetime(2025, 3, 14, tzinfo=timezone.utc)})


def test_schema_is_ready_for_llm_tool_calling() -> None:
    reg = ToolRegistry()
    reg.register(CalendarCreate(lambda: None))  # never built: the schema needs no backend
    (schema,) = reg.schemas()
    assert schema["name"] == "calendar.create" and schema["side_effect"] is True
    props = schema["parameters"]["properties"]
    assert {"title", "start", "end", "duration_minutes", "attendees", "description", "location", "timezone",
            "video_conference"} <= set(props)
    assert set(schema["parameters"]["required"]) == {"title", "start"}


# -- the local calendar ---------------------------------------------------------------------------------

@pytest.fixture
def local(tmp_path: Path):
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")  # the calendar shares the state database
    cal = LocalCalendar(store.url, tmp_path / "calendar")
    yield cal
    cal.close()
    store.close()


def test_local_event_and_its_ics(local: LocalCalendar) -> None:
    key = idempotency_key("test", "local")
    args = _args(attendees=["alice@example.com", "bob@example.com"], location="Room 4B")
    ev = local.create(args, event_id=key, requester="U123", organizer_email="owner@example.com")
    assert ev.created and ev.backend == "local" and ev.event_id == key
    assert ev.link.startswith("file://") and ev.link.endswith(f"{key}.ics")
    row = local.get(key)
    assert row is not None and row["title"] == "Release review" and row["owner"] == "U123"
    assert row["start"] == args.start and row["attendees"] == ["alice@example.com", "bob@example.com"]

    cal = icalendar.Calendar.from_ical(local.ics_path(key).read_bytes())
    (vevent,) = cal.walk("VEVENT")
    assert str(vevent["UID"]) == f"{key}@chatops"
    assert str(vevent["SUMMARY"]) == "Release review" and str(vevent["LOCATION"]) == "Room 4B"
    dtstart = vevent.decoded("DTSTART")
    assert dtstart == args.start and str(dtstart.tzinfo) == "Europe/Berlin"
    assert vevent.decoded("DTEND") - dtstart == timedelta(minutes=30)
    attendees = vevent["ATTENDEE"] if isinstance(vevent["ATTENDEE"], list) else [vevent["ATTENDEE"]]
    assert sorted(str(a) for a in attendees) == ["mailto:alice@example.com", "mailto:bob@example.com"]
    assert str(vevent["ORGANIZER"]) == "mailto:owner@example.com"
    assert cal.walk("VTIMEZONE"), "the .ics carries the event's time zone definition"


def test_local_create_is_idempotent_by_key(local: LocalCalendar) -> None:
    key = idempotency_key("test", "again")
    first = local.create(_args(), event_id=key, requester="U1")
    second = local.create(_args(title="Changed title"), event_id=key, requester="U1")
    assert first.created and not second.created
    assert [e["title"] for e in local.events()] == ["Release review"]


def test_concurrent_inserts_of_one_key_make_one_event(local: LocalCalendar) -> None:
    key = idempotency_key("test", "race")
    results = []
    barrier = threading.Barrier(8)

    def insert() -> None:
        barrier.wait()
        results.append(local.create(_args(), event_id=key, requester="U1"))

    threads = [threading.Thread(target=insert) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r.created for r in results) == 1
    assert len(local.events()) == 1


def test_the_tool_needs_a_confirmed_actions_key(local: LocalCalendar) -> None:
    tool = CalendarCreate(local)
    for bad in ("", "NOT-BASE32HEX!"):
        res = tool.execute(_args(), bad, ToolContext(user_id="U1"))
        assert not res.ok and not res.retryable and "nothing was booked" in res.message
    assert local.events() == []
    key = idempotency_key("ok")
    res = tool.execute(_args(), key, ToolContext(user_id="U1", user_email="ann@example.com"))
    assert res.ok and res.details["created"] and local.get(key)["organizer_email"] == "ann@example.com"
    assert res.links == (("Open the .ics", local.ics_path(key).resolve().as_uri()),)
    again = tool.execute(_args(), key, ToolContext(user_id="U1"))
    assert again.ok and again.details["created"] is False and len(local.events()) == 1


def test_the_registry_never_calls_it_directly(local: LocalCalendar) -> None:
    reg = ToolRegistry()
    reg.register(CalendarCreate(local))
    with pytest.raises(ValueError, match="side effects"):
        reg.call("calendar.create", _args(), ToolContext(user_id="U1", extra={"idempotency_key": idempotency_key("x")}))
    assert local.events() == []


# -- series -----------------------------------------------------------------------------------------------

def _monday_9() -> datetime:
    now = datetime.now(BERLIN)
    return (now + timedelta(days=7 - now.weekday())).replace(hour=9, minute=0, second=0, microsecond=0)


def test_a_series_is_stored_in_normal_form() -> None:
    a = _args(start=_monday_9(), duration_minutes=25, recurrence="RRULE:FREQ=WEEKLY;BYDAY=MO;UNTIL=20991231")
    assert a.recurrence == "FREQ=WEEKLY;UNTIL=20991231T225959Z;BYDAY=MO"  # the end of that day in Berlin, in UTC
    assert a.describe_recurrence() == "every Monday, until Thu 31 Dec 2099"
    assert CalendarCreateArgs.model_validate(a.model_dump(mode="json")) == a
    assert _args(recurrence="  ").recurrence is None
    assert "recurrence" in CalendarCreateArgs.model_json_schema()["properties"]


@pytest.mark.parametrize("rule, message", [
    ("FREQ=YEARLY", "DAILY, WEEKLY or MONTHLY"),
    ("FREQ=WEEKLY;BYDAY=TU", "not an occurrence of the series"),  # the start is a Monday
    ("FREQ=WEEKLY;BYHOUR=9", "only FREQ, INTERVAL, BYDAY"),
    ("FREQ=WEEKLY;COUNT=3;UNTIL=20991231", "COUNT or with UNTIL, not both"),
    ("FREQ=WEEKLY;UNTIL=20200101", "before its first event"),
    ("FREQ=WEEKLY;INTERVAL=0", "INTERVAL must be between 1 and 52"),
    ("FREQ=WEEKLY;COUNT=0", "COUNT must be between 1 and 500"),
    ("FREQ=WEEKLY;BYDAY=1MO", "only fits a MONTHLY series"),
    ("FREQ=MONTHLY;BYMONTHDAY=40", "BYMONTHDAY must be 1-31"),
    ("FREQ=WEEKLY;BYDAY=XX", "not an RFC 5545 RRULE"),
    ("every monday", "not an RFC 5545 RRULE"),
])
def test_nonsense_series_are_refused(rule: str, message: str) -> None:
    with pytest.raises(ValidationError) as exc:
        _args(start=_monday_9(), recurrence=rule)
    assert message in str(exc.value)


def test_a_series_lands_in_the_ics_as_an_rrule(local: LocalCalendar) -> None:
    key = idempotency_key("test", "series")
    args = _args(start=_monday_9(), duration_minutes=25, recurrence="FREQ=WEEKLY;INTERVAL=2;BYDAY=MO;COUNT=6")
    ev = local.create(args, event_id=key, requester="U1")
    assert ev.created and local.get(key)["recurrence"] == "FREQ=WEEKLY;COUNT=6;INTERVAL=2;BYDAY=MO"
    (vevent,) = icalendar.Calendar.from_ical(local.ics_path(key).read_bytes()).walk("VEVENT")
    rrule = vevent["RRULE"]
    assert rrule["FREQ"] == ["WEEKLY"] and rrule["INTERVAL"] == [2] and rrule["COUNT"] == [6]
    assert [str(d) for d in rrule["BYDAY"]] == ["MO"]
    assert vevent.decoded("DTSTART") == args.start
    single = local.create(_args(), event_id=idempotency_key("test", "single"), requester="U1")
    (plain,) = icalendar.Calendar.from_ical(local.ics_path(single.event_id).read_bytes()).walk("VEVENT")
    assert "RRULE" not in plain


def test_a_table_from_before_series_gains_the_column(tmp_path: Path) -> None:
    import sqlalchemy as sa

    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # the table as the first version made it, with one event in it
        conn.execute(sa.text(
            "CREATE TABLE calendar_events (id VARCHAR(1024) PRIMARY KEY, owner VARCHAR(200) NOT NULL, "
            "organizer_email VARCHAR(320) NOT NULL, title VARCHAR(200) NOT NULL, start DATETIME NOT NULL, "
            "\"end\" DATETIME NOT NULL, timezone VARCHAR(64) NOT NULL, attendees TEXT NOT NULL, "
            "description TEXT NOT NULL, location VARCHAR(500) NOT NULL, video_conference BOOLEAN NOT NULL, "
            "created_at DATETIME NOT NULL)"))
        conn.execute(sa.text(
            "INSERT INTO calendar_events VALUES ('old1', 'U1', '', 'Old', '2030-01-01 09:00:00', "
            "'2030-01-01 09:30:00', 'UTC', '[]', '', '', 0, '2025-01-01 00:00:00')"))
    engine.dispose()
    cal = LocalCalendar(url, tmp_path / "calendar")
    try:
        assert cal.get("old1")["recurrence"] == ""
        key = idempotency_key("test", "after-upgrade")
        cal.create(_args(start=_monday_9(), recurrence="FREQ=WEEKLY;BYDAY=MO"), event_id=key, requester="U1")
        assert cal.get(key)["recurrence"] == "FREQ=WEEKLY;BYDAY=MO"
    finally:
        cal.close()
