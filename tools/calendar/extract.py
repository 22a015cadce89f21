"""Meeting details from a chat message, without an LLM.

:func:`extract_event` reads one message (the requester's own words, never retrieved text) and
returns an :class:`EventDraft`: title, start, length, attendees, time zone, video call, location,
and what is missing or ambiguous. The planner turns a complete draft into
:class:`~tools.calendar.args.CalendarCreateArgs`, and an incomplete one into a single clarifying
question (:meth:`EventDraft.clarification`).

What it understands:

- **dates** with ``dateparser`` (``RELATIVE_BASE`` = the message time in the requester's zone,
  ``PREFER_DATES_FROM="future"``): today, tomorrow, the day after tomorrow, ``next tue``,
  ``March 20``, ``20th of March``, ``2025-03-20``, ``3/20``, ``in 2 days``, ``in two weeks``;
  a weekday (``on friday``, ``thursday``) or a day of the month (``on the 14th``) is the *next*
  one whose start, at the time asked, is after the message (today's when it is still ahead; the
  next month's 14th when this month's has passed), and a time alone (``at 3pm``) is today's or
  tomorrow's, whichever comes first; vague ones (``next week``, ``sometime``, ``end of the
  month``) are *ambiguous*, not guessed;
- **series** (:mod:`tools.calendar.series_words`): ``weekly``, ``every other tuesday``, ``every
  weekday``, ``monthly on the 1st``, ``biweekly``, ``each week``, ``for 6 weeks``...; they become an
  RFC 5545 rule (:attr:`EventDraft.recurrence`) and the start is the rule's first occurrence after
  the message (a day named as ``starting dec 1`` or ``from next week`` is the earliest); in the topic
  (``to go over the weekly report``, ``about the daily numbers``) a frequency word that describes a
  noun is part of the title, not a series;
- **times**: ``3pm``, ``3:30 pm``, ``15:00``, ``14h30``, ``noon``, ``at 10`` (a bare hour is read
  in office hours: 1-6 is pm, 7-11 am, unless the message says morning/evening/tonight),
  ranges (``2-3pm``, ``from 10 to 11:30am``, ``between 2 and 3pm``), an end (``until 4pm``),
  relative starts (``in 30 minutes``, ``in two hours``: :func:`tools.dates.relative_time`); a part
  of the day alone (``tomorrow afternoon``) is ambiguous;
- **time zones**: abbreviations (``PT``, ``ET``, ``CET``, ``UTC``...), IANA names
  (``Europe/Berlin``), ``UTC+2``; the requester's zone otherwise;
- **durations**: ``30 min``, ``45-minute``, ``an hour``, ``1.5h``, ``90 mins``, ``half an hour``,
  ``an hour and a half``, ``1h30``, ``hour-long``;
- **attendees**: e-mail addresses. The text is plain: each platform adapter has already turned its
  mentions into the person's e-mail address where it could look it up, and into ``@Name``
  otherwise. An ``@Name`` (and ``@here``, ``@channel``, ``@everyone``) and people named without an
  address (``with bob``, ``with everyone``) make the draft incomplete: the question asks for their
  addresses;
- **title**: a quoted or ``called ...`` title, else the meeting noun phrase (``release review``,
  ``incident retro``, ``Q3 planning session``), else ``about/for X``, else ``Meeting``;
- **video** (``video call``, ``Google Meet``, ``Zoom``, ``with a meet link``) and a room
  (``in room 4B``, ``in the Everest room``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

import dateparser
from dateutil.relativedelta import relativedelta

from tools.dates import relative_time

from .args import MAX_DURATION_MINUTES, MIN_DURATION_MINUTES, is_email, valid_timezone
from .recurrence import WEEKDAY_CODES, build_rrule, check_rrule, next_start
from .series_words import SeriesWords, take_series

__all__ = ["EventDraft", "extract_event", "parse_duration", "at_names", "AT_NAME"]

#: A person named with ``@`` whose address the adapter could not resolve (``@Bob``, ``@bob.smith``,
#: ``@here``); never part of an e-mail address, and never ``@ 3pm``.
AT_NAME = re.compile(r"(?<![\w.+%'-])@([A-Za-z][\w'-]*(?:\.[A-Za-z][\w'-]*)*)")
_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,63}\b")
_SEP = " \u00a6 "  # what a consumed span becomes: it breaks phrases (titles, names) apart

_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40,
    "fortyfive": 45, "forty-five": 45, "forty five": 45, "sixty": 60, "ninety": 90,
}
_NUM = (r"(?:\d+(?:[.,]\d+)?|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
        r"thirty|forty[- ]?five|forty|sixty|ninety)")
_HOUR_UNIT = r"(?:hours?|hrs?|h)"
_MIN_UNIT = r"(?:minutes?|mins?|m)"

_DURATIONS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], float]]] = [
    (re.compile(r"\b(?:an?|one)\s+hour\s+and\s+a\s+half\b", re.I), lambda m: 90),
    (re.compile(r"\b(\d+)\s+and\s+a\s+half\s+hours?\b", re.I), lambda m: int(m[1]) * 60 + 30),
    (re.compile(r"\b(?:a\s+)?half(?:[- ]an)?[- ]hour\b|\bhalf\s+an\s+hour\b", re.I), lambda m: 30),
    (re.compile(r"\b(?:a\s+)?quarter(?:\s+of\s+an)?[- ]hour\b", re.I), lambda m: 15),
    (re.compile(r"\b(\d{1,2})\s*(?:h|hrs?|hours?)\s*(?:and\s+)?(\d{1,2})\s*(?:m|mins?|minutes?)?(?![\w:])", re.I),
     lambda m: int(m[1]) * 60 + int(m[2])),
    (re.compile(rf"\b({_NUM})[\s-]*{_HOUR_UNIT}(?:[\s-]*long)?\b", re.I), lambda m: _number(m[1]) * 60),
    (re.compile(rf"\b({_NUM})[\s-]*{_MIN_UNIT}(?:[\s-]*long)?\b", re.I), lambda m: _number(m[1])),
    (re.compile(r"\bhour[- ]long\b", re.I), lambda m: 60),
]
_RELATIVE_START = re.compile(rf"\bin\s+({_NUM})\s*({_HOUR_UNIT}|{_MIN_UNIT})\b", re.I)

# -- times ------------------------------------------------------------------------------------------
_AMPM = r"(a\.?m\.?|p\.?m\.?)(?![a-z])"
_T_AMPM = rf"(\d{{1,2}})(?:[:.](\d{{2}}))?\s*{_AMPM}"
_T_24 = r"([01]?\d|2[0-3])[:h]([0-5]\d)(?!\d)"
_T_ANY = rf"(?:{_T_AMPM}|{_T_24}|(\d{{1,2}})(?![\d:.]))"
_RANGE = re.compile(
    rf"\b(?:from\s+|between\s+)?(?:at\s+)?(\d{{1,2}})(?:[:.](\d{{2}}))?\s*(?:{_AMPM})?\s*"
    rf"(?:-|\u2013|\u2014|to|until|till|and)\s*(\d{{1,2}})(?:[:.](\d{{2}}))?\s*(?:{_AMPM})?", re.I)
_UNTIL = re.compile(rf"\b(?:until|till|til|to)\s+{_T_ANY}", re.I)
_TIME_AMPM = re.compile(rf"(?:\b(?:at|@)\s*)?\b{_T_AMPM}", re.I)
_TIME_24 = re.compile(rf"(?:\b(?:at|@)\s*)?\b{_T_24}", re.I)
_TIME_AT = re.compile(r"(?:\bat|@)\s*(\d{1,2})(?![\d:.]|\s*(?:%|people|persons|of\b))\b", re.I)
_TIME_OCLOCK = re.compile(r"(?:\bat\s+)?\b(\d{1,2})\s*o'?\s?clock\b", re.I)
_TIME_HALF_PAST = re.compile(r"(?:\bat\s+)?\bhalf\s+past\s+(\d{1,2})\b", re.I)
_TIME_NAMED = re.compile(r"(?:\bat\s+)?\b(noon|midday|midnight)\b", re.I)
_DAYPART = re.compile(r"\b(?:(?:in\s+the\s+|this\s+|tomorrow\s+)?(morning|afternoon|evening)|tonight|lunch(?:\s*time)?|"
                      r"after\s+lunch|eod|end\s+of\s+(?:the\s+)?day|first\s+thing)\b", re.I)

# -- dates ------------------------------------------------------------------------------------------
_WEEKDAYS = {"mon": "monday", "monday": "monday", "tue": "tuesday", "tues": "tuesday", "tuesday": "tuesday",
             "wed": "wednesday", "weds": "wednesday", "wednesday": "wednesday", "thu": "thursday", "thur": "thursday",
             "thurs": "thursday", "thursday": "thursday", "fri": "friday", "friday": "friday",
             "saturday": "saturday", "sunday": "sunday"}
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_DATES: list[re.Pattern[str]] = [
    re.compile(r"\b(?:the\s+)?day\s+after\s+(?:tomorrow|tmrw|tmr)\b", re.I),
    re.compile(r"\b(?:today|tomorrow|tmrw|tmr|tomorow|tommorow|tommorrow|2moro|yesterday)\b", re.I),
    re.compile(r"\b(?:(?:on|this|next|coming|this\s+coming)\s+)*(?:" + "|".join(sorted(_WEEKDAYS, key=len, reverse=True))
               + r")\b\.?", re.I),
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    re.compile(rf"\b(?:on\s+)?(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b\.?(?:,?\s+\d{{4}}\b)?", re.I),
    re.compile(rf"\b(?:on\s+)?{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}}\b)?", re.I),
    re.compile(r"\b(?:on\s+)?\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"),
    re.compile(r"\b(?:on\s+)?the\s+\d{1,2}(?:st|nd|rd|th)\b", re.I),
    re.compile(rf"\bin\s+{_NUM}\s+(?:days?|weeks?)\b", re.I),
]
_VAGUE_DATE = re.compile(
    r"\b(?:(?:early|late|later|sometime|some\s+time)\s+)?(?:next|this|coming|the\s+following)\s+(?:week|month)\b|"
    r"\b(?:later\s+this|end\s+of\s+(?:the\s+)?|end\s+of\s+next)\s*(?:week|month)\b|\bsometime\b|\bsome\s+time\b|"
    r"\bsoon\b|\bat\s+some\s+point\b|\b(?:this|next)\s+weekend\b|\bnext\s+few\s+days\b|\bwhenever\b|\basap\b",
    re.I)

# -- time zones -------------------------------------------------------------------------------------
_ZONE_ABBR = {
    "UTC": "UTC", "GMT": "Etc/GMT", "Z": "UTC",
    "ET": "America/New_York", "EST": "America/New_York", "EDT": "America/New_York",
    "CT": "America/Chicago", "CST": "America/Chicago", "CDT": "America/Chicago",
    "MT": "America/Denver", "MST": "America/Denver", "MDT": "America/Denver",
    "PT": "America/Los_Angeles", "PST": "America/Los_Angeles", "PDT": "America/Los_Angeles",
    "CET": "Europe/Berlin", "CEST": "Europe/Berlin", "BST": "Europe/London", "WET": "Europe/Lisbon",
    "EET": "Europe/Athens", "IST": "Asia/Kolkata", "JST": "Asia/Tokyo", "SGT": "Asia/Singapore",
    "AEST": "Australia/Sydney", "AEDT": "Australia/Sydney",
}
_ZONE_WORDS = {"pacific": "America/Los_Angeles", "eastern": "America/New_York", "central": "America/Chicago",
               "mountain": "America/Denver", "london": "Europe/London", "berlin": "Europe/Berlin",
               "paris": "Europe/Paris", "new york": "America/New_York", "sf": "America/Los_Angeles",
               "tokyo": "Asia/Tokyo", "sydney": "Australia/Sydney", "india": "Asia/Kolkata", "uk": "Europe/London"}
_ZONE_ABBR_RE = re.compile(r"(?<![\w/])(?:in\s+)?(" + "|".join(k for k in _ZONE_ABBR if k != "Z") + r")(?![\w/+-])")
_ZONE_OFFSET_RE = re.compile(r"\b(?:UTC|GMT)\s*([+-])\s*(\d{1,2})(?::?00)?\b")
_ZONE_IANA_RE = re.compile(r"\b(?:in\s+)?([A-Z][A-Za-z_]+/[A-Z][A-Za-z_]+(?:/[A-Z][A-Za-z_]+)?)\b")
_ZONE_WORD_RE = re.compile(r"\b(?:in\s+)?(" + "|".join(_ZONE_WORDS) + r")\s+time\b", re.I)

# -- the rest ---------------------------------------------------------------------------------------
_VIDEO = re.compile(r"\b(?:(?:with\s+)?(?:a\s+)?(?:google\s+)?meet(?:\s+link)?|(?:a\s+)?video(?:\s+(?:link|conference))?|"
                    r"zoom(?:\s+link)?|hangouts?|(?:on|in|via|over)\s+(?:ms\s+|microsoft\s+)?teams|"
                    r"(?:ms\s+|microsoft\s+)?teams\s+(?:link|meeting|call|invite|invitation))\b",
                    re.I)
_WEEKDAY_PHRASE = re.compile(r"^(?:(?:on|this|coming|this\s+coming)\s+)*(" + "|".join(_WEEKDAYS) + r")\.?$", re.I)
_MONTHDAY_PHRASE = re.compile(r"^(?:on\s+)?(?:the\s+)?(\d{1,2})(?:st|nd|rd|th)$", re.I)
_NEXT_PERIOD = re.compile(r"^(?:(?:early|starting|from|beginning)\s+)?(?:next|the\s+following)\s+(week|month)$", re.I)
_MEET_VERB = re.compile(r"\b(?:meet|meeting)\b", re.I)
_LOCATION = re.compile(r"\bin\s+((?:the\s+)?[A-Z][\w-]*(?:\s+[A-Z][\w-]*)*\s+room|room\s+[\w-]+|"
                       r"(?:the\s+)?(?:office|cafeteria|kitchen|lobby))\b")
_QUOTED = re.compile(r"[\"\u201c\u201d]([^\"\u201c\u201d]{2,120})[\"\u201c\u201d]|(?<!\w)'([^']{2,120})'(?!\w)")
_CALLED = re.compile(r"\b(?:called|titled|named|subject(?:\s+line)?:?)\s+(.+?)"
                     r"(?=\s+(?:with|w/|on|at|for|from|in|tomorrow|today|and)\b|\s*(?:\u00a6|$|[,.;!?]))", re.I)

_MEETING_NOUNS = {
    "review", "retro", "retrospective", "sync", "standup", "stand-up", "1:1", "1-1", "1on1", "one-on-one",
    "demo", "interview", "workshop", "planning", "kickoff", "kick-off", "offsite", "huddle", "catch-up", "catchup",
    "brainstorm", "walkthrough", "walk-through", "debrief", "postmortem", "post-mortem", "presentation", "check-in",
    "checkin", "onboarding", "training", "lunch", "coffee", "pairing", "grooming", "refinement", "triage", "all-hands",
    "townhall", "town-hall", "readout", "meetup", "design", "session", "discussion", "briefing", "handover",
}
_GENERIC_NOUNS = {"meeting", "call", "event", "invite", "invitation", "chat", "appointment", "slot", "time", "meet",
                  "hangout", "block", "calendar"}
_STOP = {
    "a", "an", "the", "our", "my", "your", "their", "his", "her", "its", "this", "that", "these", "those", "some",
    "can", "could", "would", "will", "you", "pls", "please", "plz", "kindly", "i", "we", "me", "us", "let's", "lets",
    "let", "need", "needs", "want", "wanna", "like", "to", "d", "book", "schedule", "set", "setup", "up", "create",
    "arrange", "organise", "organize", "put", "add", "send", "make", "hold", "get", "hey", "hi", "hello", "bot",
    "quick", "short", "brief", "little", "new", "another", "with", "w/", "for", "on", "at", "about", "and", "in",
    "from", "by", "of", "re", "regarding", "invite", "inviting", "also", "just", "then", "next", "a.m.", "p.m.",
    "is", "be", "it", "there", "here", "all", "everyone", "everybody", "team", "folks", "people", "guys", "start",
    "starting", "ok", "okay", "thanks", "thx", "please.", "calendar", "cal", "gcal", "outlook",
}
_PEOPLE_FILLER = {"me", "us", "myself", "and", "or", "also", "both", "too", "as", "well", "plus", ",", "&", "+",
                  "a", "an", "the", "for", "please", "pls", "video", "zoom", "meet", "link", "google", "call"}
_TITLE_WORD = re.compile(r"[\w][\w:/&'.+-]*", re.UNICODE)
#: Where a meeting's topic starts ("about the launch", "to go over the weekly report"): its words name
#: the title, and a frequency word describing one of its nouns is no series (see ``take_series``).
_TOPIC_LEAD = re.compile(r"\b(?:about|regarding|re:?|to (?:discuss|go over|go through|talk about|talk through|"
                         r"walk through|review|plan)|on the topic of)(?=\s)", re.I)


def _number(s: str) -> float:
    s = s.lower().strip()
    if s in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[s])
    if s.replace("-", " ") in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[s.replace("-", " ")])
    return float(s.replace(",", "."))


def at_names(text: str) -> list[str]:
    """The ``@Name`` mentions left in ``text`` (``["@Bob", "@here"]``), in order, without repeats."""
    return list(dict.fromkeys(f"@{m}" for m in AT_NAME.findall(text)))


def parse_duration(text: str) -> int | None:
    """The first meeting length in ``text``, in whole minutes (``"1.5h"`` -> 90), or None."""
    for pattern, minutes in _DURATIONS:
        m = pattern.search(text)
        if m and not _is_relative(text, m.start()):
            return round(minutes(m))
    return None


def _is_relative(text: str, start: int) -> bool:
    """True when the number at ``start`` follows "in" (``in 30 minutes`` is a start, not a length)."""
    return bool(re.search(r"\bin\s+$", text[max(0, start - 4):start], re.I))


@dataclass(slots=True)
class EventDraft:
    """What :func:`extract_event` understood.

    Attributes:
        title: the meeting's title (``Meeting`` when nothing better was found).
        start: the start, aware, in ``timezone``; None when the day or the time is missing or vague.
        duration_minutes: the length the message gave (a range or an end counts); None when it gave none.
        attendees: e-mail addresses, lower-case, in order.
        unknown_people: people named without an address (``bob``, ``everyone``, ``@Bob``, ``@here``).
        timezone: the IANA zone the times are read in (named in the message, else the requester's).
        zone_named: True when the message named the zone.
        video_conference: a video call was asked for.
        location: a room or place, or "".
        date_phrase, time_phrase: the words read as the day and the time ("" when absent).
        missing: essentials that are absent: ``"date"``, ``"time"`` (both when no when at all).
        vague: the vague words that stood for a day or a time (``"next week"``, ``"afternoon"``).
        past: True when the start read is not after the message time.
        bad_duration: a length outside the allowed range, in minutes (0 when fine).
        recurring: the words asking for a series (``every monday``, ``weekly``), or "".
        recurrence: the series as an RFC 5545 ``RRULE`` value (``FREQ=WEEKLY;BYDAY=MO``), or None for
            one event; ``start`` is then its first occurrence. A draft with ``recurring`` words but no
            rule (``a recurring sync``) is incomplete.
        series_problem: why the series asked for cannot be booked, or "".
        bad_date: a day phrase that names no real date (``feb 30``), or "".
    """

    title: str = "Meeting"
    start: datetime | None = None
    duration_minutes: int | None = None
    attendees: list[str] = field(default_factory=list)
    unknown_people: list[str] = field(default_factory=list)
    timezone: str = "UTC"
    zone_named: bool = False
    video_conference: bool = False
    location: str = ""
    date_phrase: str = ""
    time_phrase: str = ""
    missing: list[str] = field(default_factory=list)
    vague: list[str] = field(default_factory=list)
    past: bool = False
    bad_duration: int = 0
    recurring: str = ""
    recurrence: str | None = None
    series_problem: str = ""
    bad_date: str = ""

    @property
    def complete(self) -> bool:
        """True when nothing essential is missing, vague or wrong (the event can be proposed)."""
        return (self.start is not None and not self.missing and not self.vague and not self.past
                and not self.bad_duration and not self.unknown_people
                and not (self.recurring and not self.recurrence) and not self.series_problem)

    def clarification(self) -> str | None:
        """One question asking for everything that is missing, or None when the draft is complete."""
        if self.complete:
            return None
        what = f"the {self.title[0].lower() + self.title[1:]}" if self.title != "Meeting" else "the meeting"
        needs: list[str] = []
        example = ""
        if self.past:
            when = self.start.strftime("%a %d %b at %H:%M") if self.start else "That time"
            needs.append(f"a start in the future ({when} has already passed)")
            example = " e.g. \u201ctomorrow at 3pm\u201d"
        elif "date" in self.missing and "time" in self.missing:
            needs.append("a day and a time" + (f" (I can't read \u201c{self.bad_date}\u201d as a date)" if self.bad_date
                                               else f" (\u201c{self.vague[0]}\u201d is not specific enough)"
                                               if self.vague else ""))
            example = " e.g. \u201cFriday at 10am\u201d"
        elif "date" in self.missing or (self.vague and self.start is None and self.time_phrase):
            vague = next((v for v in self.vague), "")
            why = (f" (I can't read \u201c{self.bad_date}\u201d as a date)" if self.bad_date
                   else f" (\u201c{vague}\u201d is not specific enough)" if vague else "")
            at = re.sub(r"^(?:at|@)\s*", "", self.time_phrase)
            needs.append("which day" + why + (f" at {at}" if at else ""))
            example = " e.g. \u201cTuesday\u201d or \u201cMarch 20\u201d"
        elif "time" in self.missing:
            day = self.date_phrase or "that day"
            vague = next((v for v in self.vague), "")
            if self.recurring and not self.date_phrase:
                needs.append(f"a start time for the series (\u201c{self.recurring}\u201d)")
            else:
                needs.append(f"a start time {day}" if day.split()[0].lower() in {"today", "tomorrow", "on", "in",
                                                                                   "the", "next", "this"}
                             else f"a start time on {day}")
            if vague:
                needs[-1] += f" (\u201c{vague}\u201d is not specific enough)"
            example = " e.g. \u201cat 3pm\u201d"
        if self.series_problem:
            needs.append(f"a series I can book ({self.series_problem})")
            example = example or " e.g. \u201cevery Monday at 10am\u201d"
        elif self.recurring and not self.recurrence and not self.missing:
            needs.append(f"how often it repeats (\u201c{self.recurring}\u201d does not say)")
            example = example or " e.g. \u201cevery Monday\u201d or \u201cmonthly on the 1st\u201d"
        if self.bad_duration:
            needs.append(f"a length between {MIN_DURATION_MINUTES} minutes and {MAX_DURATION_MINUTES // 60} hours "
                         f"({self.bad_duration} minutes is out of range)")
        for name in self.unknown_people:
            needs.append(f"an e-mail address for \u201c{name}\u201d (I could not look it up)" if name.startswith("@")
                         else f"an e-mail address or @mention for \u201c{name}\u201d")
        listed = needs[0] if len(needs) == 1 else ", ".join(needs[:-1]) + " and " + needs[-1]
        return (f"To book {what} I still need {listed}. Could you tell me{example}? "
                "Nothing has been booked yet.")


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
    m = _QUOTED.search(s)
    if m:
        quoted = (m[1] or m[2]).strip()
        s = s[:m.start()] + _SEP + s[m.end():]

    # People: e-mail addresses, then the @names nobody could resolve (@Bob, @here).
    for addr in _EMAIL.findall(s):
        if is_email(addr):
            _add(draft.attendees, addr.lower())
    s = _EMAIL.sub(_SEP, s)
    for name in at_names(s):
        _add(draft.unknown_people, name.lower() if name.lower() in {"@here", "@channel", "@everyone"} else name)
    s = AT_NAME.sub(_SEP, s)

    # Time zone.
    zone, s = _take_zone(s)
    draft.zone_named = zone is not None
    draft.timezone = zone or (timezone_name if valid_timezone(timezone_name) else "UTC")
    tz = ZoneInfo(draft.timezone)
    local_now = now.astimezone(tz)

    # Video and room.
    if _VIDEO.search(s) and not _only_meet_verb(s):
        draft.video_conference = True
        s = _VIDEO.sub(lambda m: m[0] if _MEET_VERB.fullmatch(m[0].strip()) else _SEP, s)
    m = _LOCATION.search(s)
    if m:
        draft.location = m[1].strip()
        s = s[:m.start()] + _SEP + s[m.end():]

    # A relative start ("in 30 minutes") is both the day and the time.
    relative_start: datetime | None = None
    m = _RELATIVE_START.search(s)
    if m:
        relative_start = relative_time(m[0], now, tz)  # dateparser; None for "in 0 minutes"
    if m and relative_start is not None:
        draft.time_phrase = m[0]
        s = s[:m.start()] + _SEP + s[m.end():]

    series, s = take_series(s, _TOPIC_LEAD)
    if series:
        draft.recurring = series.phrase or series.unclear

    # Length.
    for pattern, minutes in _DURATIONS:
        m = pattern.search(s)
        if m:
            draft.duration_minutes = round(minutes(m))
            s = s[:m.start()] + _SEP + s[m.end():]
            break

    # Parts of the day bias bare hours ("tonight at 8" is 20:00) and, alone, are vague.
    daypart = _DAYPART.search(s)
    bias = None
    if daypart:
        word = daypart[0].lower()
        bias = "am" if "morning" in word or "first thing" in word else "pm"

    # Times: a range, an end, a start.
    start_t: time | None = None
    end_t: time | None = None
    m = _RANGE.search(s)
    if m and (m[3] or m[6] or ":" in m[0] or "from" in m[0].lower() or "between" in m[0].lower()
              or m[0].lower().lstrip().startswith("at") or _bare_hour_range(m, s)):
        h1, mi1, ap1, h2, mi2, ap2 = m[1], m[2], m[3], m[4], m[5], m[6]
        end_t = _clock(int(h2), int(mi2 or 0), ap2, bias)
        first_ampm = ap1 or (ap2 if ap2 and int(h1) <= int(h2) else None)
        start_t = _clock(int(h1), int(mi1 or 0), first_ampm, bias)
        if start_t and end_t and end_t <= start_t and not ap1 and ap2 and ap2.lower().startswith("p"):
            start_t = _clock(int(h1), int(mi1 or 0), "am", None)
        if start_t is not None and end_t is not None:
            draft.time_phrase = m[0].strip()
            s = s[:m.start()] + _SEP + s[m.end():]
        else:
            start_t = end_t = None
    if start_t is None:
        m = _UNTIL.search(s)
        if m:
            end_t = _time_from_any(m, bias)
            if end_t is not None:
                s = s[:m.start()] + _SEP + s[m.end():]
        for pattern in (_TIME_AMPM, _TIME_24, _TIME_NAMED, _TIME_HALF_PAST, _TIME_OCLOCK, _TIME_AT):
            m = pattern.search(s)
            if not m:
                continue
            t = _time_from(pattern, m, bias)
            if t is not None:
                start_t = t
                draft.time_phrase = m[0].strip()
                s = s[:m.start()] + _SEP + s[m.end():]
                break

    # The day.
    date_match = None
    for pattern in _DATES:
        date_match = pattern.search(s)
        if date_match:
            break
    day: date | None = None
    kind: tuple[str, int] | None = None  # ("weekday", 0-6) or ("monthday", 1-31): the next one counts
    if date_match:
        draft.date_phrase = date_match[0].strip()
        day = _parse_day(draft.date_phrase, local_now)
        if day is None:  # "feb 30": a day was named but is no date; never fall back to today
            draft.bad_date = re.sub(r"^on\s+", "", draft.date_phrase, flags=re.I)
            draft.vague.append(draft.date_phrase)
        kind = _day_kind(draft.date_phrase)
        s = s[:date_match.start()] + _SEP + s[date_match.end():]
    not_before: date | None = None
    vague = _VAGUE_DATE.search(s)
    if vague and day is None:
        period = _NEXT_PERIOD.match(vague[0].strip())
        if series and series.freq and period:  # "every monday starting next week": where the series begins
            not_before = _next_period(local_now.date(), period[1].lower())
        else:
            draft.vague.append(vague[0].strip())
        s = s[:vague.start()] + _SEP + s[vague.end():]
    if daypart and start_t is None and relative_start is None:
        draft.vague.append(daypart[0].strip())
    if daypart:
        s = _DAYPART.sub(_SEP, s)

    # Put the start together.
    if series and series.freq and not draft.vague:
        if relative_start is not None:
            day, start_t = relative_start.date(), relative_start.time()
        _series_start(draft, series, day or not_before, kind, start_t, now, tz)
    elif relative_start is not None:
        draft.start = relative_start
    elif start_t is not None:
        if kind is not None and day is not None:
            draft.start = next_start(_kind_rule(kind), start_t, now, tz)
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
    draft.unknown_people.extend(_named_people(s))

    # Title.
    draft.title = _title(quoted, s)
    return draft


def _bare_hour_range(m: re.Match[str], s: str) -> bool:
    """True for ``10-12`` read as hours: a dash between two hours, the second later in office hours,
    and no count after it (``10-12 people``)."""
    if not re.fullmatch(r"\d{1,2}\s*[-\u2013]\s*\d{1,2}", m[0].strip()):
        return False
    if re.search(r"[\d/.-]\s*$", s[:m.start()]) or re.match(r"[/.-]\d", s[m.end():]):
        return False  # part of a date (2025-03-18, 3/10-12)
    if re.match(r"\s*(?:people|persons|attendees|guests|%|min|mins|minutes|h|hrs?|hours?|days?|weeks?)\b",
                s[m.end():], re.I):
        return False
    first, second = _clock(int(m[1]), 0, None, None), _clock(int(m[4]), 0, None, None)
    return first is not None and second is not None and first < second and 7 <= first.hour and second.hour <= 21


def _day_kind(phrase: str) -> tuple[str, int] | None:
    """``("weekday", 0-6)`` for ``on thursday``, ``("monthday", 14)`` for ``on the 14th``, else None."""
    m = _WEEKDAY_PHRASE.match(phrase.strip())
    if m:
        return "weekday", WEEKDAY_CODES.index(_WEEKDAYS[m[1].lower()][:2].upper())
    m = _MONTHDAY_PHRASE.match(phrase.strip())
    if m and 1 <= int(m[1]) <= 31:
        return "monthday", int(m[1])
    return None


def _kind_rule(kind: tuple[str, int]) -> str:
    """The rule whose next occurrence is the day meant (a weekday, a day of the month)."""
    if kind[0] == "weekday":
        return build_rrule("WEEKLY", byday=[WEEKDAY_CODES[kind[1]]])
    return build_rrule("MONTHLY", bymonthday=kind[1])


def _next_period(today: date, unit: str) -> date:
    """The first day of next week (Monday) or next month."""
    if unit == "week":
        return today + timedelta(days=7 - today.weekday())
    return (today.replace(day=1) + timedelta(days=32)).replace(day=1)


def _series_start(draft: EventDraft, w: SeriesWords, day: date | None, kind: tuple[str, int] | None,
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
        first = local_now.date().replace(day=1) if unit == "month" else _parse_day(f"{unit} 1", local_now)
        if first is None:
            return None
        return (first.replace(day=1) + relativedelta(months=1)) - timedelta(days=1)
    return _parse_day(phrase, local_now)


def _add(items: list[str], value: str) -> None:
    if value not in items:
        items.append(value)


def _take_zone(s: str) -> tuple[str | None, str]:
    m = _ZONE_OFFSET_RE.search(s)
    if m:
        hours = int(m[2])
        if hours <= 14:
            name = "UTC" if hours == 0 else f"Etc/GMT{'-' if m[1] == '+' else '+'}{hours}"
            return name, s[:m.start()] + _SEP + s[m.end():]
    m = _ZONE_IANA_RE.search(s)
    if m and valid_timezone(m[1]):
        return m[1], s[:m.start()] + _SEP + s[m.end():]
    m = _ZONE_WORD_RE.search(s)
    if m:
        return _ZONE_WORDS[m[1].lower()], s[:m.start()] + _SEP + s[m.end():]
    m = _ZONE_ABBR_RE.search(s)
    if m:
        return _ZONE_ABBR[m[1]], s[:m.start()] + _SEP + s[m.end():]
    return None, s


def _only_meet_verb(s: str) -> bool:
    """True when every video match is just the verb "meet" ("can we meet friday")."""
    return all(_MEET_VERB.fullmatch(m[0].strip()) for m in _VIDEO.finditer(s))


def _clock(hour: int, minute: int, ampm: str | None, bias: str | None) -> time | None:
    """A wall-clock time; a bare hour is read in office hours unless the day part says otherwise."""
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


def _time_from(pattern: re.Pattern[str], m: re.Match[str], bias: str | None) -> time | None:
    if pattern is _TIME_AMPM:
        return _clock(int(m[1]), int(m[2] or 0), m[3], bias)
    if pattern is _TIME_24:
        if int(m[1]) >= 13 or m[1].startswith("0"):
            return time(int(m[1]), int(m[2]))  # 15:00, 09:30: a 24-hour clock
        return _clock(int(m[1]), int(m[2]), None, bias)
    if pattern is _TIME_NAMED:
        return time(0, 0) if m[1].lower() == "midnight" else time(12, 0)
    if pattern is _TIME_HALF_PAST:
        return _clock(int(m[1]), 30, None, bias)
    return _clock(int(m[1]), 0, None, bias)


def _time_from_any(m: re.Match[str], bias: str | None) -> time | None:
    """The time of an ``_UNTIL`` match (its groups follow ``_T_ANY``)."""
    if m[1]:
        return _clock(int(m[1]), int(m[2] or 0), m[3], bias)
    if m[4]:
        if int(m[4]) >= 13 or m[4].startswith("0"):
            return time(int(m[4]), int(m[5]))
        return _clock(int(m[4]), int(m[5]), None, bias)
    if m[6]:
        return _clock(int(m[6]), 0, None, bias)
    return None


def _parse_day(phrase: str, local_now: datetime) -> date | None:
    """A day phrase through dateparser (future preferred, relative to the message time)."""
    p = phrase.lower().rstrip(".")
    p = re.sub(r"\b(?:tmrw|tmr|tomorow|tommorow|tommorrow|2moro)\b", "tomorrow", p)
    p = re.sub(r"^(?:on\s+)+", "", p)
    p = re.sub(r"\b(?:this\s+coming|coming)\s+", "", p)
    p = re.sub(r"\bthe\s+(?=\d)", "", p)
    p = re.sub(r"\b(" + "|".join(sorted(_WEEKDAYS, key=len, reverse=True)) + r")\b", lambda m: _WEEKDAYS[m[1]], p)
    settings = {"RELATIVE_BASE": local_now.replace(tzinfo=None), "PREFER_DATES_FROM": "future",
                "RETURN_AS_TIMEZONE_AWARE": False, "DATE_ORDER": "MDY", "PREFER_DAY_OF_MONTH": "first"}
    parsed = dateparser.parse(p, languages=["en"], settings=settings)
    return parsed.date() if parsed else None


def _named_people(s: str) -> list[str]:
    """Words after "with"/"w/" that are not addresses: people the message named without an e-mail."""
    out: list[str] = []
    for m in re.finditer(r"(?:\bwith\b|\bw/)\s*([^\u00a6.;!?]*)", s, re.I):
        chunk = re.split(r"\b(?:for|about|on|at|to|re|regarding|in|from|tomorrow|today|called|titled)\b", m[1],
                         maxsplit=1, flags=re.I)[0]
        words = [w for w in re.findall(r"[@\w][\w'.-]*", chunk) if w.lower() not in _PEOPLE_FILLER]
        if not words:
            continue
        if any(w.lower() in _MEETING_NOUNS or w.lower() in _GENERIC_NOUNS for w in words):
            continue  # "with a design review" is not a person
        out.append(" ".join(words))
    return out


def _title(quoted: str | None, s: str) -> str:
    """The event title from what is left of the message (see the module docstring)."""
    if quoted:
        return _tidy(quoted)
    m = _CALLED.search(s)
    if m and m[1].strip(" \u00a6"):
        return _tidy(m[1])
    words = [(w, w.lower().strip(".,!?;:")) for w in re.findall(r"\u00a6|[^\s\u00a6]+", s)]
    best: list[str] | None = None
    best_generic: list[str] | None = None
    for i, (w, low) in enumerate(words):
        low_clean = low.strip("'\"()")
        if low_clean not in _MEETING_NOUNS and low_clean not in _GENERIC_NOUNS:
            continue
        j = i
        while j + 1 < len(words) and (words[j + 1][1] in _MEETING_NOUNS or words[j + 1][1] in _GENERIC_NOUNS):
            j += 1
        k = i
        while k - 1 >= 0 and k - i > -4 and _content(words[k - 1][1]):
            k -= 1
        phrase = [x for x, _ in words[k:j + 1]]
        nouns = {words[x][1] for x in range(k, j + 1)}
        specific = any(n in _MEETING_NOUNS for n in nouns) or k < i
        if specific and best is None:
            best = phrase
        elif best_generic is None:
            best_generic = phrase
    if best:
        return _tidy(" ".join(best))
    m = re.search(_TOPIC_LEAD.pattern + r"\s+(?:the\s+|our\s+)?([^\u00a6,.;!?]+)", s, re.I)
    if m and _words(m[1]):
        return _tidy(" ".join(_words(m[1])[:8]))
    m = re.search(r"\bfor\s+(?:the\s+|our\s+|a\s+|an\s+)?([^\u00a6,.;!?]+)", s, re.I)
    if m and _words(m[1]) and best_generic is None:
        return _tidy(" ".join(_words(m[1])[:8]))
    if best_generic:
        return _tidy(" ".join(best_generic))
    return "Meeting"


def _content(low: str) -> bool:
    low = low.strip(".,!?;:'\"()")
    return bool(low) and low != "\u00a6" and low not in _STOP and not re.fullmatch(r"\d+([.,]\d+)?", low)


def _words(s: str) -> list[str]:
    return [w for w in _TITLE_WORD.findall(s) if w.lower() not in {"the", "a", "an", "our", "my", "with", "and"}]


def _tidy(title: str) -> str:
    title = " ".join(re.sub(r"[\[\]<>*_`~\u00a6]", " ", title).split()).strip(" .,;:!?-")
    if not title:
        return "Meeting"
    return title[0].upper() + title[1:]
