"""Times of day: ``3pm``, ``15:00``, ``noon``, ranges (``2-3pm``), an end (``until 4pm``), parts of the day;
a bare hour is read in office hours."""

from __future__ import annotations

import re
from datetime import time

from tools.dates import clock_time

__all__ = ["DAYPART", "RANGE", "TIME_24", "TIME_AMPM", "TIME_AT", "TIME_HALF_PAST", "TIME_NAMED", "TIME_OCLOCK",
           "UNTIL", "bare_hour_range", "time_from", "time_from_any"]

_AMPM = r"(a\.?m\.?|p\.?m\.?)(?![a-z])"
_T_AMPM = rf"(\d{{1,2}})(?:[:.](\d{{2}}))?\s*{_AMPM}"
_T_24 = r"([01]?\d|2[0-3])[:h]([0-5]\d)(?!\d)"
_T_ANY = rf"(?:{_T_AMPM}|{_T_24}|(\d{{1,2}})(?![\d:.]))"
RANGE = re.compile(
    rf"\b(?:from\s+|between\s+)?(?:at\s+)?(\d{{1,2}})(?:[:.](\d{{2}}))?\s*(?:{_AMPM})?\s*"
    rf"(?:-|\u2013|\u2014|to|until|till|and)\s*(\d{{1,2}})(?:[:.](\d{{2}}))?\s*(?:{_AMPM})?", re.I)
UNTIL = re.compile(rf"\b(?:until|till|til|to)\s+{_T_ANY}", re.I)
TIME_AMPM = re.compile(rf"(?:\b(?:at|@)\s*)?\b{_T_AMPM}", re.I)
TIME_24 = re.compile(rf"(?:\b(?:at|@)\s*)?\b{_T_24}", re.I)
TIME_AT = re.compile(r"(?:\bat|@)\s*(\d{1,2})(?![\d:.]|\s*(?:%|people|persons|of\b))\b", re.I)
TIME_OCLOCK = re.compile(r"(?:\bat\s+)?\b(\d{1,2})\s*o'?\s?clock\b", re.I)
TIME_HALF_PAST = re.compile(r"(?:\bat\s+)?\bhalf\s+past\s+(\d{1,2})\b", re.I)
TIME_NAMED = re.compile(r"(?:\bat\s+)?\b(noon|midday|midnight)\b", re.I)
DAYPART = re.compile(r"\b(?:(?:in\s+the\s+|this\s+|tomorrow\s+)?(morning|afternoon|evening)|tonight|lunch(?:\s*time)?|"
                      r"after\s+lunch|eod|end\s+of\s+(?:the\s+)?day|first\s+thing)\b", re.I)


def bare_hour_range(m: re.Match[str], s: str) -> bool:
    """True for ``10-12`` read as hours: a dash between two hours, the second later in office hours,
    and no count after it (``10-12 people``)."""
    if not re.fullmatch(r"\d{1,2}\s*[-\u2013]\s*\d{1,2}", m[0].strip()):
        return False
    if re.search(r"[\d/.-]\s*$", s[:m.start()]) or re.match(r"[/.-]\d", s[m.end():]):
        return False  # part of a date (2025-03-18, 3/10-12)
    if re.match(r"\s*(?:people|persons|attendees|guests|%|min|mins|minutes|h|hrs?|hours?|days?|weeks?)\b",
                s[m.end():], re.I):
        return False
    first, second = clock_time(int(m[1]), 0, None, None), clock_time(int(m[4]), 0, None, None)
    return first is not None and second is not None and first < second and 7 <= first.hour and second.hour <= 21


def time_from(pattern: re.Pattern[str], m: re.Match[str], bias: str | None) -> time | None:
    if pattern is TIME_AMPM:
        return clock_time(int(m[1]), int(m[2] or 0), m[3], bias)
    if pattern is TIME_24:
        if int(m[1]) >= 13 or m[1].startswith("0"):
            return time(int(m[1]), int(m[2]))  # 15:00, 09:30: a 24-hour clock
        return clock_time(int(m[1]), int(m[2]), None, bias)
    if pattern is TIME_NAMED:
        return time(0, 0) if m[1].lower() == "midnight" else time(12, 0)
    if pattern is TIME_HALF_PAST:
        return clock_time(int(m[1]), 30, None, bias)
    return clock_time(int(m[1]), 0, None, bias)


def time_from_any(m: re.Match[str], bias: str | None) -> time | None:
    """The time of an ``UNTIL`` match (its groups follow ``_T_ANY``)."""
    if m[1]:
        return clock_time(int(m[1]), int(m[2] or 0), m[3], bias)
    if m[4]:
        if int(m[4]) >= 13 or m[4].startswith("0"):
            return time(int(m[4]), int(m[5]))
        return clock_time(int(m[4]), int(m[5]), None, bias)
    if m[6]:
        return clock_time(int(m[6]), 0, None, bias)
    return None
