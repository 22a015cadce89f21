"""What the extractor understood (:class:`EventDraft`) and the one question for what is missing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from ..args import MAX_DURATION_MINUTES, MIN_DURATION_MINUTES

__all__ = ["EventDraft"]

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
