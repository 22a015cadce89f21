"""A series' rule and first start from its words (:mod:`tools.calendar.series_words`) and the day asked."""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from dateutil.relativedelta import relativedelta

from ..recurrence import WEEKDAY_CODES, build_rrule, check_rrule, next_start
from ..series_words import SeriesWords
from .days import parse_day
from .draft import EventDraft

__all__ = ["series_start"]

def series_start(draft: EventDraft, w: SeriesWords, day: date | None, kind: tuple[str, int] | None,
                  start_t: time | None, now: datetime, tz: ZoneInfo) -> None:
    """Fill ``draft.recurrence`` and ``draft.start`` (the rule's first occurrence after ``now``, not
    before ``day`` when a day was named), or what is missing."""
    byday, bymonthday, not_before = list(w.byday), w.bymonthday, day
    if kind and kind[0] == "weekday" and w.freq == "WEEKLY" and not byday:
        byday, not_before = [WEEKDAY_CODES[kind[1]]], None  # "weekly on monday": the day it repeats on
    if kind and kind[0] == "monthday" and w.freq == "MONTHLY" and not byday and bymonthday is None:
        bymonthday, not_before = kind[1], None  # "monthly on the 1st"
    if w.freq == "WEEKLY" and not byday and day is not None:
        byday = [WEEKDAY_CODES[day.weekday()]]
    if w.freq == "MONTHLY" and not byday and bymonthday is None and day is not None:
        bymonthday = day.day
    if (w.freq == "WEEKLY" and not byday) or (w.freq == "MONTHLY" and not byday and bymonthday is None):
        draft.missing.append("date")  # "weekly at 10": which day?
    if start_t is None:
        draft.missing.append("time")
    if draft.missing:
        return
    assert start_t is not None
    rule = build_rrule(w.freq, interval=w.interval, byday=byday, bymonthday=bymonthday, count=w.count)
    start = next_start(rule, start_t, now, tz, not_before)
    if start is None:
        draft.series_problem = f"{w.phrase} never falls on a day I can find"
        return
    until: date | None = None
    if w.until and not w.count:
        until = _last_day(w.until, now.astimezone(tz))
        if until is None:
            draft.series_problem = f"I can't read \u201c{w.until}\u201d as the last day"
            return
    elif w.span and not w.count:
        n, unit = w.span
        until = start.date() + (relativedelta(weeks=n) if unit == "weeks" else relativedelta(months=n)) - timedelta(days=1)
    if until is not None:
        rule = build_rrule(w.freq, interval=w.interval, byday=byday, bymonthday=bymonthday, until=until)
    try:
        draft.recurrence = check_rrule(rule, start)
    except ValueError as exc:
        draft.series_problem = str(exc)
        return
    draft.start = start


def _last_day(phrase: str, local_now: datetime) -> date | None:
    """The last day of a series from ``dec 20``, ``2027-01-31``, ``end of the year``/``month``/``march``."""
    m = re.fullmatch(r"end\s+of\s+(?:the\s+)?(\w+)", phrase.strip(), re.I)
    if m:
        unit = m[1].lower()
        if unit == "year":
            return date(local_now.year, 12, 31)
        first = local_now.date().replace(day=1) if unit == "month" else parse_day(f"{unit} 1", local_now)
        if first is None:
            return None
        return (first.replace(day=1) + relativedelta(months=1)) - timedelta(days=1)
    return parse_day(phrase, local_now)
