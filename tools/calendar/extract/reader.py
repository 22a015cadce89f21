"""The reading of one message, part by part: people, zone, place, times, day, series, title."""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

from tools.dates import clock_time, relative_time

from ..args import MAX_DURATION_MINUTES, MIN_DURATION_MINUTES, is_email, valid_timezone
from ..recurrence import next_start
from ..series_words import take_series
from .clock import (DAYPART, RANGE, TIME_24, TIME_AMPM, TIME_AT, TIME_HALF_PAST, TIME_NAMED, TIME_OCLOCK, UNTIL,
                    bare_hour_range, time_from, time_from_any)
from .days import DATES, NEXT_PERIOD, VAGUE_DATE, day_kind, kind_rule, next_period, parse_day
from .draft import EventDraft
from .durations import DURATIONS, RELATIVE_START
from .people import AT_NAME, EMAIL, at_names, named_people
from .place import LOCATION, MEET_VERB, VIDEO, only_meet_verb
from .series import series_start
from .title import QUOTED, TOPIC_LEAD, read_title
from .words import SEP
from .zones import take_zone

__all__ = ["extract_event"]

def extract_event(text: str, *, now: datetime, timezone_name: str) -> EventDraft:
    """Read a meeting request (see the module docstring).

    Args:
        text: the requester's message as plain text (mentions already resolved to e-mail addresses,
            or ``@Name`` when they could not be).
        now: when the message was sent (aware; naive is taken as UTC): relative words count from it.
        timezone_name: the requester's IANA zone; times are read there unless the message names one.

    Returns:
        the draft; never raises for odd input (unknown words are left out of it).
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    draft = EventDraft()
    s = text.replace("\u2019", "'")

    # Title in quotes first: its words must not be read as dates or people.
    quoted = None
    m = QUOTED.search(s)
    if m:
        quoted = (m[1] or m[2]).strip()
        s = s[:m.start()] + SEP + s[m.end():]

    # People: e-mail addresses, then the @names nobody could resolve (@Bob, @here).
    for addr in EMAIL.findall(s):
        if is_email(addr):
            _add(draft.attendees, addr.lower())
    s = EMAIL.sub(SEP, s)
    for name in at_names(s):
        _add(draft.unknown_people, name.lower() if name.lower() in {"@here", "@channel", "@everyone"} else name)
    s = AT_NAME.sub(SEP, s)

    # Time zone.
    zone, s = take_zone(s)
    draft.zone_named = zone is not None
    draft.timezone = zone or (timezone_name if valid_timezone(timezone_name) else "UTC")
    tz = ZoneInfo(draft.timezone)
    local_now = now.astimezone(tz)

    # Video and room.
    if VIDEO.search(s) and not only_meet_verb(s):
        draft.video_conference = True
        s = VIDEO.sub(lambda m: m[0] if MEET_VERB.fullmatch(m[0].strip()) else SEP, s)
    m = LOCATION.search(s)
    if m:
        draft.location = m[1].strip()
        s = s[:m.start()] + SEP + s[m.end():]

    # A relative start ("in 30 minutes") is both the day and the time.
    relative_start: datetime | None = None
    m = RELATIVE_START.search(s)
    if m:
        relative_start = relative_time(m[0], now, tz)  # dateparser; None for "in 0 minutes"
    if m and relative_start is not None:
        draft.time_phrase = m[0]
        s = s[:m.start()] + SEP + s[m.end():]

    series, s = take_series(s, TOPIC_LEAD)
    if series:
        draft.recurring = series.phrase or series.unclear

    # Length.
    for pattern, minutes in DURATIONS:
        m = pattern.search(s)
        if m:
            draft.duration_minutes = round(minutes(m))
            s = s[:m.start()] + SEP + s[m.end():]
            break

    # Parts of the day bias bare hours ("tonight at 8" is 20:00) and, alone, are vague.
    daypart = DAYPART.search(s)
    bias = None
    if daypart:
        word = daypart[0].lower()
        bias = "am" if "morning" in word or "first thing" in word else "pm"

    # Times: a range, an end, a start.
    start_t: time | None = None
    end_t: time | None = None
    m = RANGE.search(s)
    if m and (m[3] or m[6] or ":" in m[0] or "from" in m[0].lower() or "between" in m[0].lower()
              or m[0].lower().lstrip().startswith("at") or bare_hour_range(m, s)):
        h1, mi1, ap1, h2, mi2, ap2 = m[1], m[2], m[3], m[4], m[5], m[6]
        end_t = clock_time(int(h2), int(mi2 or 0), ap2, bias)
        first_ampm = ap1 or (ap2 if ap2 and int(h1) <= int(h2) else None)
        start_t = clock_time(int(h1), int(mi1 or 0), first_ampm, bias)
        if start_t and end_t and end_t <= start_t and not ap1 and ap2 and ap2.lower().startswith("p"):
            start_t = clock_time(int(h1), int(mi1 or 0), "am", None)
        if start_t is not None and end_t is not None:
            draft.time_phrase = m[0].strip()
            s = s[:m.start()] + SEP + s[m.end():]
        else:
            start_t = end_t = None
    if start_t is None:
        m = UNTIL.search(s)
        if m:
            end_t = time_from_any(m, bias)
            if end_t is not None:
                s = s[:m.start()] + SEP + s[m.end():]
        for pattern in (TIME_AMPM, TIME_24, TIME_NAMED, TIME_HALF_PAST, TIME_OCLOCK, TIME_AT):
            m = pattern.search(s)
            if not m:
                continue
            t = time_from(pattern, m, bias)
            if t is not None:
                start_t = t
                draft.time_phrase = m[0].strip()
                s = s[:m.start()] + SEP + s[m.end():]
                break

    # The day.
    date_match = None
    for pattern in DATES:
        date_match = pattern.search(s)
        if date_match:
            break
    day: date | None = None
    kind: tuple[str, int] | None = None  # ("weekday", 0-6) or ("monthday", 1-31): the next one counts
    if date_match:
        draft.date_phrase = date_match[0].strip()
        day = parse_day(draft.date_phrase, local_now)
        if day is None:  # "feb 30": a day was named but is no date; never fall back to today
            draft.bad_date = re.sub(r"^on\s+", "", draft.date_phrase, flags=re.I)
            draft.vague.append(draft.date_phrase)
        kind = day_kind(draft.date_phrase)
        s = s[:date_match.start()] + SEP + s[date_match.end():]
    not_before: date | None = None
    vague = VAGUE_DATE.search(s)
    if vague and day is None:
        period = NEXT_PERIOD.match(vague[0].strip())
        if series and series.freq and period:  # "every monday starting next week": where the series begins
            not_before = next_period(local_now.date(), period[1].lower())
        else:
            draft.vague.append(vague[0].strip())
        s = s[:vague.start()] + SEP + s[vague.end():]
    if daypart and start_t is None and relative_start is None:
        draft.vague.append(daypart[0].strip())
    if daypart:
        s = DAYPART.sub(SEP, s)

    # Put the start together.
    if series and series.freq and not draft.vague:
        if relative_start is not None:
            day, start_t = relative_start.date(), relative_start.time()
        series_start(draft, series, day or not_before, kind, start_t, now, tz)
    elif relative_start is not None:
        draft.start = relative_start
    elif start_t is not None:
        if kind is not None and day is not None:
            draft.start = next_start(kind_rule(kind), start_t, now, tz)
        elif day is None and not draft.vague:
            candidate = datetime.combine(local_now.date(), start_t, tz)
            day = local_now.date() if candidate > local_now else local_now.date() + timedelta(days=1)
        if draft.start is None and day is not None:
            draft.start = datetime.combine(day, start_t, tz)
        elif draft.start is None:
            draft.missing.append("date")
    else:
        if day is None:
            draft.missing.append("date")
        draft.missing.append("time")
    if draft.start is not None:
        if draft.start <= now:
            draft.past = True
        if end_t is not None and draft.duration_minutes is None:
            end = datetime.combine(draft.start.date(), end_t, tz)
            if end <= draft.start:
                end += timedelta(days=1)
            draft.duration_minutes = round((end - draft.start) / timedelta(minutes=1))
    if draft.duration_minutes is not None and not (MIN_DURATION_MINUTES <= draft.duration_minutes
                                                   <= MAX_DURATION_MINUTES):
        draft.bad_duration = draft.duration_minutes

    # People named without an address ("with bob", "with everyone").
    draft.unknown_people.extend(named_people(s))

    # Title.
    draft.title = read_title(quoted, s)
    return draft


def _add(items: list[str], value: str) -> None:
    if value not in items:
        items.append(value)
