"""Checks the action tools' argument models share (``calendar.create``, ``reminder.create``): text folded onto
one line, an IANA time zone, a time with a UTC offset, "now" read from the validation context, and a
failed validation said in one line (:func:`problems`).

Each is a pydantic ``AfterValidator`` for an ``Annotated`` field, so a model states its rule where it
declares the field (the JSON schema a model sees is unchanged), and a failed check is pydantic's
``value_error`` with the message given here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Annotated

from pydantic import AfterValidator, ValidationError, ValidationInfo

from .dates import valid_timezone

__all__ = ["IanaZone", "one_line", "with_offset", "context_now", "problems"]


def _iana_zone(value: str) -> str:
    if not valid_timezone(value):
        raise ValueError(f"{value!r} is not an IANA time zone such as Europe/Berlin or America/New_York")
    return value


#: An IANA time zone name known to this machine (``Europe/Berlin``).
IanaZone = Annotated[str, AfterValidator(_iana_zone)]


def one_line(empty: str) -> AfterValidator:
    """A check that folds every run of white space (newlines too) into one space; ``empty`` is the error
    message when nothing is left (``"the title is empty"``)."""
    def check(value: str) -> str:
        value = " ".join(value.split())
        if not value:
            raise ValueError(empty)
        return value

    return AfterValidator(check)


def with_offset(message: str) -> AfterValidator:
    """A check that a time (or None) carries a UTC offset; ``message`` is the error for a naive one."""
    def check(value: datetime | None) -> datetime | None:
        if value is not None and (value.tzinfo is None or value.utcoffset() is None):
            raise ValueError(message)
        return value

    return AfterValidator(check)


def context_now(info: ValidationInfo | None, clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)
                ) -> datetime:
    """The ``now`` a model compares its times with: ``context={"now": aware_datetime}`` when the caller
    validated with one, else the wall clock (UTC)."""
    now = (info.context or {}).get("now") if info and info.context else None
    return now or clock()


def problems(exc: ValidationError) -> str:
    """What a failed validation found, each error's message joined by ``"; "`` (for a clarifying question)."""
    return "; ".join(str(e.get("msg", "")) for e in exc.errors())
