"""Date and time helpers every tool may share (no tool's own phrasing lives here).

- :func:`valid_timezone`: an IANA zone this machine knows.
- :func:`relative_time`: ``in two hours``, ``in 90 mins``, ``in half an hour``, ``in 3 days`` from the
  message time, read by ``dateparser`` in the requester's zone.
- :func:`read_day`: a day phrase (``tomorrow``, ``next friday``, ``march 20``) by ``dateparser``, relative to the
  message time, future preferred; :data:`MONTH` and :data:`MONTHDAY_PHRASE`, the words both tools' day
  patterns are built from.
- :func:`clock_time`: an hour and minutes as a wall-clock time, a bare hour read in office hours.
- :func:`describes_a_noun`: whether frequency words (``weekly``, ``daily``, ``each week``) describe a
  thing (``the weekly report``, ``each week's numbers``) rather than set a schedule (``weekly``,
  ``daily at 9``, ``every Monday``). Each tool's reading of repeats (the reminder's refusal, the
  calendar's series words) asks it before reading a repeat from the words of the request's object,
  so that "remind me tomorrow at 9am to send the weekly report" is one reminder.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


__all__ = ["valid_timezone", "relative_time", "read_day", "clock_time", "describes_a_noun", "MONTH", "MONTHDAY_PHRASE"]


def valid_timezone(name: str) -> bool:
    """True when ``name`` is an IANA time zone known to this machine (``tzdata``)."""
    if not name or name.startswith("/") or ".." in name:
        return False
    try:
        ZoneInfo(name)
        return True
    except (ZoneInfoNotFoundError, ValueError):
        return False


_HALF_HOUR = re.compile(r"\b(?:a\s+)?half\s+an?\s+hour\b|\bhalf\s+hour\b", re.I)
_CLOCK_UNITS = re.compile(r"\b(?:h|hrs?|hours?|m|mins?|minutes?)\s*$", re.I)


def relative_time(phrase: str, now: datetime, tz: ZoneInfo) -> datetime | None:
    """The time ``phrase`` (``in two hours``, ``in 1.5 hours``, ``in forty-five minutes``, ``in half an
    hour``, ``in 3 days``, ``in a week``) names, counted from ``now`` by ``dateparser``.

    Hours and minutes are elapsed time (``in 2 hours`` is two hours later, across a change of clocks
    too); days and weeks keep the wall-clock time in ``tz`` (``in 3 days`` at the same time of day
    there). The result is rounded up to the next whole minute.

    Args:
        phrase: the words, ``in`` included.
        now: the message time (aware; naive is taken as UTC).
        tz: the requester's zone.

    Returns:
        the time, aware in ``tz``, or None when ``dateparser`` does not read the phrase.
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    local_now = now.astimezone(tz)
    base = local_now.replace(tzinfo=None)
    text = _HALF_HOUR.sub("30 minutes", " ".join(phrase.split()))
    text = re.sub(r"\bforty\s?five\b", "forty-five", text, flags=re.I)
    settings = {"RELATIVE_BASE": base, "PREFER_DATES_FROM": "future", "RETURN_AS_TIMEZONE_AWARE": False}
    import dateparser  # on a relative time phrase only: tools.dates is on every turn's path

    parsed = dateparser.parse(text, languages=["en"], settings=settings)
    if parsed is None or parsed <= base:
        return None
    if _CLOCK_UNITS.search(text):
        at = (now + (parsed - base)).astimezone(tz)
    else:
        at = parsed.replace(tzinfo=tz)
    if at.second or at.microsecond:
        at = at.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return at


#: A month's name or its abbreviation (a regex fragment, no group: match it case-insensitively).
MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
#: A day of the month alone (``the 14th``, ``on 3rd``): its number is group 1.
MONTHDAY_PHRASE = re.compile(r"^(?:on\s+)?(?:the\s+)?(\d{1,2})(?:st|nd|rd|th)$", re.I)


def read_day(phrase: str, local_now: datetime) -> date | None:
    """The day ``phrase`` names (``tomorrow``, ``friday``, ``march 20``, ``2025-03-20``, ``3/20``), read by
    ``dateparser`` in English relative to ``local_now`` (the message time in the requester's zone): a
    future day is preferred, month before day (``3/4`` is March 4th), the 1st for a month alone.

    Returns:
        the day, or None when ``dateparser`` does not read the phrase (``feb 30``).
    """
    settings = {"RELATIVE_BASE": local_now.replace(tzinfo=None), "PREFER_DATES_FROM": "future",
                "RETURN_AS_TIMEZONE_AWARE": False, "DATE_ORDER": "MDY", "PREFER_DAY_OF_MONTH": "first"}
    import dateparser  # on a day phrase only: tools.dates is on every turn's path

    parsed = dateparser.parse(phrase, languages=["en"], settings=settings)
    return parsed.date() if parsed else None


