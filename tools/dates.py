"""Date and time helpers every tool may share (no tool's own phrasing lives here)."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["valid_timezone"]


def valid_timezone(name: str) -> bool:
    """True when ``name`` is an IANA time zone known to this machine (``tzdata``)."""
    if not name or name.startswith("/") or ".." in name:
        return False
    try:
        ZoneInfo(name)
        return True
    except (ZoneInfoNotFoundError, ValueError):
        return False
