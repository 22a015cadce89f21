"""Meeting requests read without an LLM (:func:`tools.calendar.extract.extract_event`), on a table of
real phrasings: times and dates (relative to the message time, future preferred, in the
requester's zone), named zones, durations, e-mails and Slack mentions, titles, and the parts that
are missing or vague, which must produce one clarifying question instead of a guess.

The message time is fixed: Wednesday 12 March 2025, 15:00 UTC (16:00 in Berlin, the requester's
zone unless a row says otherwise).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tools.calendar.extract import extract_event, parse_duration, slack_mentions

NOW = datetime(2025, 3, 12, 15, 0, tzinfo=timezone.utc)  # a Wednesday
ZONE = "Europe/Berlin"
MENTIONS = {"U0123ABC": "eve@example.com"}

# text, title, local start (ISO, in the event's zone), duration (None = not given), attendees, zone
COMPLETE = [
    ("set up a 30 min release review with alice@example.com tomorrow at 3pm",
     "Release review", "2025-03-13T15:00:00+01:00", 30, ["alice@example.com"], ZONE),
    ("can you book an hour w/ bob@example.com and carol@example.com on friday 10am for the incident retro",
     "Incident retro", "2025-03-14T10:00:00+01:00", 60, ["bob@example.com", "carol@example.com"], ZONE),
    ("set up a 45 min design review with dana@example.com tomorrow at 2pm",
     "Design review", "2025-03-13T14:00:00+01:00", 45, ["dana@example.com"], ZONE),
    ("book a release sync with bob@example.com on Friday at 10",
     "Release sync", "2025-03-14T10:00:00+01:00", None, ["bob@example.com"], ZONE),
    ("schedule a 1.5h planning session with <@U0123ABC> next tuesday 2pm",
     "Planning session", "2025-03-18T14:00:00+01:00", 90, ["eve@example.com"], ZONE),
    ("book a 45-minute interview with candidate@example.org thursday at 11am in the Everest room",
     "Interview", "2025-03-13T11:00:00+01:00", 45, ["candidate@example.org"], ZONE),
    ("set up a review with a@example.com friday 2-3pm PT",
     "Review", "2025-03-14T14:00:00-07:00", 60, ["a@example.com"], "America/Los_Angeles"),
    ("book a workshop with a@example.com on March 20 from 2 to 3:30pm",
     "Workshop", "2025-03-20T14:00:00+01:00", 90, ["a@example.com"], ZONE),
    ("schedule a coffee chat with a@example.com in 30 minutes",
     "Coffee chat", "2025-03-12T16:30:00+01:00", None, ["a@example.com"], ZONE),
    ("schedule a 90 minute sync with a@example.com at 14:00 tomorrow",
     "Sync", "2025-03-13T14:00:00+01:00", 90, ["a@example.com"], ZONE),
    ("book a retro with team@example.com at 4:30pm on 3/21",
     "Retro", "2025-03-21T16:30:00+01:00", None, ["team@example.com"], ZONE),
    ("set up a workshop with a@example.com tomorrow from 9am to 11am",
     "Workshop", "2025-03-13T09:00:00+01:00", 120, ["a@example.com"], ZONE),
    ("book a call with a@example.com tomorrow at 3pm until 4:15pm",
     "Call", "2025-03-13T15:00:00+01:00", 75, ["a@example.com"], ZONE),
    ("set up a quick sync with <mailto:a@example.com|a@example.com> tomorrow at 11",
     "Sync", "2025-03-13T11:00:00+01:00", None, ["a@example.com"], ZONE),
    ("schedule an hour and a half offsite planning with a@example.com on monday at 10",
     "Offsite planning", "2025-03-17T10:00:00+01:00", 90, ["a@example.com"], ZONE),
    ("book a 1h30 review with a@example.com tomorrow at 3pm UTC",
     "Review", "2025-03-13T15:00:00+00:00", 90, ["a@example.com"], "UTC"),
    ("set up a 15-min check-in with a@example.com tomorrow at 9:30",
     "Check-in", "2025-03-13T09:30:00+01:00", 15, ["a@example.com"], ZONE),
    ("book a 1:1 with <@U0123ABC> the day after tomorrow at 4",
     "1:1", "2025-03-14T16:00:00+01:00", None, ["eve@example.com"], ZONE),
    # a time alone: the next time it comes round (15:00 has passed at 16:00 Berlin; 17:00 has not)
    ("book a sync with a@example.com at 3pm", "Sync", "2025-03-13T15:00:00+01:00", None, ["a@example.com"], ZONE),
    ("book a sync with a@example.com at 5pm", "Sync", "2025-03-12T17:00:00+01:00", None, ["a@example.com"], ZONE),
    ("set up an interview with a@example.com at 10am Pacific time on friday",
     "Interview", "2025-03-14T10:00:00-07:00", None, ["a@example.com"], "America/Los_Angeles"),
    ("book a sync with a@example.com tomorrow at 3pm UTC+2",
     "Sync", "2025-03-13T15:00:00+02:00", None, ["a@example.com"], "Etc/GMT-2"),
    ("set up a 2 hr design review with a@example.com, b@example.com on wed at 1pm",
     "Design review", "2025-03-19T13:00:00+01:00", 120, ["a@example.com", "b@example.com"], ZONE),
    ("book 20 mins with a@example.com tmrw at 10:15 to go over the launch checklist",
     "Launch checklist", "2025-03-13T10:15:00+01:00", 20, ["a@example.com"], ZONE),
    ("set up a meeting called Budget planning with a@example.com tomorrow at 10",
     "Budget planning", "2025-03-13T10:00:00+01:00", None, ["a@example.com"], ZONE),
    ("book an incident postmortem with <@U0123ABC> and A@Example.com on 2025-03-18 at 09:00",
     "Incident postmortem", "2025-03-18T09:00:00+01:00", None, ["eve@example.com", "a@example.com"], ZONE),
    ("book a standup with a@example.com tonight at 8",
     "Standup", "2025-03-12T20:00:00+01:00", None, ["a@example.com"], ZONE),
    ("book half an hour with a@example.com tomorrow at noon about the budget",
     "Budget", "2025-03-13T12:00:00+01:00", 30, ["a@example.com"], ZONE),
    ("put an hour-long kickoff with a@example.com on the 20th at 9",
     "Kickoff", "2025-03-20T09:00:00+01:00", 60, ["a@example.com"], ZONE),
    ('book "Q3 roadmap" with a@example.com and b@example.com on 2025-03-20 at 15:00 Europe/Lisbon',
     "Q3 roadmap", "2025-03-20T15:00:00+00:00", None, ["a@example.com", "b@example.com"], "Europe/Lisbon"),
    ("book a call with a@example.com at 3", "Call", "2025-03-13T15:00:00+01:00", None, ["a@example.com"], ZONE),
]


@pytest.mark.parametrize("text, title, start, duration, attendees, zone", COMPLETE, ids=[c[0][:48] for c in COMPLETE])
def test_complete_requests(text: str, title: str, start: str, duration: int | None, attendees: list[str],
                           zone: str) -> None:
    d = extract_event(text, now=NOW, timezone_name=ZONE, resolve_mention=MENTIONS)
    assert d.complete, d.clarification()
    assert d.clarification() is None
    assert d.title == title
    assert d.start is not None and d.start.isoformat() == start
    assert d.duration_minutes == duration
    assert d.attendees == attendees
    assert d.timezone == zone
    assert d.zone_named == (zone != ZONE)


@pytest.mark.parametrize("text, fragment", [
    ("book a demo with a@example.com next week", "next week"),
    ("book a sync with a@example.com tomorrow", "a start time tomorrow"),
    ("schedule a retro with a@example.com tomorrow afternoon", "afternoon"),
    ("set up a meeting with a@example.com", "a day and a time"),
    ("book a call with bob tomorrow at 3pm", "\u201cbob\u201d"),
    ("schedule a sync with <@U0999XYZ> tomorrow at 9:30", "<@U0999XYZ>"),
    ("book a meeting with a@example.com yesterday at 3pm", "already passed"),
    ("book a 10 hour workshop with a@example.com tomorrow at 9am", "600 minutes"),
    ("set up a weekly sync with a@example.com every monday at 10", "not a series"),
    ("schedule a meeting with everyone tomorrow at 10", "\u201ceveryone\u201d"),
    ("set up a review with a@example.com sometime soon", "not specific enough"),
    ("book a review with a@example.com on feb 30 at 3pm", "I can't read \u201cfeb 30\u201d as a date) at 3pm"),
])
def test_missing_or_vague_parts_ask_one_question(text: str, fragment: str) -> None:
    d = extract_event(text, now=NOW, timezone_name=ZONE, resolve_mention=MENTIONS)
    assert not d.complete
    question = d.clarification()
    assert question is not None and fragment in question
    assert question.count("?") == 1  # one question, not a form
    assert "Nothing has been booked" in question


def test_missing_time_is_not_guessed() -> None:
    d = extract_event("book a sync with a@example.com on friday", now=NOW, timezone_name=ZONE)
    assert d.start is None and d.missing == ["time"] and d.date_phrase.lower().endswith("friday")


def test_relative_words_count_in_the_requesters_zone() -> None:
    # 15:00 UTC on Wednesday is already Thursday 00:00 in Tokyo: "tomorrow" is Friday there.
    tokyo = extract_event("book a sync with a@example.com tomorrow at 9am", now=NOW, timezone_name="Asia/Tokyo")
    assert tokyo.start is not None and tokyo.start.isoformat() == "2025-03-14T09:00:00+09:00"
    ny = extract_event("book a sync with a@example.com tomorrow at 9am", now=NOW, timezone_name="America/New_York")
    assert ny.start is not None and ny.start.isoformat() == "2025-03-13T09:00:00-04:00"  # EDT since 9 March


def test_unknown_zone_falls_back_to_utc() -> None:
    d = extract_event("book a sync with a@example.com tomorrow at 9am", now=NOW, timezone_name="Mars/Olympus")
    assert d.timezone == "UTC" and d.start is not None and d.start.isoformat() == "2025-03-13T09:00:00+00:00"


def test_mentions_resolve_through_a_callback_and_failures_stay_unresolved() -> None:
    asked: list[str] = []

    def resolver(uid: str) -> str | None:
        asked.append(uid)
        if uid == "UBROKEN":
            raise RuntimeError("users.info failed")
        return {"U1AAA": "ann@example.com"}.get(uid)

    d = extract_event("set up a sync with <@U1AAA>, <@U2BBB|bert> and <@UBROKEN> tomorrow at 10",
                      now=NOW, timezone_name=ZONE, resolve_mention=resolver)
    assert asked == ["U1AAA", "U2BBB", "UBROKEN"]
    assert d.attendees == ["ann@example.com"]
    assert d.unresolved_mentions == ["U2BBB", "UBROKEN"]
    assert slack_mentions("hi <@U1AAA> and <@U2BBB|bert>, <@U1AAA>") == ["U1AAA", "U2BBB"]


def test_video_and_room() -> None:
    d = extract_event("set up a video call with a@example.com tomorrow at 10 in room 4B", now=NOW, timezone_name=ZONE)
    assert d.video_conference and d.location == "room 4B" and d.complete
    plain = extract_event("book a call with a@example.com tomorrow at 10", now=NOW, timezone_name=ZONE)
    assert not plain.video_conference and plain.location == ""


@pytest.mark.parametrize("text, minutes", [
    ("30 min", 30), ("a 45-minute review", 45), ("an hour", 60), ("1.5h", 90), ("1,5 hours", 90),
    ("90 mins", 90), ("half an hour", 30), ("a half-hour sync", 30), ("an hour and a half", 90),
    ("1h30", 90), ("1 hr 15 min", 75), ("2 hours", 120), ("an hour-long chat", 60), ("fifteen minutes", 15),
    ("in 30 minutes", None), ("at 3pm", None),
])
def test_parse_duration(text: str, minutes: int | None) -> None:
    assert parse_duration(text) == minutes
