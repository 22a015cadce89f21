"""A meeting's length (``30 min``, ``an hour and a half``, ``1h30``) and a relative start (``in 30 minutes``)."""

from __future__ import annotations

import re
from collections.abc import Callable

from .words import HOUR_UNIT, MIN_UNIT, NUM, number_value

__all__ = ["DURATIONS", "RELATIVE_START", "parse_duration"]

DURATIONS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], float]]] = [
    (re.compile(r"\b(?:an?|one)\s+hour\s+and\s+a\s+half\b", re.I), lambda m: 90),
    (re.compile(r"\b(\d+)\s+and\s+a\s+half\s+hours?\b", re.I), lambda m: int(m[1]) * 60 + 30),
    (re.compile(r"\b(?:a\s+)?half(?:[- ]an)?[- ]hour\b|\bhalf\s+an\s+hour\b", re.I), lambda m: 30),
    (re.compile(r"\b(?:a\s+)?quarter(?:\s+of\s+an)?[- ]hour\b", re.I), lambda m: 15),
    (re.compile(r"\b(\d{1,2})\s*(?:h|hrs?|hours?)\s*(?:and\s+)?(\d{1,2})\s*(?:m|mins?|minutes?)?(?![\w:])", re.I),
     lambda m: int(m[1]) * 60 + int(m[2])),
    (re.compile(rf"\b({NUM})[\s-]*{HOUR_UNIT}(?:[\s-]*long)?\b", re.I), lambda m: number_value(m[1]) * 60),
    (re.compile(rf"\b({NUM})[\s-]*{MIN_UNIT}(?:[\s-]*long)?\b", re.I), lambda m: number_value(m[1])),
    (re.compile(r"\bhour[- ]long\b", re.I), lambda m: 60),
]
RELATIVE_START = re.compile(rf"\bin\s+({NUM})\s*({HOUR_UNIT}|{MIN_UNIT})\b", re.I)


def parse_duration(text: str) -> int | None:
    """The first meeting length in ``text``, in whole minutes (``"1.5h"`` -> 90), or None."""
    for pattern, minutes in DURATIONS:
        m = pattern.search(text)
        if m and not _is_relative(text, m.start()):
            return round(minutes(m))
    return None


def _is_relative(text: str, start: int) -> bool:
    """True when the number at ``start`` follows "in" (``in 30 minutes`` is a start, not a length)."""
    return bool(re.search(r"\bin\s+$", text[max(0, start - 4):start], re.I))
