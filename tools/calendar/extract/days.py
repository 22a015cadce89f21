"""Days: ``tomorrow``, ``next tue``, ``March 20``, ``the 14th``, ``in 2 days`` (``dateparser``), and the vague
ones (``next week``) that are not guessed."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from tools.dates import MONTH, MONTHDAY_PHRASE, read_day

from ..recurrence import WEEKDAY_CODES, build_rrule
from .words import NUM

__all__ = ["DATES", "NEXT_PERIOD", "VAGUE_DATE", "day_kind", "kind_rule", "next_period", "parse_day"]

_WEEKDAYS = {"mon": "monday", "monday": "monday", "tue": "tuesday", "tues": "tuesday", "tuesday": "tuesday",
             "wed": "wednesday", "weds": "wednesday", "wednesday": "wednesday", "thu": "thursday", "thur": "thursday",
             "thurs": "thursday", "thursday": "thursday", "fri": "friday", "friday": "friday",
             "saturday": "saturday", "sunday": "sunday"}
DATES: list[re.Pattern[str]] = [
    re.compile(r"\b(?:the\s+)?day\s+after\s+(?:tomorrow|tmrw|tmr)\b", re.I),
    re.compile(r"\b(?:today|tomorrow|tmrw|tmr|tomorow|tommorow|tommorrow|2moro|yesterday)\b", re.I),
    re.compile(r"\b(?:(?:on|this|next|coming|this\s+coming)\s+)*(?:" + "|".join(sorted(_WEEKDAYS, key=len, reverse=True))
               + r")\b\.?", re.I),
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    re.compile(rf"\b(?:on\s+)?(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH}\b\.?(?:,?\s+\d{{4}}\b)?", re.I),
    re.compile(rf"\b(?:on\s+)?{MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}}\b)?", re.I),
    re.compile(r"\b(?:on\s+)?\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"),
    re.compile(r"\b(?:on\s+)?the\s+\d{1,2}(?:st|nd|rd|th)\b", re.I),
    re.compile(rf"\bin\s+{NUM}\s+(?:days?|weeks?)\b", re.I),
]
VAGUE_DATE = re.compile(
    r"\b(?:(?:early|late|later|sometime|some\s+time)\s+)?(?:next|this|coming|the\s+following)\s+(?:week|month)\b|"
    r"\b(?:later\s+this|end\s+of\s+(?:the\s+)?|end\s+of\s+next)\s*(?:week|month)\b|\bsometime\b|\bsome\s+time\b|"
    r"\bsoon\b|\bat\s+some\s+point\b|\b(?:this|next)\s+weekend\b|\bnext\s+few\s+days\b|\bwhenever\b|\basap\b",
    re.I)


_WEEKDAY_PHRASE = re.compile(r"^(?:(?:on|this|coming|this\s+coming)\s+)*(" + "|".join(_WEEKDAYS) + r")\.?$", re.I)
NEXT_PERIOD = re.compile(r"^(?:(?:early|starting|from|beginning)\s+)?(?:next|the\s+following)\s+(week|month)$", re.I)


def day_kind(phrase: str) -> tuple[str, int] | None:
    """``("weekday", 0-6)`` for ``on thursday``, ``("monthday", 14)`` for ``on the 14th``, else None."""
    m = _WEEKDAY_PHRASE.match(phrase.strip())
    if m:
        return "weekday", WEEKDAY_CODES.index(_WEEKDAYS[m[1].lower()][:2].upper())
    m = MONTHDAY_PHRASE.match(phrase.strip())
    if m and 1 <= int(m[1]) <= 31:
        return "monthday", int(m[1])
    return None


def kind_rule(kind: tuple[str, int]) -> str:
    """The rule whose next occurrence is the day meant (a weekday, a day of the month)."""
    if kind[0] == "weekday":
        return build_rrule("WEEKLY", byday=[WEEKDAY_CODES[kind[1]]])
    return build_rrule("MONTHLY", bymonthday=kind[1])


def next_period(today: date, unit: str) -> date:
    """The first day of next week (Monday) or next month."""
    if unit == "week":
        return today + timedelta(days=7 - today.weekday())
    return (today.replace(day=1) + timedelta(days=32)).replace(day=1)


def parse_day(phrase: str, local_now: datetime) -> date | None:
    """A day phrase through dateparser (future preferred, relative to the message time)."""
    p = phrase.lower().rstrip(".")
    p = re.sub(r"\b(?:tmrw|tmr|tomorow|tommorow|tommorrow|2moro)\b", "tomorrow", p)
    p = re.sub(r"^(?:on\s+)+", "", p)
    p = re.sub(r"\b(?:this\s+coming|coming)\s+", "", p)
    p = re.sub(r"\bthe\s+(?=\d)", "", p)
    p = re.sub(r"\b(" + "|".join(sorted(_WEEKDAYS, key=len, reverse=True)) + r")\b", lambda m: _WEEKDAYS[m[1]], p)
    return read_day(p, local_now)
