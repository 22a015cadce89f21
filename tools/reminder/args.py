"""The arguments of ``reminder.create``.

Validation makes a bad reminder impossible to store or run: the text is 1-500 characters on one
line; ``at`` is time-zone aware and in the future (against ``context={"now": datetime}`` when
given, the wall clock otherwise; error type :data:`tools.actions.TIME_PASSED`); ``timezone`` is an
IANA zone (the one the time is shown in).
"""

from __future__ import annotations

from datetime import datetime, timezone

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tools.actions import TIME_PASSED
from tools.dates import valid_timezone

__all__ = ["ReminderCreateArgs", "MAX_TEXT"]

MAX_TEXT = 500


class ReminderCreateArgs(BaseModel):
    """Arguments of ``reminder.create``.

    Attributes:
        text: what to remind the requester of ("send the report").
        at: when to send it (aware; ISO 8601 with an offset in JSON).
        timezone: the requester's IANA zone, in which the time is shown.
    """

    text: str = Field(min_length=1, max_length=MAX_TEXT,
                      description="What to remind the user of, in their words, e.g. 'send the report'.")
    at: datetime = Field(description="When to send the reminder: ISO 8601 with a UTC offset, in the future.")
    timezone: str = Field(default="UTC", description="The user's IANA time zone, e.g. Europe/Berlin.")

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        v = " ".join(v.split())
        if not v:
            raise ValueError("the reminder's text is empty")
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        if not valid_timezone(v):
            raise ValueError(f"{v!r} is not an IANA time zone such as Europe/Berlin or America/New_York")
        return v

    @field_validator("at")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None or v.utcoffset() is None:
            raise ValueError("the time needs a UTC offset (e.g. 2025-03-14T09:00:00+01:00)")
        return v

    @model_validator(mode="after")
    def _future(self, info: ValidationInfo) -> ReminderCreateArgs:
        now = (info.context or {}).get("now") if info and info.context else None
        now = now or datetime.now(timezone.utc)
        if self.at <= now:
            raise PydanticCustomError(TIME_PASSED, "the reminder time ({at}) is not in the future",
                                      {"at": self.at.isoformat()})
        return self
