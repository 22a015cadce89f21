"""The arguments of ``reminder.create``.

Validation makes a bad reminder impossible to store or run: the text is 1-500 characters on one
line; ``at`` is time-zone aware and in the future (against ``context={"now": datetime}`` when
given, the wall clock otherwise; error type :data:`tools.actions.TIME_PASSED`); ``timezone`` is an
IANA zone (the one the time is shown in).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from tools.actions import TIME_PASSED
from tools.arg_checks import IanaZone, context_now, one_line, with_offset

__all__ = ["ReminderCreateArgs", "MAX_TEXT"]

MAX_TEXT = 500


class ReminderCreateArgs(BaseModel):
    """Arguments of ``reminder.create``.

    Attributes:
        text: what to remind the requester of ("send the report").
        at: when to send it (aware; ISO 8601 with an offset in JSON).
        timezone: the requester's IANA zone, in which the time is shown.
    """

    text: Annotated[str, one_line("the reminder's text is empty")] = Field(
        min_length=1, max_length=MAX_TEXT,
        description="What to remind the user of, in their words, e.g. 'send the report'.")
    at: Annotated[datetime, with_offset("the time needs a UTC offset (e.g. 2025-03-14T09:00:00+01:00)")] = Field(
        description="When to send the reminder: ISO 8601 with a UTC offset, in the future.")
    timezone: IanaZone = Field(default="UTC", description="The user's IANA time zone, e.g. Europe/Berlin.")

    @model_validator(mode="after")
    def _future(self, info: ValidationInfo) -> ReminderCreateArgs:
        if self.at <= context_now(info):
            raise PydanticCustomError(TIME_PASSED, "the reminder time ({at}) is not in the future",
                                      {"at": self.at.isoformat()})
        return self
