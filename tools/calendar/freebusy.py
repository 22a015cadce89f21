"""Free/busy: who is busy at a proposed time, and the next times when everybody is free.

Pure functions over :class:`Schedule` values, which every backend's ``busy`` method returns (Google's
``freeBusy``, Graph's ``getSchedule``, the local calendar's own events). A slot is free when it overlaps
nobody's busy interval and lies inside every person's working hours: their own (days, hours and zone, when
the calendar says; Graph does) or, where unknown, :data:`DEFAULT_WORK_START`-:data:`DEFAULT_WORK_END`
Monday to Friday in the requester's zone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

__all__ = ["BusyInterval", "Schedule", "busy_at", "free_slots", "DEFAULT_WORK_START", "DEFAULT_WORK_END",
           "SLOT_STEP", "MAX_SLOTS"]

DEFAULT_WORK_START = (9, 0)
DEFAULT_WORK_END = (17, 0)
#: Candidate starts are on this grid (minutes past the hour: 0 and 30).
SLOT_STEP = timedelta(minutes=30)
#: How many slots a preview offers.
MAX_SLOTS = 3
_WORKDAYS = (0, 1, 2, 3, 4)


@dataclass(frozen=True, slots=True)
class BusyInterval:
    """One busy stretch of a person's calendar (aware times; ``status`` ``busy``, ``tentative``, ``oof``...)."""

    start: datetime
    end: datetime
    status: str = "busy"


@dataclass(frozen=True, slots=True)
class Schedule:
    """What a calendar says about one person between two times.

    Attributes:
        email: the person's address.
        busy: their busy intervals (aware, sorted).
        timezone: the IANA zone of their working hours, or "" when unknown.
        work_days: their working weekdays (0 = Monday), or () when unknown.
        work_start, work_end: their working hours as ``(hour, minute)``, or None when unknown.
        error: why the calendar could not be read (then ``busy`` is empty and means nothing), or "".
    """

    email: str
    busy: tuple[BusyInterval, ...] = ()
    timezone: str = ""
    work_days: tuple[int, ...] = ()
    work_start: tuple[int, int] | None = None
    work_end: tuple[int, int] | None = None
    error: str = ""


def busy_at(schedules: Iterable[Schedule], start: datetime, end: datetime) -> list[str]:
    """The addresses with a busy interval overlapping ``[start, end)``, in the given order."""
    return [s.email for s in schedules if any(b.start < end and b.end > start for b in s.busy)]


def _inside_hours(s: Schedule, start: datetime, end: datetime, default_tz: str) -> bool:
    known = bool(s.timezone and s.work_start and s.work_end)
    tz = ZoneInfo(s.timezone if known else default_tz)
    days = (s.work_days or _WORKDAYS) if known else _WORKDAYS
    ws, we = (s.work_start, s.work_end) if known else (DEFAULT_WORK_START, DEFAULT_WORK_END)
    a, b = start.astimezone(tz), end.astimezone(tz)
    assert ws is not None and we is not None
    return a.date() == b.date() and a.weekday() in days and time(*ws) <= a.time() and b.time() <= time(*we)


def free_slots(schedules: Sequence[Schedule], *, duration: timedelta, after: datetime, until: datetime,
               requester_tz: str, count: int = MAX_SLOTS, step: timedelta = SLOT_STEP,
               skip: Iterable[datetime] = ()) -> list[datetime]:
    """The first ``count`` starts (aware, on the ``step`` grid, not before ``after``, ending by ``until``) when
    everybody in ``schedules`` is free and inside their working hours (see the module docstring).

    A schedule with an ``error`` counts as free (its calendar could not be read; the preview says so).
    ``skip`` are starts not to offer (the time already proposed).
    """
    skipped = set(skip)
    grid = int(step.total_seconds())
    epoch = int(after.timestamp())
    first = datetime.fromtimestamp(-(-epoch // grid) * grid, after.tzinfo)
    out: list[datetime] = []
    start = first
    while start + duration <= until and len(out) < count:
        end = start + duration
        if start not in skipped and not busy_at(schedules, start, end) and all(
                _inside_hours(s, start, end, requester_tz) for s in schedules or [Schedule("")]):
            out.append(start)
        start += step
    return out
