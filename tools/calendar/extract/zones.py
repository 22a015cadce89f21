"""A time zone named in the message: ``PT``, ``CET``, ``Europe/Berlin``, ``UTC+2``, ``pacific time``."""

from __future__ import annotations

import re

from ..args import valid_timezone
from .words import SEP

__all__ = ["take_zone"]

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


def take_zone(s: str) -> tuple[str | None, str]:
    m = _ZONE_OFFSET_RE.search(s)
    if m:
        hours = int(m[2])
        if hours <= 14:
            name = "UTC" if hours == 0 else f"Etc/GMT{'-' if m[1] == '+' else '+'}{hours}"
            return name, s[:m.start()] + SEP + s[m.end():]
    m = _ZONE_IANA_RE.search(s)
    if m and valid_timezone(m[1]):
        return m[1], s[:m.start()] + SEP + s[m.end():]
    m = _ZONE_WORD_RE.search(s)
    if m:
        return _ZONE_WORDS[m[1].lower()], s[:m.start()] + SEP + s[m.end():]
    m = _ZONE_ABBR_RE.search(s)
    if m:
        return _ZONE_ABBR[m[1]], s[:m.start()] + SEP + s[m.end():]
    return None, s
