"""The arguments of ``calendar.create`` and what a backend returns.

:class:`CalendarCreateArgs` is the one model every planner fills: the rule-based extractor
(:mod:`tools.calendar.extract`) and, later, an LLM through tool calling (its JSON schema is what
the model sees). Validation makes a bad event impossible to store or run:

- ``start`` is time-zone aware and in the future (against ``context={"now": datetime}`` when given,
  the wall clock otherwise; error type :data:`tools.actions.TIME_PASSED`);
- exactly one length: ``end`` or ``duration_minutes``; the other is filled in, so a validated
  model always has both, and ``end`` is after ``start``;
- the length is between :data:`MIN_DURATION_MINUTES` and :data:`MAX_DURATION_MINUTES`;
- attendees are syntactically valid e-mail addresses (lower-cased, de-duplicated, at most
  :data:`MAX_ATTENDEES`);
- ``timezone`` is an IANA zone name (``Europe/Berlin``); ``start``/``end`` keep their offsets;
- ``recurrence``, when given, makes the event a series: an RFC 5545 ``RRULE`` value checked by
  :func:`tools.calendar.recurrence.check_rrule` against the start read in ``timezone`` (DAILY,
  WEEKLY or MONTHLY; the start is the first occurrence) and stored in normal form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from tools.actions import TIME_PASSED
from tools.arg_checks import IanaZone, context_now, one_line, with_offset
from tools.dates import valid_timezone

from .recurrence import check_rrule, describe_rrule

__all__ = ["CalendarCreateArgs", "CreatedEvent", "MIN_DURATION_MINUTES", "MAX_DURATION_MINUTES", "MAX_ATTENDEES",
           "DEFAULT_DURATION_MINUTES", "EVENT_ID", "is_email", "valid_timezone"]

#: What Google accepts as an event id: base32hex digits, 5-1024 characters. Every backend's key has this shape
#: (here, not in the google module: the tool checks it without importing the Google API client, the google extra).
EVENT_ID = re.compile(r"^[a-v0-9]{5,1024}$")

MIN_DURATION_MINUTES = 5
MAX_DURATION_MINUTES = 8 * 60
DEFAULT_DURATION_MINUTES = 30
MAX_ATTENDEES = 50

# Pragmatic address syntax (RFC 5322 dot-atom local part, a dotted domain with a 2+ letter TLD).
_EMAIL = re.compile(r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
                    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$")

#: What Google accepts as an event id: base32hex digits, 5-1024 characters (the local calendar keeps the same ids).
EVENT_ID = re.compile(r"^[a-v0-9]{5,1024}$")

#: Start and end carry their UTC offset.
_WITH_OFFSET = with_offset("times need a UTC offset (e.g. 2025-03-14T10:00:00+01:00)")


def is_email(value: str) -> bool:
    """True when ``value`` is a syntactically valid e-mail address (no DNS lookup)."""
    return len(value) <= 254 and bool(_EMAIL.match(value))


class CalendarCreateArgs(BaseModel):
    """Arguments of ``calendar.create`` (see the module docstring for the rules).

    Attributes:
        title: the event's title, 1-200 characters.
        start: the start, an aware datetime (ISO 8601 with offset in JSON).
        end: the end; filled from ``duration_minutes`` when omitted.
        duration_minutes: the length in minutes; filled from ``end`` when omitted.
        attendees: invitees' e-mail addresses.
        description: the event's description (plain text, at most 8,000 characters).
        location: a room or address, optional.
        timezone: the IANA zone the event is shown in (the requester's, or one the request named).
        video_conference: add a video meeting (Google Meet on Google Calendar).
        recurrence: an RFC 5545 ``RRULE`` value (``FREQ=WEEKLY;BYDAY=MO``) for a series, or None for
            one event; ``start``/``end`` are then the first occurrence.
        busy: who is busy at ``start`` (filled by the tool from free/busy, never by a model: not in the schema).
        free_slots: other aware starts when everybody is free (the preview offers them as choices).
        availability: a note on the look-up (``"everyone is free"``, ``"calendars not checked: ..."``).
    """

    title: Annotated[str, one_line("the title is empty")] = Field(
        min_length=1, max_length=200, description="Event title, e.g. 'Release review'.")
    start: Annotated[datetime, _WITH_OFFSET] = Field(description="Start time, ISO 8601 with a UTC offset, in the future.")
    end: Annotated[datetime | None, _WITH_OFFSET] = Field(default=None,
                                                          description="End time; give this or duration_minutes.")
    duration_minutes: int | None = Field(default=None, ge=MIN_DURATION_MINUTES, le=MAX_DURATION_MINUTES,
                                         description="Length in minutes; give this or end.")
    attendees: list[str] = Field(default_factory=list, max_length=MAX_ATTENDEES,
                                 description="Invitees' e-mail addresses.")
    description: str = Field(default="", max_length=8000, description="Event description (plain text).")
    location: str = Field(default="", max_length=500, description="Room or address.")
    timezone: IanaZone = Field(default="UTC", description="IANA time zone of the event, e.g. Europe/Berlin.")
    video_conference: bool = Field(default=False, description="Add a video conference (Google Meet on Google "
                                                              "Calendar, a Teams meeting on Microsoft 365).")
    busy: SkipJsonSchema[list[str]] = Field(
        default_factory=list, max_length=MAX_ATTENDEES + 1,
        description="Filled by the bot, not the model: who is busy at start (free/busy before booking).")
    free_slots: SkipJsonSchema[list[datetime]] = Field(
        default_factory=list, max_length=8,
        description="Filled by the bot, not the model: other starts when everybody is free, to pick from.")
    availability: SkipJsonSchema[str] = Field(
        default="", max_length=300,
        description="Filled by the bot: what the free/busy look-up found ('' when none was made).")
    recurrence: str | None = Field(
        default=None, max_length=300,
        description="For a recurring series only: an RFC 5545 RRULE without the 'RRULE:' prefix, e.g. "
                    "FREQ=WEEKLY;BYDAY=MO (every Monday), FREQ=WEEKLY;INTERVAL=2;BYDAY=TU (every other Tuesday), "
                    "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR (weekdays), FREQ=MONTHLY;BYMONTHDAY=1; optional COUNT or "
                    "UNTIL. start is the first occurrence. Omit for a single event.")

    @field_validator("attendees")
    @classmethod
    def _attendees(cls, v: list[str]) -> list[str]:
        out: list[str] = []
        for raw in v:
            e = raw.strip().strip("<>").lower()
            if e.startswith("mailto:"):
                e = e[7:]
            if not is_email(e):
                raise ValueError(f"{raw!r} is not a valid e-mail address")
            if e not in out:
                out.append(e)
        return out

    @model_validator(mode="after")
    def _times(self, info: ValidationInfo) -> CalendarCreateArgs:
        if self.start <= context_now(info):  # typed, so the action service can say so without reading the text
            raise PydanticCustomError(TIME_PASSED, "the start ({start}) is not in the future",
                                      {"start": self.start.isoformat()})
        if self.end is None and self.duration_minutes is None:
            raise ValueError("give either end or duration_minutes")
        if self.end is not None:
            if self.end <= self.start:
                raise ValueError("the end must be after the start")
            minutes = (self.end - self.start) / timedelta(minutes=1)
            if self.duration_minutes is not None and abs(minutes - self.duration_minutes) > 0.5:
                raise ValueError(f"end and duration_minutes disagree ({minutes:g} vs {self.duration_minutes} minutes)")
            if not MIN_DURATION_MINUTES <= minutes <= MAX_DURATION_MINUTES:
                raise ValueError(f"the event must last between {MIN_DURATION_MINUTES} and {MAX_DURATION_MINUTES} "
                                 f"minutes, not {minutes:g}")
            self.duration_minutes = round(minutes)
        else:
            self.end = self.start + timedelta(minutes=self.duration_minutes or 0)
        if self.recurrence is not None:
            if not self.recurrence.strip():
                self.recurrence = None
            else:
                self.recurrence = check_rrule(self.recurrence, self.local_start())
        return self

    def at(self, start: datetime) -> CalendarCreateArgs:
        """The same event at another ``start`` (same length; no choices left to make)."""
        length = timedelta(minutes=self.duration_minutes or 0)
        return self.model_copy(update={"start": start, "end": start + length, "busy": [], "free_slots": []})

    def describe_recurrence(self) -> str:
        """The series in words (``every Monday``), or "" for a single event."""
        return describe_rrule(self.recurrence, self.local_start()) if self.recurrence else ""

    def local_start(self) -> datetime:
        """``start`` in the event's time zone."""
        return self.start.astimezone(ZoneInfo(self.timezone))

    def local_end(self) -> datetime:
        """``end`` in the event's time zone."""
        assert self.end is not None
        return self.end.astimezone(ZoneInfo(self.timezone))


@dataclass(frozen=True, slots=True)
class CreatedEvent:
    """What a calendar backend returns after creating (or finding) the event.

    Attributes:
        event_id: the backend's event id (the action's idempotency key).
        link: a link to open the event (Google's ``htmlLink``; a ``file://`` URL of the ``.ics`` locally).
        backend: ``"google"`` or ``"local"``.
        created: False when the event already existed (a retried insert found its own earlier event).
        conference_link: the video meeting link, when one was created.
        calendar: the calendar written to (a Google calendar id, or the local owner).
        raw: the backend's own record (Google's event resource), for the audit log.
    """

    event_id: str
    link: str
    backend: str
    created: bool = True
    conference_link: str = ""
    calendar: str = ""
    raw: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no raw resource)."""
        return {"event_id": self.event_id, "link": self.link, "backend": self.backend, "created": self.created,
                "conference_link": self.conference_link, "calendar": self.calendar}
