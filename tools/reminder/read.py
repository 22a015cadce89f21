"""A reminder request read without an LLM: "remind me to send the report tomorrow at 9".

:func:`read_reminder` takes the requester's own words and returns a :class:`ReminderDraft`: what to
remind them of and when, or what is missing. What it understands:

- **the ask**: ``remind me ...``, ``set a reminder ...`` (with ``please``/``can you`` before it);
  the rest, minus the time words and a leading ``to``/``that``/``about``, is the text;
- **relative times**: ``in 2 hours``, ``in two hours``, ``in 30 minutes``, ``in half an hour``,
  ``in 3 days`` (counted from the message time by ``dateparser``, see :func:`tools.dates.relative_time`);
- **days**: ``today``, ``tonight``, ``tomorrow``, ``the day after tomorrow``, a weekday (``on friday``,
  ``next monday``), ``March 20``, ``the 14th``, ``2025-03-20``, read with ``dateparser`` relative to
  the message time in the requester's zone, future preferred; a weekday or a day of the month with a
  time is the next one whose time is still ahead (``friday at 9`` said on a Friday at 10 is next
  week's; ``the 14th at 9`` said on the 14th at 10 is next month's), as the calendar reads them;
- **times**: ``9``, ``9am``, ``3:30 pm``, ``15:00``, ``noon``, ``midnight`` (a bare hour in office
  hours: 1-6 is pm, 7-11 am); a part of the day stands for a time (morning 09:00, afternoon 14:00,
  end of day / EOD / close of business 17:00, evening 18:00, tonight 20:00); a time alone is today's,
  or tomorrow's when it has passed;
- **one-off only**: a repeating reminder ("every Monday", "daily at 9", "remind me weekly to ...",
  "... the report weekly") is refused with a question for one time. A frequency word that describes
  a noun of what to remind of ("send the weekly report", "the daily standup notes", "each week's
  numbers") is part of the text, not a repeat (:func:`tools.dates.describes_a_noun`): a reminder
  request names no other thing a frequency adjective could describe.

A day without a time, no time at all, a time that has passed, or nothing to remind of leaves the
draft incomplete; :meth:`ReminderDraft.clarification` asks one question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

from tools.dates import MONTH, MONTHDAY_PHRASE, clock_time, describes_a_noun, read_day, relative_time, valid_timezone

__all__ = ["ReminderDraft", "read_reminder", "is_reminder_request"]

_SEP = " \u00a6 "
_LEAD = re.compile(
    r"^\s*(?:(?:hey|hi|ok|okay)\b[\s,]*)?(?:(?:please|pls|plz|can you|could you|would you|can u|could u|"
    r"kindly)\s+)*(?:remind\s+me|set\s+(?:me\s+)?(?:a\s+|an\s+)?reminder)\b[\s,:]*", re.I)
_ASK = re.compile(r"\bremind\s+me\b|\bset\s+(?:me\s+)?(?:a\s+|an\s+)?reminder\b", re.I)
_HOWTO = re.compile(r"^\s*(?:how|where|what|whats|what's|why|can i|could i|do i|does|is there|is it)\b", re.I)
_REPEAT = re.compile(r"\b(?:every|each)\s+(?:day|morning|evening|night|week|weekday|month|year|other|"
                     r"mon|tue|wed|thu|fri|sat|sun)\w*|\b(?:daily|weekly|monthly|hourly|yearly|annually)\b", re.I)

_NUM = r"(?:\d+(?:[.,]\d+)?|an?|one|two|three|four|five|six|seven|eight|nine|ten|fifteen|twenty|thirty|" \
       r"forty[- ]five|ninety)"
_RELATIVE = re.compile(rf"\bin\s+(?:(half\s+an\s+hour)|({_NUM})\s*(minutes?|mins?|m|hours?|hrs?|h|days?|weeks?))\b",
                       re.I)
_WEEKDAY = r"(?:mon|tue|tues|wed|weds|thu|thur|thurs|fri|sat|sun)(?:day)?"
_DAYS = [
    re.compile(r"\b(?:the\s+)?day\s+after\s+tomorrow\b", re.I),
    re.compile(r"\b(?:today|tomorrow|tmrw|tmr)\b", re.I),
    re.compile(rf"\b(?:(?:on|this|next|coming)\s+)*{_WEEKDAY}\b", re.I),
    re.compile(r"\b(?:on\s+)?\d{4}-\d{2}-\d{2}\b"),
    re.compile(rf"\b(?:on\s+)?(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH}\b", re.I),
    re.compile(rf"\b(?:on\s+)?{MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b", re.I),
    re.compile(r"\b(?:on\s+)?the\s+\d{1,2}(?:st|nd|rd|th)\b", re.I),
]
_TIMES = [
    re.compile(r"\b(?:at\s+|@\s*)?(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\.?(?!\w)", re.I),
    re.compile(r"\b(?:at\s+|@\s*)?(\d{1,2}):(\d{2})\b", re.I),
    re.compile(r"(?:\bat\s+|@\s*)(\d{1,2})\b(?!\s*(?:%|people|days?|weeks?|minutes?|mins?|hours?))", re.I),
    re.compile(r"\b(?:at\s+)?(noon|midday|midnight)\b", re.I),
]
_DAYPART = re.compile(r"\b(?:(?:in\s+the|this|tomorrow)\s+)?(morning|afternoon|evening)\b|\b(tonight)\b|"
                      r"\b(?:at\s+|by\s+)?(?:the\s+)?(end\s+of\s+(?:the\s+)?(?:work(?:ing)?\s*)?day|eod|"
                      r"close\s+of\s+business|cob)\b", re.I)
_DAYPART_TIME = {"morning": time(9), "afternoon": time(14), "evening": time(18), "tonight": time(20), "eod": time(17)}
_WEEKDAY_PHRASE = re.compile(rf"^(?:(?:on|this|coming)\s+)*({_WEEKDAY})$", re.I)
_TEXT_LEAD = re.compile(r"^(?:(?:to|that|about|of|re|regarding)\b\s*)+", re.I)


def is_reminder_request(text: str) -> bool:
    """True when ``text`` asks for a reminder ("remind me ...", "set a reminder ..."), not how to set one."""
    return bool(_ASK.search(text)) and not _HOWTO.match(text)


@dataclass(slots=True)
class ReminderDraft:
    """What :func:`read_reminder` understood.

    Attributes:
        text: what to remind of ("" when nothing was left).
        at: when (aware, in ``timezone``), or None.
        timezone: the zone the time was read in (the requester's).
        when_phrase: the words read as the time ("tomorrow at 9").
        day_phrase: the words read as the day, when a day was named without a time.
        repeating: the words asking for a repeating reminder ("every Monday"), or "".
        past: True when the time read is not after the message.
        bad_day: a day phrase that names no date ("feb 30"), or "".
    """

    text: str = ""
    at: datetime | None = None
    timezone: str = "UTC"
    when_phrase: str = ""
    day_phrase: str = ""
    repeating: str = ""
    past: bool = False
    bad_day: str = ""
    missing: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when the reminder can be proposed."""
        return bool(self.text) and self.at is not None and not self.past and not self.repeating and not self.bad_day

    def clarification(self) -> str | None:
        """One question for what is missing or wrong, or None when complete."""
        if self.complete:
            return None
        tail = " Nothing has been scheduled yet."
        if self.repeating:
            return (f"I can only set one-off reminders, not repeating ones (\u201c{self.repeating}\u201d). When should "
                    f"I remind you, once, e.g. \u201ctomorrow at 9\u201d?{tail}")
        if self.bad_day:
            return f"I can't read \u201c{self.bad_day}\u201d as a date. When should I remind you, e.g. \u201cFriday at 9\u201d?{tail}"
        if self.past and self.at is not None:
            return (f"{self.at:%a %d %b at %H:%M} has already passed. When should I remind you instead, e.g. "
                    f"\u201ctomorrow at 9\u201d?{tail}")
        if self.at is None and self.day_phrase:
            return f"At what time {self.day_phrase} should I remind you, e.g. \u201cat 9am\u201d?{tail}"
        if self.at is None:
            return f"When should I remind you, e.g. \u201ctomorrow at 9\u201d or \u201cin 2 hours\u201d?{tail}"
        return f"What should I remind you about, e.g. \u201cto send the report\u201d?{tail}"


def read_reminder(text: str, *, now: datetime, timezone_name: str) -> ReminderDraft:
    """Read a reminder request (see the module docstring).

    Args:
        text: the requester's own words, plain text.
        now: when the message was sent (aware; naive is taken as UTC).
        timezone_name: the requester's IANA zone (UTC when not a valid one).

    Returns:
        the draft; never raises for odd input.
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    tz_name = timezone_name if valid_timezone(timezone_name) else "UTC"
    tz = ZoneInfo(tz_name)
    local_now = now.astimezone(tz)
    draft = ReminderDraft(timezone=tz_name)
    s = _LEAD.sub("", text.replace("\u2019", "'"), count=1)
    # What follows the ask is what to remind of and when: a frequency word that describes one of its
    # nouns ("the weekly report") is text; one that says when ("weekly", "every Monday") is a repeat.
    m = next((r for r in _REPEAT.finditer(s) if not describes_a_noun(s, r.start(), r.end())), None)
    if m:
        draft.repeating = m[0]
        s = s[:m.start()] + _SEP + s[m.end():]
    phrases: list[str] = []
    m = _RELATIVE.search(s)
    at = relative_time(m[0], now, tz) if m else None
    if m and at is not None:
        phrases.append(m[0])
        s = s[:m.start()] + _SEP + s[m.end():]
        draft.at = at
    else:
        day, day_phrase, s = _take_day(s, local_now, draft)
        at_time, time_phrase, s = _take_time(s)
        phrases += [p for p in (day_phrase, time_phrase) if p]
        if at_time is not None and day is not None:
            draft.at = _next_at(day, day_phrase, at_time, local_now)
        elif at_time is not None and not day_phrase:
            candidate = datetime.combine(local_now.date(), at_time, tz)
            draft.at = candidate if candidate > local_now else datetime.combine(
                local_now.date() + timedelta(days=1), at_time, tz)
        elif day is not None:
            draft.day_phrase = day_phrase
    draft.when_phrase = " ".join(phrases)
    if draft.at is not None and draft.at <= now:
        draft.past = True
    draft.text = _text(s)
    return draft


def _next_at(day: date, phrase: str, at_time: time, local_now: datetime) -> datetime:
    """``day`` at ``at_time``; for a weekday or a day of the month whose time has passed, the next one
    (``friday at 9`` said on a Friday at 10 is next Friday's, as in :mod:`tools.calendar.extract`)."""
    tz = local_now.tzinfo
    at = datetime.combine(day, at_time, tz)
    if at > local_now:
        return at
    phrase = phrase.strip()
    if _WEEKDAY_PHRASE.match(phrase):
        return datetime.combine(day + timedelta(days=7), at_time, tz)
    m = MONTHDAY_PHRASE.match(phrase)
    if m:
        later = _next_monthday(int(m[1]), day + timedelta(days=1))
        if later is not None:
            return datetime.combine(later, at_time, tz)
    return at


def _take_day(s: str, local_now: datetime, draft: ReminderDraft) -> tuple[date | None, str, str]:
    for pattern in _DAYS:
        m = pattern.search(s)
        if not m:
            continue
        phrase = m[0].strip()
        day = _parse_day(phrase, local_now)
        if day is None:
            draft.bad_day = re.sub(r"^on\s+", "", phrase, flags=re.I)
        return day, phrase, s[:m.start()] + _SEP + s[m.end():]
    return None, "", s


def _parse_day(phrase: str, local_now: datetime) -> date | None:
    m = re.fullmatch(r"(?:on\s+)?(?:the\s+)?(\d{1,2})(?:st|nd|rd|th)", phrase.strip(), re.I)
    if m:  # "the 14th": this month's when it is still to come, else the next month that has it
        return _next_monthday(int(m[1]), local_now.date())
    p = phrase.lower()
    p = re.sub(r"\b(?:tmrw|tmr)\b", "tomorrow", p)
    p = re.sub(r"^(?:on\s+)+", "", p)
    p = re.sub(r"\b(?:this\s+coming|coming|this)\s+", "", p)
    p = re.sub(r"\bthe\s+(?=\d)", "", p)
    return read_day(p, local_now)


def _next_monthday(n: int, today: date) -> date | None:
    if not 1 <= n <= 31:
        return None
    year, month = today.year, today.month
    for _ in range(13):
        try:
            day = date(year, month, n)
        except ValueError:
            day = None
        if day is not None and day >= today:
            return day
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return None


def _take_time(s: str) -> tuple[time | None, str, str]:
    for i, pattern in enumerate(_TIMES):
        m = pattern.search(s)
        if not m:
            continue
        t = _time(i, m)
        if t is not None:
            return t, m[0].strip(), s[:m.start()] + _SEP + s[m.end():]
    m = _DAYPART.search(s)
    if m:
        part = (m[1] or m[2] or "eod").lower()
        return _DAYPART_TIME[part], m[0].strip(), s[:m.start()] + _SEP + s[m.end():]
    return None, "", s


def _time(kind: int, m: re.Match[str]) -> time | None:
    if kind == 3:
        return time(0) if m[1].lower() == "midnight" else time(12)
    hour, minute = int(m[1]), int(m[2] or 0) if kind in (0, 1) else 0
    if kind == 1 and m[1].startswith("0") and minute <= 59:
        return time(hour, minute)  # 05:00: a 24-hour clock
    return clock_time(hour, minute, m[3] if kind == 0 else None)  # a bare hour in office hours: "at 5" is 17:00


def _text(s: str) -> str:
    parts = [p.strip(" ,;:.!?-") for p in s.split("\u00a6")]
    text = " ".join(p for p in parts if p and p.lower() not in {"for", "on", "at", "by", "in", "from", "and"})
    text = " ".join(text.split())
    text = _TEXT_LEAD.sub("", text).strip(" ,;:.!?-")
    text = re.sub(r"\s+(?:on|at|by)$", "", text, flags=re.I)
    return text
