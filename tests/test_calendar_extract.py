"""Meeting requests read without an LLM (:func:`tools.calendar.extract.extract_event`), on a table of
real phrasings: times and dates (relative to the message time, future preferred, in the
requester's zone), named zones, durations, e-mails and unresolved ``@names`` (the text is plain: the
adapters resolve mentions to e-mail addresses before), titles, and the parts that
are missing or vague, which must produce one clarifying question instead of a guess; and requests
as people phrase them (series as RFC 5545 rules, a weekday, a day of the month or a time alone
always meaning the next one, abbreviations, ``w/``, zones, ranges), with the series' preview.

The message time is fixed: Wednesday 12 March 2025, 15:00 UTC (16:00 in Berlin, the requester's
zone unless a row says otherwise).
"""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from tools.calendar.extract import at_names, extract_event, parse_duration
from tools.calendar.propose import event_lines, format_when, propose_event, summary_line
from tools.calendar.recurrence import describe_rrule

NOW = datetime(2025, 3, 12, 15, 0, tzinfo=timezone.utc)  # a Wednesday
ZONE = "Europe/Berlin"

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
    ("schedule a 1.5h planning session with eve@example.com next tuesday 2pm",
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
    ("set up a quick sync with a@example.com tomorrow at 11",
     "Sync", "2025-03-13T11:00:00+01:00", None, ["a@example.com"], ZONE),
    ("schedule an hour and a half offsite planning with a@example.com on monday at 10",
     "Offsite planning", "2025-03-17T10:00:00+01:00", 90, ["a@example.com"], ZONE),
    ("book a 1h30 review with a@example.com tomorrow at 3pm UTC",
     "Review", "2025-03-13T15:00:00+00:00", 90, ["a@example.com"], "UTC"),
    ("set up a 15-min check-in with a@example.com tomorrow at 9:30",
     "Check-in", "2025-03-13T09:30:00+01:00", 15, ["a@example.com"], ZONE),
    ("book a 1:1 with eve@example.com the day after tomorrow at 4",
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
    ("book an incident postmortem with eve@example.com and A@Example.com on 2025-03-18 at 09:00",
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
    d = extract_event(text, now=NOW, timezone_name=ZONE)
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
    ("schedule a sync with @Dana tomorrow at 9:30", "\u201c@Dana\u201d (I could not look it up)"),
    ("book a meeting with a@example.com yesterday at 3pm", "already passed"),
    ("book a 10 hour workshop with a@example.com tomorrow at 9am", "600 minutes"),
    ("set up a recurring sync with a@example.com on monday at 10", "how often it repeats"),
    ("schedule a meeting with everyone tomorrow at 10", "\u201ceveryone\u201d"),
    ("set up a review with a@example.com sometime soon", "not specific enough"),
    ("book a review with a@example.com on feb 30 at 3pm", "I can't read \u201cfeb 30\u201d as a date) at 3pm"),
])
def test_missing_or_vague_parts_ask_one_question(text: str, fragment: str) -> None:
    d = extract_event(text, now=NOW, timezone_name=ZONE)
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


def test_plain_text_addresses_and_unresolved_at_names() -> None:
    """Mentions arrive resolved (an e-mail address) or as ``@Name``; only the addresses become attendees,
    and every ``@Name`` is asked about (nobody could look up its address)."""
    d = extract_event("set up a sync with ann@example.com, @Bert and @here tomorrow at 10", now=NOW, timezone_name=ZONE)
    assert d.attendees == ["ann@example.com"] and d.unknown_people == ["@Bert", "@here"] and not d.complete
    question = d.clarification()
    assert question is not None and "\u201c@Bert\u201d" in question and "\u201c@here\u201d" in question
    assert at_names("hi @Bert, @here and bob@example.com @ 3pm, @Bert") == ["@Bert", "@here"]
    ok = extract_event("set up a sync with ann@example.com tomorrow at 10", now=NOW, timezone_name=ZONE)
    assert ok.complete and ok.attendees == ["ann@example.com"] and ok.title == "Sync"


@pytest.mark.parametrize(("text", "video"), [
    ("book a sync with a@example.com tomorrow at 10 on teams", True),
    ("schedule a teams meeting with a@example.com tomorrow at 10", True),
    ("book a review with a@example.com tomorrow at 10 with a teams link", True),
    ("book a sync about the teams roster with a@example.com tomorrow at 10", False),
])
def test_a_teams_meeting_asks_for_a_video_call(text: str, video: bool) -> None:
    assert extract_event(text, now=NOW, timezone_name=ZONE).video_conference is video


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


# -- requests as people phrase them: series, and days that always mean the next one ------------------------
# The message time here is Thursday 19 November 2026, 15:00 UTC (16:00 in Berlin): the 14th of this
# month has passed, Monday is the 23rd, and a time of day before 16:00 has passed today.

LATER = datetime(2026, 11, 19, 15, 0, tzinfo=timezone.utc)
WEEKDAYS = "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"

# text, title, local start, duration (None = not given), attendees, zone, recurrence (None = one event)
PHRASED = [
    # the two
    ("set up a weekly 1:1 with bob@x.com on mondays at 9", "1:1", "2026-11-23T09:00:00+01:00", None, ["bob@x.com"],
     ZONE, "FREQ=WEEKLY;BYDAY=MO"),
    ("book a session with a@example.com on the 14th at 10am", "Session", "2026-12-14T10:00:00+01:00", None,
     ["a@example.com"], ZONE, None),
    # the series the brief lists
    ("book a sync with a@example.com every other tuesday at 10", "Sync", "2026-11-24T10:00:00+01:00", None,
     ["a@example.com"], ZONE, "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU"),
    ("every weekday at 9:30 standup with team@example.com, book it for 15 min", "Standup",
     "2026-11-20T09:30:00+01:00", 15, ["team@example.com"], ZONE, WEEKDAYS),
    ("book a review with a@example.com monthly on the 1st at 11am", "Review", "2026-12-01T11:00:00+01:00", None,
     ["a@example.com"], ZONE, "FREQ=MONTHLY;BYMONTHDAY=1"),
    ("set up a biweekly sync with a@example.com on thursdays at 2pm", "Sync", "2026-11-26T14:00:00+01:00", None,
     ["a@example.com"], ZONE, "FREQ=WEEKLY;INTERVAL=2;BYDAY=TH"),
    ("schedule a sync w/ a@example.com each week on friday at 10", "Sync", "2026-11-20T10:00:00+01:00", None,
     ["a@example.com"], ZONE, "FREQ=WEEKLY;BYDAY=FR"),
    # twenty-odd more
    ("book a 1:1 w/ bob@example.com tmrw at 4pm for 30m", "1:1", "2026-11-20T16:00:00+01:00", 30,
     ["bob@example.com"], ZONE, None),
    ("book a 1h review with a@example.com next thursday at 2pm", "Review", "2026-11-26T14:00:00+01:00", 60,
     ["a@example.com"], ZONE, None),
    ("book a demo with a@example.com in two weeks at 10am", "Demo", "2026-12-03T10:00:00+01:00", None,
     ["a@example.com"], ZONE, None),
    ("book a call with a@example.com on thursday at 3pm CET", "Call", "2026-11-26T15:00:00+01:00", None,
     ["a@example.com"], ZONE, None),  # today's 15:00 has passed: next week's Thursday
    ("set up a call with a@example.com on friday 9am PT", "Call", "2026-11-20T09:00:00-08:00", None,
     ["a@example.com"], "America/Los_Angeles", None),
    ("book a sync with a@example.com on thursday 14:00-14:45", "Sync", "2026-11-26T14:00:00+01:00", 45,
     ["a@example.com"], ZONE, None),
    ("book a design review with a@example.com on the 20th 2-3pm", "Design review", "2026-11-20T14:00:00+01:00", 60,
     ["a@example.com"], ZONE, None),
    ("book a sync with a@example.com on thursday at 6pm", "Sync", "2026-11-19T18:00:00+01:00", None,
     ["a@example.com"], ZONE, None),  # later today is the next Thursday 18:00
    ("set up a coffee chat w/ a@example.com on the 19th at 5pm", "Coffee chat", "2026-11-19T17:00:00+01:00", None,
     ["a@example.com"], ZONE, None),
    ("book a sync with a@example.com on the 19th at 3pm", "Sync", "2026-12-19T15:00:00+01:00", None,
     ["a@example.com"], ZONE, None),  # today's 15:00 has passed: next month's 19th
    ("book a 2h offsite planning with a@example.com on monday 10-12", "Offsite planning",
     "2026-11-23T10:00:00+01:00", 120, ["a@example.com"], ZONE, None),
    ("book a sync with a@example.com fri 9:30 UTC", "Sync", "2026-11-20T09:30:00+00:00", None, ["a@example.com"],
     "UTC", None),
    ("book a planning session with a@example.com on the first monday of every month at 10", "Planning session",
     "2026-12-07T10:00:00+01:00", None, ["a@example.com"], ZONE, "FREQ=MONTHLY;BYDAY=1MO"),
    ("book a monthly retro with a@example.com on the last friday of the month at 4pm", "Retro",
     "2026-11-27T16:00:00+01:00", None, ["a@example.com"], ZONE, "FREQ=MONTHLY;BYDAY=-1FR"),
    ("book a retro with a@example.com every 2 weeks on wed at 4pm for 8 weeks", "Retro", "2026-11-25T16:00:00+01:00",
     None, ["a@example.com"], ZONE, "FREQ=WEEKLY;UNTIL=20270119T225959Z;INTERVAL=2;BYDAY=WE"),
    ("book a daily standup with team@example.com at 9:15 for 15m", "Standup", "2026-11-20T09:15:00+01:00", 15,
     ["team@example.com"], ZONE, "FREQ=DAILY"),
    ("book a weekly sync with a@example.com tomorrow at 10", "Sync", "2026-11-20T10:00:00+01:00", None,
     ["a@example.com"], ZONE, "FREQ=WEEKLY;BYDAY=FR"),
    ("book a sync with a@example.com every monday at 9 starting dec 7", "Sync", "2026-12-07T09:00:00+01:00", None,
     ["a@example.com"], ZONE, "FREQ=WEEKLY;BYDAY=MO"),
    ("book a weekly sync with a@example.com on tue and thu at 10, 6 times", "Sync", "2026-11-24T10:00:00+01:00",
     None, ["a@example.com"], ZONE, "FREQ=WEEKLY;COUNT=6;BYDAY=TU,TH"),
    ("schedule a 1:1 with a@example.com every other week on monday at 11", "1:1", "2026-11-23T11:00:00+01:00", None,
     ["a@example.com"], ZONE, "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO"),
    ("set up a weekly sync with a@example.com every tuesday and thursday at 10 starting next week", "Sync",
     "2026-11-24T10:00:00+01:00", None, ["a@example.com"], ZONE, "FREQ=WEEKLY;BYDAY=TU,TH"),
    ("schedule a quarterly review with a@example.com on the 15th at 2pm", "Review", "2026-12-15T14:00:00+01:00",
     None, ["a@example.com"], ZONE, "FREQ=MONTHLY;INTERVAL=3;BYMONTHDAY=15"),
    ("book a fortnightly catch-up with a@example.com on wednesdays 15:00-15:30", "Catch-up",
     "2026-11-25T15:00:00+01:00", 30, ["a@example.com"], ZONE, "FREQ=WEEKLY;INTERVAL=2;BYDAY=WE"),
    ("book an all-hands with team@example.com the 1st of every month at 9am ET", "All-hands",
     "2026-12-01T09:00:00-05:00", None, ["team@example.com"], "America/New_York", "FREQ=MONTHLY;BYMONTHDAY=1"),
    ("book a standup with team@example.com mon-fri at 9:45 for 10 mins", "Standup", "2026-11-20T09:45:00+01:00", 10,
     ["team@example.com"], ZONE, WEEKDAYS),
    ("book a 1:1 with a@example.com every monday at 9am for 4 weeks", "1:1", "2026-11-23T09:00:00+01:00", None,
     ["a@example.com"], ZONE, "FREQ=WEEKLY;UNTIL=20261220T225959Z;BYDAY=MO"),
    ("book a sync with a@example.com every monday at 9 until dec 20", "Sync", "2026-11-23T09:00:00+01:00", None,
     ["a@example.com"], ZONE, "FREQ=WEEKLY;UNTIL=20261220T225959Z;BYDAY=MO"),
    ("book a standup with a@example.com every weekday at 9:30 through the end of the year", "Standup",
     "2026-11-20T09:30:00+01:00", None, ["a@example.com"], ZONE, "FREQ=WEEKLY;UNTIL=20261231T225959Z;BYDAY=MO,TU,WE,TH,FR"),
]


@pytest.mark.parametrize("text, title, start, duration, attendees, zone, recurrence", PHRASED,
                         ids=[c[0][:56] for c in PHRASED])
def test_requests_as_people_phrase_them(text: str, title: str, start: str, duration: int | None,
                                        attendees: list[str], zone: str, recurrence: str | None) -> None:
    d = extract_event(text, now=LATER, timezone_name=ZONE)
    assert d.complete, d.clarification()
    assert d.start is not None and d.start.isoformat() == start
    assert d.start > LATER  # always the next one, never one that has passed
    assert (d.title, d.duration_minutes, d.attendees, d.timezone, d.recurrence) == (title, duration, attendees, zone,
                                                                                    recurrence)


@pytest.mark.parametrize("text, fragment", [
    ("book a sync with a@example.com next week sometime", "\u201cnext week\u201d is not specific enough"),
    ("book a recurring sync with a@example.com tomorrow at 10", "how often it repeats"),
    ("book a weekly sync with a@example.com at 10", "which day at 10"),
    ("book a monthly review with a@example.com at 3pm", "which day at 3pm"),
    ("book a weekly 1:1 with a@example.com on mondays", "a start time for the series"),
    ("book a daily standup with a@example.com", "a start time for the series (\u201cdaily\u201d)"),
    ("book a sync with a@example.com every monday at 9 until 2026-11-01", "before its first event"),
])
def test_vague_series_still_ask_one_question(text: str, fragment: str) -> None:
    d = extract_event(text, now=LATER, timezone_name=ZONE)
    question = d.clarification()
    assert not d.complete and question is not None and fragment in question and question.count("?") == 1


def test_a_series_request_becomes_a_previewed_series() -> None:
    p = propose_event("set up a weekly 1:1 with bob@x.com on mondays at 9 for 25 min", now=LATER, timezone_name=ZONE)
    assert p.args is not None and p.args.recurrence == "FREQ=WEEKLY;BYDAY=MO"
    assert format_when(p.args) == "every Monday, 09:00\u201309:25, starting Mon 23 Nov 2026 (Europe/Berlin)"
    assert "When: every Monday, 09:00\u201309:25, starting Mon 23 Nov 2026" in "\n".join(event_lines(p.args))
    assert summary_line(p.args).startswith("1:1, every Monday, 09:00\u201309:25")
    one = propose_event("book a session with a@example.com on the 14th at 10am", now=LATER, timezone_name=ZONE)
    assert one.args is not None and one.args.recurrence is None
    assert format_when(one.args) == "Mon 14 Dec 2026, 10:00\u201310:30 (Europe/Berlin)"


@pytest.mark.parametrize("rule, words", [
    ("FREQ=WEEKLY;BYDAY=MO", "every Monday"),
    ("FREQ=WEEKLY;INTERVAL=2;BYDAY=TU", "every other Tuesday"),
    ("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "every weekday"),
    ("FREQ=WEEKLY;INTERVAL=3;BYDAY=MO,TH", "every 3 weeks on Monday and Thursday"),
    ("FREQ=MONTHLY;BYMONTHDAY=1", "every month on the 1st"),
    ("FREQ=MONTHLY;BYDAY=-1FR", "every month on the last Friday"),
    ("FREQ=MONTHLY;INTERVAL=3;BYMONTHDAY=22", "every 3 months on the 22nd"),
    ("FREQ=DAILY;COUNT=5", "every day, 5 times"),
    ("FREQ=WEEKLY;BYDAY=MO;UNTIL=20261220T225959Z", "every Monday, until Sun 20 Dec 2026"),
])
def test_series_in_words(rule: str, words: str) -> None:
    assert describe_rrule(rule, datetime(2026, 11, 23, 9, tzinfo=ZoneInfo(ZONE))) == words


def test_a_series_end_follows_its_start_in_the_preview() -> None:
    p = propose_event("book a 1:1 with tom@example.com every monday at 9am for 4 weeks", now=LATER, timezone_name=ZONE)
    assert p.args is not None
    assert format_when(p.args) == ("every Monday, 09:00\u201309:30, starting Mon 23 Nov 2026, until Sun 20 Dec 2026 "
                                   "(Europe/Berlin)")
    assert format_when(p.args, "America/New_York").endswith("; first Mon 23 Nov 03:00 America/New_York")
