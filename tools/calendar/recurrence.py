"""Recurring series: RFC 5545 ``RRULE`` values, checked, built, described and expanded.

A series is an ``RRULE`` value without the ``RRULE:`` prefix (``FREQ=WEEKLY;BYDAY=MO``), the form
``.ics`` files carry in a ``VEVENT`` and Google takes as ``recurrence: ["RRULE:..."]``. Parsing and
expansion are ``icalendar.vRecur`` and ``dateutil.rrule``; nothing here reads the grammar by hand.

What a series may be (:func:`check_rrule`): ``FREQ`` ``DAILY``, ``WEEKLY`` or ``MONTHLY``; ``INTERVAL``
1-:data:`MAX_INTERVAL`; ``BYDAY`` (``MO``..``SU``, with an ordinal such as ``1MO`` or ``-1FR`` for a
monthly rule); ``BYMONTHDAY`` (1-31 or -1..-31); at most one of ``COUNT`` (1-:data:`MAX_COUNT`) and
``UNTIL`` (a date or a UTC time, not before the start); ``WKST``. The event's start must itself be
an occurrence (RFC 5545 counts ``DTSTART`` as the first one), so the preview and the calendar agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

from dateutil.rrule import rrulestr

if TYPE_CHECKING:
    from icalendar import vRecur

__all__ = ["check_rrule", "build_rrule", "rrule_parts", "describe_rrule", "describe_end", "occurrences", "next_start",
           "WEEKDAY_CODES", "WEEKDAYS", "MAX_INTERVAL", "MAX_COUNT", "FREQUENCIES"]

#: Monday..Sunday as RFC 5545 weekday codes (index = ``date.weekday()``).
WEEKDAY_CODES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
#: The code of each weekday's English name.
WEEKDAYS = {"monday": "MO", "tuesday": "TU", "wednesday": "WE", "thursday": "TH", "friday": "FR",
            "saturday": "SA", "sunday": "SU"}
FREQUENCIES = ("DAILY", "WEEKLY", "MONTHLY")
MAX_INTERVAL = 52
MAX_COUNT = 500
_PARTS = {"FREQ", "INTERVAL", "BYDAY", "BYMONTHDAY", "COUNT", "UNTIL", "WKST"}
_NAMES = dict(zip(WEEKDAY_CODES, ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")))
_ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", -1: "last", -2: "second to last"}
_WORKWEEK = ("MO", "TU", "WE", "TH", "FR")


def _vrecur() -> type[vRecur]:
    """``icalendar.vRecur``, imported on the first series read or built (wiring the calendar tool, as every
    ``chatops ask`` does, need not load icalendar)."""
    import icalendar

    return icalendar.vRecur


def _to_text(parts: dict[str, Any]) -> str:
    """An ``RRULE`` value from its parts (``icalendar.vRecur``'s ``to_ical`` is not annotated)."""
    ical: bytes = _vrecur()(parts).to_ical()
    return ical.decode()


def rrule_parts(value: str) -> dict[str, list[Any]]:
    """The parts of an ``RRULE`` value as ``icalendar.vRecur`` reads them (``{"FREQ": ["WEEKLY"], ...}``);
    the values are ints, weekday codes, dates or datetimes by part, which icalendar does not type.

    Raises:
        ValueError: the value is no ``RRULE`` (unknown weekday, missing ``FREQ``...).
    """
    text = value.strip()
    if text.upper().startswith("RRULE:"):
        text = text[6:]
    if not text:
        raise ValueError("the recurrence is empty")
    try:
        parts = dict(_vrecur().from_ical(text))
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"{value!r} is not an RFC 5545 RRULE ({exc})") from exc
    if not parts.get("FREQ"):
        raise ValueError(f"{value!r} is not an RFC 5545 RRULE: it needs FREQ, e.g. FREQ=WEEKLY;BYDAY=MO")
    return {k.upper(): list(v) for k, v in parts.items()}