def clock_time(hour: int, minute: int, ampm: str | None = None, bias: str | None = None) -> time | None:
    """A wall-clock time from an hour and minutes.

    With ``ampm`` (``"am"``, ``"p.m."``, ``"p"``...) the hour is 1-12 on a 12-hour clock. Without it, 0 and
    13-23 are a 24-hour clock, and a bare 1-12 is read in office hours: 1-6 is pm, 7-12 as said, unless
    ``bias`` (``"am"``/``"pm"``, from a part of the day: ``tonight at 8``) says otherwise.

    Returns:
        the time, or None for an hour or minute out of range.
    """
    if minute > 59:
        return None
    if ampm:
        if not 1 <= hour <= 12:
            return None
        pm = ampm.lower().startswith("p")
        hour = hour % 12 + (12 if pm else 0)
        return time(hour, minute)
    if hour > 23:
        return None
    if hour >= 13 or hour == 0:
        return time(hour, minute)
    if bias == "pm" and hour < 12:
        return time(hour + 12, minute)
    if bias == "am":
        return time(hour % 12, minute)
    if 1 <= hour <= 6:
        return time(hour + 12, minute)
    return time(hour, minute)


#: Frequency words that can stand before a noun as its adjective ("the weekly report", "recurring costs").
_FREQUENCY_ADJECTIVE = re.compile(r"(?:bi-?|semi-?)?(?:hourly|daily|nightly|weekly|monthly|quarterly|yearly|annual)|"
                                  r"fortnightly|(?:week|work|business|working)\s*days?|recurring|recurrent|repeating|"
                                  r"regular", re.I)
#: Words that cannot continue a noun phrase after a frequency word: with one of them (or nothing)
#: next, the frequency word is an adverb of the schedule ("weekly on Fridays", "daily at 9", "daily
#: until June", "remind me weekly to ...").
_NOT_A_NOUN = frozenset("""
a an the this that these those my our your their his her its every each next last other
at on in by to for with from of about into onto until till til through thru starting beginning after before
during around between within over via per since except like as
and or but nor then so plus
me us you him them it i we they
today tonight tomorrow tmrw tmr yesterday now morning afternoon evening night noon midday midnight eod
monday tuesday wednesday thursday friday saturday sunday mon tue tues wed weds thu thur thurs fri sat sun
mondays tuesdays wednesdays thursdays fridays saturdays sundays
please pls plz thanks thank again too also instead anyway going forward thereafter onwards henceforth
is are was be will would should can could am pm
""".split())
_NEXT_WORD = re.compile(r"[ \t-]*(1[:-]1|1on1|[^\W\d_][\w'&+/-]*)", re.I)
_POSSESSIVE = re.compile(r"(?:'s|s')(?![\w'])", re.I)


def describes_a_noun(text: str, start: int, end: int) -> bool:
    """True when the frequency words ``text[start:end]`` describe a thing, not a schedule.

    A thing: an adjective before a noun (``the weekly report``, ``daily standup notes``, ``my
    weekly 1:1``) or a possessive before one (``each week's numbers``). A schedule: the same words
    with no noun after them (``weekly``, ``daily at 9``, ``weekly on Fridays``, ``remind me daily to
    ...``) and every ``every``/``each`` phrase that is not possessive (``every Monday``, ``each day``).

    The test is the word after: a noun phrase goes on with a word that no preposition, conjunction,
    pronoun, time word or politeness ends it with. Which part of a request is its object (the
    reminder's text, a meeting's topic) is the caller's to say: there a noun's adjective is not a
    repeat; elsewhere (``a weekly sync``, the meeting itself) it may be.
    """
    words = text[start:end].split()
    if not words:
        return False
    rest = text[end:]
    own = _POSSESSIVE.match(rest)
    if own:
        rest = rest[own.end():]
    elif not _FREQUENCY_ADJECTIVE.fullmatch(" ".join(words)):
        return False
    m = _NEXT_WORD.match(rest)
    return m is not None and m[1].lower().rstrip("'.") not in _NOT_A_NOUN