def build_rrule(freq: str, *, interval: int = 1, byday: Iterable[str] = (), bymonthday: int | None = None,
                count: int | None = None, until: date | datetime | None = None) -> str:
    """An ``RRULE`` value from its parts (``build_rrule("WEEKLY", interval=2, byday=["TU"])`` ->
    ``FREQ=WEEKLY;INTERVAL=2;BYDAY=TU``); not checked (see :func:`check_rrule`)."""
    parts: dict[str, object] = {"FREQ": freq.upper()}
    if interval != 1:
        parts["INTERVAL"] = interval
    if count:
        parts["COUNT"] = count
    if until is not None:
        parts["UNTIL"] = until
    days = list(byday)
    if days:
        parts["BYDAY"] = days
    if bymonthday is not None:
        parts["BYMONTHDAY"] = bymonthday
    return _to_text(parts)


def check_rrule(value: str, start: datetime) -> str:
    """Check a series against its first event and return the rule in normal form.

    Args:
        value: an ``RRULE`` value, with or without the ``RRULE:`` prefix.
        start: the first event's start, aware, in the event's zone (the rule is read there).

    Returns:
        the value as ``icalendar`` writes it (``FREQ`` first; ``UNTIL`` as a UTC time; a date-only
        ``UNTIL`` becomes the end of that day in the start's zone).

    Raises:
        ValueError: with what is wrong and an example of a good rule.
    """
    parts = rrule_parts(value)
    unknown = sorted(set(parts) - _PARTS)
    if unknown:
        raise ValueError(f"the recurrence uses {', '.join(unknown)}; only FREQ, INTERVAL, BYDAY, BYMONTHDAY, COUNT, "
                         "UNTIL and WKST are supported (e.g. FREQ=WEEKLY;INTERVAL=2;BYDAY=TU)")
    freq = str(parts["FREQ"][0]).upper()
    if freq not in FREQUENCIES:
        raise ValueError(f"a series repeats DAILY, WEEKLY or MONTHLY, not {freq}")
    interval = int(parts.get("INTERVAL", [1])[0])
    if not 1 <= interval <= MAX_INTERVAL:
        raise ValueError(f"the recurrence INTERVAL must be between 1 and {MAX_INTERVAL}, not {interval}")
    if "COUNT" in parts and "UNTIL" in parts:
        raise ValueError("give the series an end with COUNT or with UNTIL, not both")
    if "COUNT" in parts:
        count = int(parts["COUNT"][0])
        if not 1 <= count <= MAX_COUNT:
            raise ValueError(f"the recurrence COUNT must be between 1 and {MAX_COUNT}, not {count}")
    if "UNTIL" in parts:
        until = parts["UNTIL"][0]
        tz = start.tzinfo or timezone.utc
        if not isinstance(until, datetime):
            until = datetime.combine(until, time(23, 59, 59), tz)
        elif until.tzinfo is None:
            until = until.replace(tzinfo=tz)
        until = until.astimezone(timezone.utc).replace(microsecond=0)
        if until < start:
            raise ValueError(f"the series ends (UNTIL {until:%Y-%m-%d %H:%M} UTC) before its first event")
        parts["UNTIL"] = [until]
    if freq != "MONTHLY" and any(str(d)[:-2] for d in parts.get("BYDAY", [])):
        raise ValueError("a weekday with a number (1MO, -1FR) only fits a MONTHLY series")
    for day in parts.get("BYMONTHDAY", []):
        if not (1 <= abs(int(day)) <= 31):
            raise ValueError(f"BYMONTHDAY must be 1-31 or -1..-31, not {day}")
    normal = _to_text(parts)
    try:
        first = next(iter(rrulestr(normal, dtstart=start)), None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{value!r} is not a usable RRULE ({exc})") from exc
    if first != start:
        local = start.strftime("%a %d %b %H:%M")
        raise ValueError(f"the start ({local}) is not an occurrence of the series {normal}: start on a day the rule "
                         "repeats on")
    return normal


def occurrences(rule: str, start: datetime, n: int = 5) -> list[datetime]:
    """The first ``n`` starts of the series (``start`` first), aware, in ``start``'s zone."""
    out = []
    for when in rrulestr(rule, dtstart=start):
        out.append(when)
        if len(out) >= n:
            break
    return out


def next_start(rule: str, at: time, now: datetime, tz: ZoneInfo, not_before: date | None = None) -> datetime | None:
    """The first start of a series after ``now``: the earliest day on or after ``not_before`` (today
    by default) that the rule's days allow, at ``at``, later than ``now``.

    ``INTERVAL`` is left out when looking (``every other tuesday`` said on a Thursday starts next
    Tuesday); the series then repeats from that start. ``COUNT``/``UNTIL`` are left out too.

    Returns:
        the start, aware in ``tz``, or None when the rule never matches within two years.
    """
    parts = rrule_parts(rule)
    parts.pop("INTERVAL", None)
    parts.pop("COUNT", None)
    parts.pop("UNTIL", None)
    loose = _to_text(parts)
    local_now = now.astimezone(tz)
    day = max(not_before or local_now.date(), local_now.date())
    begin = datetime.combine(day, at, tz)
    for when in rrulestr(loose, dtstart=begin):
        if when > now:
            return when
        if when > begin + timedelta(days=800):
            break
    return None


def describe_rrule(rule: str, start: datetime, *, with_end: bool = True) -> str:
    """Words for a series: ``every Monday``, ``every other Tuesday``, ``every weekday``, ``every month
    on the 1st``, ``every month on the last Friday``, ``every 3 weeks on Monday and Thursday``; with
    ``, 6 times`` or ``, until Thu 31 Dec 2026`` when the series ends. ``start`` is the first event
    (aware, in the event's zone) and supplies the day a rule without ``BYDAY``/``BYMONTHDAY`` repeats on;
    ``with_end=False`` leaves the end out (see :func:`describe_end`)."""
    parts = rrule_parts(rule)
    freq = str(parts["FREQ"][0]).upper()
    n = int(parts.get("INTERVAL", [1])[0])
    days = [str(d).upper() for d in parts.get("BYDAY", [])]
    every = "every" if n == 1 else "every other" if n == 2 else f"every {n}"
    if freq == "DAILY":
        text = "every day" if n == 1 else "every other day" if n == 2 else f"every {n} days"
    elif freq == "WEEKLY":
        days = days or [WEEKDAY_CODES[start.weekday()]]
        if n == 1 and sorted(days, key=WEEKDAY_CODES.index) == list(_WORKWEEK):
            text = "every weekday"
        elif n <= 2:
            text = f"{every} {_and([_NAMES[d] for d in sorted(days, key=WEEKDAY_CODES.index)])}"
        else:
            text = f"every {n} weeks on {_and([_NAMES[d] for d in sorted(days, key=WEEKDAY_CODES.index)])}"
    else:
        unit = "month" if n == 1 else "other month" if n == 2 else f"{n} months"
        if days:
            on = _and([_nth_weekday(d) for d in days])
        else:
            monthdays = [int(d) for d in parts.get("BYMONTHDAY", [])] or [start.day]
            on = _and([_ordinal_day(d) for d in monthdays])
        text = f"every {unit} on {on}"
    if with_end:
        text += describe_end(rule, start)
    return text


def describe_end(rule: str, start: datetime) -> str:
    """``, 6 times``, ``, until Thu 31 Dec 2026`` (the last day in ``start``'s zone), or "" for an open series."""
    parts = rrule_parts(rule)
    if parts.get("COUNT"):
        return f", {int(parts['COUNT'][0])} times"
    if parts.get("UNTIL"):
        until = parts["UNTIL"][0]
        if isinstance(until, datetime):
            until = (until if until.tzinfo else until.replace(tzinfo=timezone.utc)).astimezone(start.tzinfo).date()
        return f", until {until:%a %d %b %Y}"
    return ""


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _ordinal_day(n: int) -> str:
    if n < 0:
        return "the last day" if n == -1 else f"the {_ordinal_day(-n)[4:]} last day"
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"the {n}{suffix}"


def _nth_weekday(code: str) -> str:
    name = _NAMES[code[-2:]]
    if len(code) == 2:
        return f"every {name}"
    n = int(code[:-2])
    return f"the {_ORDINALS.get(n, f'{n}th')} {name}"
